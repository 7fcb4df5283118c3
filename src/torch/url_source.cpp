// url_source.cpp - a checkpoint at a URL: the ranges its readers need, fetched before they run.
#include "url_source.h"

#include <algorithm>

#include "maploc/error.h"
#include "maploc/remote/object.h"
#include "state.h"
#include "support/sniff.h"
#include "zip/layout.h"

namespace maploc::torch {
namespace {

constexpr std::uint64_t kHeadBytes = 4096;        // the sniff's 512 and a zip's first local header
constexpr std::uint64_t kEndRecordsBytes = 65633; // EOCD + longest comment + ZIP64 locator and record
constexpr std::uint64_t kExtraAllowance = 128;    // local extra fields (torch pads to 64; ZIP64: 20)
constexpr std::uint64_t kCoalesceGap = 4096;      // ranges closer than this are one request

// Storage bytes of torch archives: prefix/data/<key> and TorchScript's prefix/constants/<key>.
bool is_payload(const std::string& name) {
  const auto slash = name.find('/');
  if (slash == std::string::npos) return false;
  const std::string_view rest = std::string_view(name).substr(slash + 1);
  return rest.rfind("data/", 0) == 0 || rest.rfind("constants/", 0) == 0;
}

std::vector<ByteRange> coalesce(std::vector<ByteRange> ranges) {
  std::sort(ranges.begin(), ranges.end(), [](const ByteRange& a, const ByteRange& b) { return a.offset < b.offset; });
  std::vector<ByteRange> out;
  for (const ByteRange& r : ranges) {
    if (!out.empty() && r.offset <= out.back().offset + out.back().length + kCoalesceGap) {
      const std::uint64_t end = std::max(out.back().offset + out.back().length, r.offset + r.length);
      out.back().length = end - out.back().offset;
    } else {
      out.push_back(r);
    }
  }
  return out;
}

// Fetches the ranges a zip reader needs; false when the tail holds no zip directory (then the
// caller reads the whole object and the readers say what it is).
bool fetch_zip_structure(const remote::Object& obj, const Limits& limits) {
  const Bytes& b = obj.bytes();
  const std::uint64_t size = obj.size();
  const std::string path = obj.transfer().url;
  const ByteRange tail{size - std::min(size, kEndRecordsBytes), std::min(size, kEndRecordsBytes)};
  obj.ensure(std::span<const ByteRange>(&tail, 1));
  zip::DirectorySpan dir;
  try {
    dir = zip::directory_span(b, path, limits);
  } catch (const Error&) {
    return false;
  }
  const ByteRange cd{dir.start, dir.end - dir.start};
  obj.ensure(std::span<const ByteRange>(&cd, 1));
  std::vector<zip::Record> records;
  try {
    records = zip::directory_records(b, path, limits);
  } catch (const Error&) {
    return true;  // the readers raise the same error with their context
  }
  // One round: every local header with room for its extra field, and the small records whole.
  std::vector<ByteRange> want;
  for (const zip::Record& r : records) {
    if (r.header_offset >= dir.start) continue;  // the readers name it
    std::uint64_t len = 30 + r.name.size() + kExtraAllowance;
    if (!is_payload(r.name)) len += std::min(r.compressed_size, dir.start);
    want.push_back({r.header_offset, std::min(len, dir.start - r.header_offset)});
  }
  obj.ensure(coalesce(std::move(want)), kCoalesceGap);
  // A second round for local headers whose extra field is longer than the allowance.
  std::vector<ByteRange> more;
  for (const zip::Record& r : records) {
    if (r.header_offset >= dir.start || dir.start - r.header_offset < 30) continue;
    std::uint64_t len = zip::local_header_size(b, r.header_offset);
    if (!is_payload(r.name)) len += r.compressed_size;
    more.push_back({r.header_offset, std::min(len, dir.start - r.header_offset)});
  }
  obj.ensure(coalesce(std::move(more)), kCoalesceGap);
  return true;
}

void read_in_full(const remote::Object& obj, const Options& options, const std::string& why) {
  obj.set_read_in_full();
  const ByteRange all{0, obj.size()};
  obj.ensure(std::span<const ByteRange>(&all, 1));
  if (options.diagnostics && !why.empty()) {
    options.diagnostics(obj.transfer().url + ": " + why + ": read in full (" + std::to_string(obj.size()) + " bytes)");
  }
}

}  // namespace

MappedFile open_url(const std::string& url, const Options& options) {
  const auto obj = remote::Object::open(url, options.remote);
  const std::uint64_t size = obj->size();
  const ByteRange head{0, std::min(size, kHeadBytes)};
  obj->ensure(std::span<const ByteRange>(&head, 1));
  const Bytes first = obj->bytes().slice(0, static_cast<std::size_t>(head.length));
  if (looks_like_json(first)) {  // a sharded set's index: its shards are URLs beside it (read_set_index)
    read_in_full(*obj, options, "");
    return obj->file();
  }
  const ContentKind kind = sniff_content(first.span().first(std::min<std::size_t>(first.size(), 512)));
  switch (kind) {
    case ContentKind::kEmpty:
      break;
    case ContentKind::kTorchLegacy:
      read_in_full(*obj, options, "a legacy (pre-1.6) checkpoint has no index at its tail");
      break;
    case ContentKind::kTorchTar:
      read_in_full(*obj, options, "a tar (torch 0.1.x) checkpoint has no index at its tail");
      break;
    case ContentKind::kSafetensors: {
      std::uint64_t n = 0;
      for (int i = 7; i >= 0; --i) n = (n << 8) | first.data()[i];
      const ByteRange header{0, 8 + std::min(n, size - 8)};
      obj->ensure(std::span<const ByteRange>(&header, 1));
      break;
    }
    default:
      if (!fetch_zip_structure(*obj, options.limits)) read_in_full(*obj, options, "no zip directory at its tail");
      break;
  }
  return obj->file();
}

Bytes ensure_present(const MappedFile& file, Bytes bytes) {
  if (!file.source || bytes.empty()) return bytes;
  const std::uint8_t* base = file.bytes.data();
  if (bytes.data() >= base && bytes.data() + bytes.size() <= base + file.bytes.size()) {
    file.ensure(static_cast<std::uint64_t>(bytes.data() - base), bytes.size());
  }
  return bytes;
}

// Checkpoint members that concern URL sources.

std::optional<RemoteTransfer> Checkpoint::remote_transfer() const {
  if (!state_->file.source) return std::nullopt;
  return state_->file.source->transfer();
}

void Checkpoint::prefetch() const {
  std::vector<std::size_t> all(state_->storages.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  prefetch(all);
}

}  // namespace maploc::torch
