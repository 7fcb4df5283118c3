// checkpoint.cpp - opening a checkpoint: detection by content, then the format's reader, walk and validation.
#include "maploc/torch/checkpoint.h"

#include <algorithm>

#include "maploc/error.h"
#include "support/sniff.h"
#include "dcp.h"
#include "state.h"
#include "zip/deferred.h"
#include "support/memory_guard.h"
#include "url_source.h"

namespace maploc::torch {
namespace {

constexpr std::size_t kSniffBytes = 512;

bool is_truncated_zip(const Error& e) {
  return e.code() == ErrorCode::kZipNotZip || e.code() == ErrorCode::kZipTruncated;
}

[[noreturn]] void not_a_checkpoint(const Checkpoint::State& st, ContentKind kind, const std::string& detail = {}) {
  fail(ErrorCode::kTorchNotCheckpoint,
       "not a torch checkpoint: it looks like " + describe_content(kind) + (detail.empty() ? "" : " (" + detail + ")"),
       st.path);
}

// Runs one step of reading the zip container, saying "truncated" or "not a
// checkpoint" for the errors that mean the file is not a whole zip archive.
template <typename Step>
void zip_step(const Checkpoint::State& st, ContentKind kind, const std::string& detail, Step step) {
  try {
    step();
  } catch (const Error& e) {
    if (!is_truncated_zip(e)) throw;
    if (kind == ContentKind::kZip) {
      fail(ErrorCode::kTorchNotCheckpoint,
           "not a readable torch checkpoint: it looks like a truncated zip archive (the download or copy was cut "
           "short): " + e.message(),
           st.path);
    }
    not_a_checkpoint(st, kind, detail);
  }
}

// Zip archives: the magic at offset 0, or anywhere the end record says: bytes
// prepended to an archive (torch's test_serialization_with_header), or a pickle
// written before torch.save into the same file (test_serialization_offset,
// which torch.load reads from the file object positioned past the pickle).
// Without an end record, the error says what the sniff found (`detail` adds to it).
void open_zip(Checkpoint::State& st, ContentKind kind, const std::string& detail = {}) {
  static constexpr std::string_view kEarly[] = {"data.pkl", "constants.pkl"};
  std::optional<zip::DeferredLocate> pending;
  zip_step(st, kind, detail, [&] { pending.emplace(st.file, st.options.limits, kEarly, st.archive); });
  read_zip(st, [&] { zip_step(st, kind, detail, [&] { pending->run(); }); });
}

void read_any(Checkpoint::State& st) {
  const auto head = st.file.bytes.span().first(std::min<std::size_t>(st.file.bytes.size(), kSniffBytes));
  const ContentKind kind = sniff_content(head);
  switch (kind) {
    case ContentKind::kZip:
      return open_zip(st, kind);
    case ContentKind::kTorchLegacy:
      return read_legacy(st);
    case ContentKind::kTorchTar:
      return read_tar(st);
    case ContentKind::kTorchPreview:
      fail(ErrorCode::kTorchPreviewFormat,
           "File is an unsupported archive format from the preview release (PYTORCH1); re-save it with a current torch",
           st.path);
    case ContentKind::kTorchMobile:
      fail(ErrorCode::kTorchUnsupportedFormat,
           "a TorchScript-mobile flatbuffer (PTMF), which maploc does not read", st.path);
    case ContentKind::kSafetensors:
      return read_safetensors(st);
    case ContentKind::kEmpty:
      not_a_checkpoint(st, kind);
    case ContentKind::kHtml:
    case ContentKind::kGitLfsPointer:
    case ContentKind::kNumpy:
      return open_zip(st, kind);
    case ContentKind::kPickle:
      // A legacy stream whose first pickle runs something before it yields the magic number.
      if (legacy_magic_first(st)) return read_legacy(st);
      return open_zip(st, kind,
                      "a plain pickle, not written by torch.save, and no torch.save archive follows it; "
                      "'maploc dis' shows what it holds");
    case ContentKind::kUnknown:
      // The same in protocols 0/1, which have no PROTO opcode: GLOBAL, INST or MARK first.
      if (!head.empty() && (head[0] == 'c' || head[0] == 'i' || head[0] == '(') && legacy_magic_first(st)) {
        return read_legacy(st);
      }
      return open_zip(st, kind);
  }
}

}  // namespace

void fail(ErrorCode code, std::string message, std::string item, std::optional<std::uint64_t> offset) {
  throw Error(code, Stage::kTorch, std::move(message), offset, std::move(item));
}

std::string_view format_name(Format format) noexcept {
  switch (format) {
    case Format::kZip: return "zip";
    case Format::kLegacy: return "legacy";
    case Format::kTar: return "tar";
    case Format::kTorchScript: return "torchscript";
    case Format::kSafetensors: return "safetensors";
    case Format::kSet: return "set";
    case Format::kDcp: return "dcp";
  }
  return "zip";
}

std::string_view byteorder_name(ByteOrder order) noexcept { return order == ByteOrder::kBig ? "big" : "little"; }

Checkpoint::Checkpoint(std::unique_ptr<State> state) : state_(std::move(state)) {}
Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;
Checkpoint& Checkpoint::operator=(Checkpoint&&) noexcept = default;
Checkpoint::~Checkpoint() = default;

Checkpoint Checkpoint::open(const std::filesystem::path& path, const Options& options) {
  if (remote::is_url(path.string())) return from_file(open_url(path.string(), options), options);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    if (const auto metadata = dcp_metadata_files(path); !metadata.empty()) {
      auto st = std::make_unique<State>();
      st->options = options;
      read_dcp(*st, path, metadata);
      return Checkpoint(std::move(st));
    }
    return Checkpoint(read_set_directory(path, options));
  }
  return from_file(MappedFile::open(path), options);
}

Checkpoint Checkpoint::open_set(const std::vector<std::filesystem::path>& files, const Options& options) {
  return maploc::detail::guard_memory(Stage::kTorch, files.empty() ? std::string() : files.front().string(),
                                      [&] { return Checkpoint(read_set_files(files, options)); });
}

Checkpoint Checkpoint::from_file(MappedFile file, const Options& options) {
  const std::string path = file.path;
  return maploc::detail::guard_memory(Stage::kTorch, path, [&] {
    auto st = std::make_unique<State>();
    st->path = file.path;
    st->file = std::move(file);
    st->options = options;
    if (looks_like_json(st->file.bytes)) {
      read_set_index(*st);
      return Checkpoint(std::move(st));
    }
    read_any(*st);
    if (st->format != Format::kSafetensors) interpret(*st);
    validate(*st);
    check_completeness(*st);
    if (st->storages.empty() && st->tensors.empty()) st->diagnose("the checkpoint holds no storages");
    return Checkpoint(std::move(st));
  });
}

const std::string& Checkpoint::path() const noexcept { return state_->path; }
Format Checkpoint::format() const noexcept { return state_->format; }
ByteOrder Checkpoint::byteorder() const noexcept { return state_->byteorder; }
bool Checkpoint::has_byteorder_record() const noexcept { return state_->has_byteorder_record; }
int Checkpoint::pickle_protocol() const noexcept { return state_->protocol; }
const std::vector<Storage>& Checkpoint::storages() const noexcept { return state_->storages; }
const std::vector<Tensor>& Checkpoint::tensors() const noexcept { return state_->tensors; }
std::shared_ptr<const std::vector<Tensor>> Checkpoint::shared_tensors() const noexcept {
  return state_->tensors_owner;
}
const std::vector<std::string>& Checkpoint::unknown_globals() const noexcept { return state_->unknown_globals; }
const std::vector<std::string>& Checkpoint::version_hints() const noexcept { return state_->hints; }
const std::vector<std::size_t>& Checkpoint::unreferenced_storages() const noexcept { return state_->unreferenced; }
const std::vector<std::string>& Checkpoint::unknown_rebuilds() const noexcept { return state_->unknown_rebuilds; }
const Limits& Checkpoint::limits() const noexcept { return state_->options.limits; }
const pickle::Value& Checkpoint::root() const noexcept { return state_->root; }
const pickle::Value& Checkpoint::constants_root() const noexcept { return state_->constants_root; }

const zip::Archive* Checkpoint::archive() const noexcept {
  return state_->archive ? &*state_->archive : nullptr;
}

const std::vector<std::pair<std::string, std::string>>& Checkpoint::metadata() const noexcept {
  return state_->metadata;
}

Checkpoint::PickleSpan Checkpoint::object_pickle() const {
  const State& st = *state_;
  if (st.archive && (st.format == Format::kZip || st.format == Format::kTorchScript)) {
    const zip::Record& rec = st.archive->at("data.pkl");
    return {st.archive->read(rec), 0, rec.name};
  }
  if (st.format == Format::kLegacy) {
    // The object is the fourth pickle of the stream (§2.1); the first three
    // were checked on open, so walking them again cannot fail differently.
    pickle::Options po;
    po.limits = st.options.limits;
    po.stream_name = st.path;
    po.allow_trailing = true;
    for (int i = 0; i < 3; ++i) po.start_offset = pickle::run(st.file.bytes, po).end_offset();
    return {st.file.bytes, po.start_offset, st.path};
  }
  throw Error(ErrorCode::kInvalidArgument, Stage::kTorch,
              std::string("a ") + std::string(format_name(st.format)) + " checkpoint has no single object pickle",
              std::nullopt, st.path);
}

const std::vector<ByteItem>& Checkpoint::byte_items() const noexcept { return state_->byte_items; }

const std::vector<SetMember>& Checkpoint::members() const noexcept { return state_->member_info; }

std::size_t Checkpoint::member_of_storage(std::size_t storage_index) const {
  if (storage_index >= state_->storage_member.size()) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kTorch,
                "storage index " + std::to_string(storage_index) + " is not a set member's", std::nullopt, state_->path);
  }
  return state_->storage_member[storage_index];
}

std::optional<std::size_t> Checkpoint::storage_of_handle(std::uint64_t handle) const noexcept {
  if (handle >= state_->refs.size()) return std::nullopt;
  return state_->refs[handle].storage;
}

// The storage accessors: the index checked here, the rest asked of the layout's source (storage_source.h).

Bytes Checkpoint::storage_bytes(std::size_t storage_index) const {
  if (storage_index >= state_->storages.size()) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kTorch,
                "storage index " + std::to_string(storage_index) + " out of range", std::nullopt, state_->path);
  }
  return state_->source->bytes(storage_index);
}

std::optional<FileRange> Checkpoint::storage_file_range(std::size_t storage_index) const {
  if (storage_index >= state_->storages.size()) return std::nullopt;
  return state_->source->file_range(storage_index);
}

std::optional<std::uint64_t> Checkpoint::storage_file_offset(std::size_t storage_index) const {
  if (storage_index >= state_->storages.size()) return std::nullopt;
  return state_->source->own_file_offset(storage_index);
}

std::optional<RemoteRange> Checkpoint::remote_range(std::size_t storage_index) const {
  if (storage_index >= state_->storages.size()) return std::nullopt;
  return state_->source->remote_range(storage_index);
}

void Checkpoint::prefetch(std::span<const std::size_t> storage_indexes) const {
  state_->source->prefetch(storage_indexes);
}

Bytes Checkpoint::storage_bytes(const Storage& storage) const {
  const auto* first = state_->storages.data();
  if (&storage < first || &storage >= first + state_->storages.size()) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kTorch, "storage does not belong to this checkpoint",
                std::nullopt, state_->path);
  }
  return storage_bytes(static_cast<std::size_t>(&storage - first));
}

}  // namespace maploc::torch
