// dcp_format.cpp - torch.distributed.checkpoint's .metadata, read by the inert pickle machine, into storages and tensors.
#include <algorithm>
#include <map>
#include <system_error>

#include "maploc/error.h"
#include "maploc/pickle/machine.h"
#include "support/sniff.h"
#include "support/flat_index.h"
#include "support/seeded_hash.h"
#include "dcp.h"
#include "globals.h"
#include "state.h"

namespace maploc::torch {
namespace fs = std::filesystem;
using pickle::Kind;
using pickle::Value;

namespace {

constexpr std::string_view kMetadataModule = "torch.distributed.checkpoint.metadata";
constexpr std::string_view kFilesystemModule = "torch.distributed.checkpoint.filesystem";

[[noreturn]] void bad(const std::string& why, const std::string& item) {
  fail(ErrorCode::kTorchBadDcp, "torch.distributed.checkpoint: " + why, item);
}

// The BUILD state of an object of class module.name (NEWOBJ or REDUCE, then BUILD), or nullptr when
// `v` is not such an object.
const Value* state_of(const Value& v, std::string_view module, std::string_view name) {
  if (!v.is(Kind::kObject) && !v.is(Kind::kReduce)) return nullptr;
  if (!v.callable().is_global(module, name) || v.build_states().size() != 1) return nullptr;
  return &v.build_states()[0];
}

const Value& field(const Value& state, std::string_view key, const std::string& item) {
  const Value* v = state.is(Kind::kDict) ? state.find(key) : nullptr;
  if (v == nullptr) bad("an object lacks its '" + std::string(key) + "' field", item);
  return *v;
}

std::int64_t integer(const Value& v, const std::string& what, const std::string& item) {
  if (!v.is(Kind::kInt) || v.is_big_int() || v.as_int() < 0) bad(what + " is not a non-negative integer", item);
  return v.as_int();
}

// torch.Size((a, b, ...)): REDUCE of the global torch.Size over a tuple of ints.
std::vector<std::int64_t> size_of(const Value& v, const std::string& what, const std::string& item) {
  if (!v.is(Kind::kReduce) || !v.callable().is_global("torch", "Size") || !v.args().is(Kind::kTuple) ||
      v.args().size() != 1 || !v.args()[0].is(Kind::kTuple)) {
    bad(what + " is not a torch.Size", item);
  }
  std::vector<std::int64_t> out;
  for (const Value& d : v.args()[0].elements()) out.push_back(integer(d, what, item));
  return out;
}

std::string text(const Value& v, const std::string& what, const std::string& item) {
  if (!v.is(Kind::kStr)) bad(what + " is not a string", item);
  return std::string(v.as_str());
}

// TensorProperties' state: the tuple of its __getstate__ (dtype, layout, requires_grad,
// memory_format, pin_memory), or a dict in older writers.
std::pair<DType, bool> properties_of(const Value& v, const std::string& fqn) {
  const Value* st = state_of(v, kMetadataModule, "TensorProperties");
  if (st == nullptr) bad("tensor '" + fqn + "' has no TensorProperties", fqn);
  const Value* dtype = nullptr;
  const Value* grad = nullptr;
  if (st->is(Kind::kTuple) && st->size() >= 3) {
    dtype = &(*st)[0];
    grad = &(*st)[2];
  } else if (st->is(Kind::kDict)) {
    dtype = st->find("dtype");
    grad = st->find("requires_grad");
  }
  if (dtype == nullptr || !dtype->is(Kind::kGlobal) || dtype->global_module() != "torch") {
    bad("tensor '" + fqn + "' has no torch dtype in its TensorProperties", fqn);
  }
  const auto d = dtype_from_name(dtype->global_name());
  if (!d) fail(ErrorCode::kTorchUnknownDType, "torch.distributed.checkpoint: tensor '" + fqn + "' has dtype 'torch." +
               std::string(dtype->global_name()) + "', which maploc does not know", fqn);
  return {*d, grad != nullptr && grad->is(Kind::kBool) && grad->as_bool()};
}

// One storage_data entry: MetadataIndex(fqn, offset) -> _StorageInfo.
struct Located {
  std::string fqn;
  std::vector<std::int64_t> offsets;
  std::uint32_t file = 0;
  std::uint64_t offset = 0, length = 0;
  std::string transform;  // the first transform descriptor, empty for none
};

bool located_less(const Located& a, const Located& b) {
  return std::tie(a.fqn, a.offsets) < std::tie(b.fqn, b.offsets);
}

// Appends the entries of one metadata file's storage_data; `names` indexes layout.file_names.
void storage_data(const Value& v, DcpLayout& layout, maploc::detail::FlatIndex& names, const std::string& meta,
                  std::vector<Located>& out) {
  if (!v.is(Kind::kDict)) bad("storage_data is not a dict", meta);
  for (const auto& item : v.items()) {
    const Value* key = state_of(item.key, kMetadataModule, "MetadataIndex");
    const Value* info = state_of(item.value, kFilesystemModule, "_StorageInfo");
    if (key == nullptr || info == nullptr) bad("a storage_data entry is not MetadataIndex -> _StorageInfo", meta);
    Located l;
    l.fqn = text(field(*key, "fqn", meta), "MetadataIndex.fqn", meta);
    const Value* off = key->find("offset");  // absent (None) for BYTE_IO items
    if (off != nullptr && !off->is_none()) l.offsets = size_of(*off, "MetadataIndex.offset", l.fqn);
    const std::string path = text(field(*info, "relative_path", l.fqn), "_StorageInfo.relative_path", l.fqn);
    const fs::path p(path);
    if (p.is_absolute() || p.has_parent_path() || path == ".." || path == ".") {
      bad("item '" + l.fqn + "' lies in '" + path + "', outside the checkpoint directory", meta);
    }
    const auto next = static_cast<std::uint32_t>(layout.file_names.size());
    const auto known = names.insert_unique(maploc::detail::hash_text(path), next,
                                           [&](std::uint32_t i) { return layout.file_names[i] == path; });
    l.file = known.value_or(next);
    if (!known) layout.file_names.push_back(path);
    l.offset = static_cast<std::uint64_t>(integer(field(*info, "offset", l.fqn), "_StorageInfo.offset", l.fqn));
    l.length = static_cast<std::uint64_t>(integer(field(*info, "length", l.fqn), "_StorageInfo.length", l.fqn));
    if (const Value* tr = info->find("transform_descriptors"); tr != nullptr && !tr->is_none()) {
      if (!tr->is(Kind::kList)) bad("item '" + l.fqn + "' has transform_descriptors that are not a list", l.fqn);
      for (const Value& d : tr->elements()) {
        l.transform += (l.transform.empty() ? "" : "+") + text(d, "a transform descriptor", l.fqn);
      }
    }
    out.push_back(std::move(l));
  }
}

// One tensor from its TensorStorageMetadata: one, or one per rank-local metadata that names it,
// which must agree on dtype and size; their chunks together, a chunk two ranks both wrote
// (replicated, or a plain tensor: no deduplication without collectives) taken once.
void add_tensor(Checkpoint::State& st, DcpLayout& layout, const std::string& fqn, const std::vector<const Value*>& tsms,
                const std::vector<Located>& located) {
  const Value& tsm = *tsms.front();
  const auto [dtype, requires_grad] = properties_of(field(tsm, "properties", fqn), fqn);
  Tensor t;
  t.name = fqn;
  t.dtype = dtype;
  t.requires_grad = requires_grad;
  t.shape = size_of(field(tsm, "size", fqn), "the tensor size", fqn);
  if (t.shape.size() > st.options.limits.torch_max_rank) bad("tensor '" + fqn + "' has too many dimensions", fqn);
  std::uint64_t numel = 1;
  for (const auto d : t.shape) {
    if (d != 0 && numel > UINT64_MAX / 16 / static_cast<std::uint64_t>(d)) bad("tensor '" + fqn + "' is too large", fqn);
    numel *= static_cast<std::uint64_t>(d);
  }
  t.stride.assign(t.shape.size(), 1);
  for (std::size_t d = t.shape.size(); d-- > 1;) t.stride[d - 1] = t.stride[d] * std::max<std::int64_t>(t.shape[d], 1);
  std::vector<DcpChunk> chunks;
  for (const Value* other : tsms) {
    if (other == &tsm) continue;
    if (properties_of(field(*other, "properties", fqn), fqn).first != dtype ||
        size_of(field(*other, "size", fqn), "the tensor size", fqn) != t.shape) {
      bad("tensor '" + fqn + "' has a different dtype or size in two ranks' metadata files", fqn);
    }
  }
  std::map<std::vector<std::int64_t>, std::vector<std::int64_t>> taken;  // offsets -> sizes, with several ranks
  for (const Value* each : tsms) {
    const Value& list = field(*each, "chunks", fqn);
    if (!list.is(Kind::kList)) bad("tensor '" + fqn + "' has chunks that are not a list", fqn);
    for (const Value& c : list.elements()) {
      const Value* cs = state_of(c, kMetadataModule, "ChunkStorageMetadata");
      if (cs == nullptr) bad("tensor '" + fqn + "' has a chunk that is not ChunkStorageMetadata", fqn);
      DcpChunk chunk;
      chunk.offsets = size_of(field(*cs, "offsets", fqn), "chunk offsets", fqn);
      chunk.sizes = size_of(field(*cs, "sizes", fqn), "chunk sizes", fqn);
      if (tsms.size() > 1) {
        const auto [seen, fresh] = taken.emplace(chunk.offsets, chunk.sizes);
        if (!fresh && seen->second != chunk.sizes) {
          bad("tensor '" + fqn + "' has chunks of different sizes at the same offsets in two ranks' metadata", fqn);
        }
        if (!fresh) continue;  // written by an earlier rank too
      }
      Located probe;
      probe.fqn = fqn;
      probe.offsets = chunk.offsets;
      const auto at = std::lower_bound(located.begin(), located.end(), probe, located_less);
      if (at == located.end() || at->fqn != fqn || at->offsets != chunk.offsets) {
        bad("the chunk of tensor '" + fqn + "' at its offsets has no storage_data entry (a rank's file is missing "
            "from the metadata)", fqn);
      }
      chunk.file = at->file;
      chunk.offset = at->offset;
      chunk.length = at->length;
      chunk.transform = at->transform;
      chunks.push_back(std::move(chunk));
    }
  }
  Storage s;
  s.key = fqn;
  s.dtype = dtype;
  s.numel = numel;
  s.nbytes = numel * element_size(dtype);
  s.location = "cpu";
  s.record = fqn;
  t.storage = st.storages.size();
  st.storages.push_back(std::move(s));
  st.tensors.push_back(std::move(t));
  layout.chunks.push_back(std::move(chunks));
  layout.shapes.push_back(st.tensors.back().shape);
}

}  // namespace

std::vector<fs::path> dcp_metadata_files(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir / ".metadata", ec)) return {dir / ".metadata"};
  std::vector<std::pair<std::uint64_t, fs::path>> ranks;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    // __R.metadata, R a rank in decimal (use_collectives=False: one per rank, none global)
    const std::string name = it->path().filename().string();
    constexpr std::string_view kSuffix = ".metadata";
    if (name.size() <= 2 + kSuffix.size() || name.size() > 2 + 9 + kSuffix.size() || name.compare(0, 2, "__") != 0 ||
        name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
      continue;
    }
    const std::string digits = name.substr(2, name.size() - 2 - kSuffix.size());
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    ranks.emplace_back(std::stoull(digits), it->path());
  }
  std::sort(ranks.begin(), ranks.end());
  std::vector<fs::path> out;
  for (auto& r : ranks) out.push_back(std::move(r.second));
  return out;
}

void read_dcp(Checkpoint::State& st, const fs::path& dir, const std::vector<fs::path>& metas) {
  if (metas.empty()) bad("no '.metadata' nor any rank's '__R.metadata' in the directory", dir.string());
  st.path = dir.string();
  auto layout = std::make_shared<DcpLayout>();
  layout->dir = dir.string();
  layout->limits = st.options.limits;
  maploc::detail::FlatIndex file_index;
  std::vector<Located> located;
  // Every state_dict entry by fqn, in first-seen order: its TensorStorageMetadata from each
  // metadata file that names it, or the file that holds it as a BYTE_IO item.
  struct Entry {
    std::string fqn;
    std::vector<const Value*> tensors;
    bool bytes = false;
  };
  std::vector<Entry> entries;
  maploc::detail::FlatIndex entry_index;
  st.results.reserve(st.results.size() + metas.size());  // roots are referred to below: no reallocation
  for (const fs::path& meta_path : metas) {
    const std::string meta = meta_path.string();
    MappedFile file = MappedFile::open(meta_path);
    pickle::Options po;
    po.limits = st.options.limits;
    po.stream_name = meta;
    st.results.push_back(pickle::run(file.bytes, po));
    if (&meta_path == &metas.front()) st.file = std::move(file);
    else layout->metadata_files.push_back(std::move(file));  // its tree refers to its bytes
    const pickle::Result& result = st.results.back();
    st.protocol = result.protocol();
    for (std::string& g : globals_not_allowed(result, kDcp)) st.unknown_globals.push_back(std::move(g));
    const Value* md = state_of(result.root(), kMetadataModule, "Metadata");
    if (md == nullptr || !md->is(Kind::kDict)) {
      bad("'" + meta_path.filename().string() +
              "' does not hold a torch.distributed.checkpoint.metadata.Metadata object",
          meta);
    }
    storage_data(field(*md, "storage_data", meta), *layout, file_index, meta, located);
    const Value& sdm = field(*md, "state_dict_metadata", meta);
    if (!sdm.is(Kind::kDict)) bad("state_dict_metadata is not a dict", meta);
    for (const auto& item : sdm.items()) {
      const std::string fqn = text(item.key, "a state_dict key", meta);
      const auto next = static_cast<std::uint32_t>(entries.size());
      const auto known = entry_index.insert_unique(maploc::detail::hash_text(fqn), next,
                                                   [&](std::uint32_t i) { return entries[i].fqn == fqn; });
      if (!known) entries.push_back({fqn, {}, false});
      Entry& e = entries[known.value_or(next)];
      const Value* tsm = state_of(item.value, kMetadataModule, "TensorStorageMetadata");
      const bool bytes = tsm == nullptr && (state_of(item.value, kMetadataModule, "BytesStorageMetadata") != nullptr ||
                                            (item.value.is(Kind::kObject) &&
                                             item.value.callable().is_global(kMetadataModule, "BytesStorageMetadata")));
      if (tsm == nullptr && !bytes) {
        bad("state_dict entry '" + fqn + "' is neither TensorStorageMetadata nor BytesStorageMetadata", fqn);
      }
      if ((bytes && !e.tensors.empty()) || (tsm != nullptr && e.bytes)) {
        bad("'" + fqn + "' is a tensor in one rank's metadata and a BYTE_IO item in another's", fqn);
      }
      if (tsm != nullptr) e.tensors.push_back(tsm);
      e.bytes = bytes;
    }
  }
  std::stable_sort(located.begin(), located.end(), located_less);  // a chunk two ranks wrote: the first rank's
  for (const Entry& e : entries) {
    if (!e.bytes) {
      add_tensor(st, *layout, e.fqn, e.tensors, located);
      continue;
    }
    Located probe;
    probe.fqn = e.fqn;
    const auto at = std::lower_bound(located.begin(), located.end(), probe, located_less);
    if (at == located.end() || at->fqn != e.fqn) bad("BYTE_IO item '" + e.fqn + "' has no storage_data entry", e.fqn);
    st.byte_items.push_back({e.fqn, layout->file_names[at->file], at->offset, at->length, at->transform});
  }
  std::sort(st.unknown_globals.begin(), st.unknown_globals.end());
  st.unknown_globals.erase(std::unique(st.unknown_globals.begin(), st.unknown_globals.end()), st.unknown_globals.end());
  for (const auto& name : layout->file_names) {
    if (!fs::exists(dir / name)) bad("the metadata names '" + name + "', which is absent from the directory", st.path);
    layout->files.push_back(MappedFile::open(dir / name));
    const auto& b = layout->files.back().bytes;
    layout->safetensors.push_back(sniff_content(b.span().first(std::min<std::size_t>(b.size(), 512))) ==
                                  ContentKind::kSafetensors);
  }
  const Value* md = state_of(st.results.back().root(), kMetadataModule, "Metadata");
  if (const Value* v = md->find("version"); v != nullptr && v->is(Kind::kStr)) {
    st.hints.push_back("DCP version " + std::string(v->as_str()));
  }
  if (metas.front().filename() != ".metadata") {
    st.hints.push_back("rank-local metadata of " + std::to_string(metas.size()) +
                       " ranks (saved with use_collectives=False), chunks merged");
  }
  st.hints.push_back(std::to_string(st.tensors.size()) + " tensors, " + std::to_string(st.byte_items.size()) +
                     " BYTE_IO items in " + std::to_string(layout->files.size()) + " files");
  st.format = Format::kDcp;
  st.source = dcp_source(std::move(layout), st.storages);
}

}  // namespace maploc::torch
