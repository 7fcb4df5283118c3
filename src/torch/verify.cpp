// verify.cpp - container, CRC, pickle and tensor checks with messages for people, cut downloads measured.
#include "maploc/torch/verify.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string_view>

#include "maploc/error.h"
#include "maploc/pickle/machine.h"
#include "support/sniff.h"
#include "zip/crc32.h"
#include "support/little_endian.h"
#include "dcp.h"
#include "state.h"
#include "storage_table.h"
#include "maploc/remote/object.h"
#include "url_source.h"

namespace maploc::torch {
namespace {

std::string human(std::uint64_t n) {
  char buf[32];
  if (n >= 1'000'000'000) std::snprintf(buf, sizeof buf, "%.1f GB", static_cast<double>(n) / 1e9);
  else if (n >= 1'000'000) std::snprintf(buf, sizeof buf, n >= 10'000'000 ? "%.0f MB" : "%.1f MB", static_cast<double>(n) / 1e6);
  else if (n >= 1'000) std::snprintf(buf, sizeof buf, "%.0f kB", static_cast<double>(n) / 1e3);
  else std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(n));
  return buf;
}

// A zip whose end records are gone: read the first local header (torch
// writes data.pkl first), run its pickle to STOP, and add up the storage
// sizes its persistent ids declare. The file must hold at least that much.
void measure_cut_zip(const Bytes& file, VerifyReport& r, const Limits& limits) {
  const std::uint8_t* p = file.data();
  const std::uint64_t size = file.size();
  if (size < 30 || detail::load_u32(p) != 0x04034B50) return;
  const std::uint64_t data = 30 + std::uint64_t{detail::load_u16(p + 26)} + detail::load_u16(p + 28);
  if (data > size) return;
  std::uint64_t needed = 0;
  std::size_t storages = 0;
  pickle::Options po;
  po.limits = limits;
  po.allow_trailing = true;
  po.persistent_load = [&](const pickle::Value& pid, std::uint64_t) -> std::optional<pickle::Value> {
    if (pid.is(pickle::Kind::kTuple) && pid.size() >= 5 && pid[1].is(pickle::Kind::kGlobal) &&
        pid[4].is(pickle::Kind::kInt) && !pid[4].is_big_int()) {
      const auto dt = dtype_from_storage_type(pid[1].global_module(), pid[1].global_name());
      if (dt && pid[4].as_int() >= 0) {
        // Checked: a crafted numel must not wrap the total into a small, plausible size.
        const auto n = static_cast<std::uint64_t>(pid[4].as_int());
        const std::uint64_t es = element_size(*dt);
        const std::uint64_t bytes = n > UINT64_MAX / es ? UINT64_MAX : n * es;
        needed = bytes > UINT64_MAX - needed ? UINT64_MAX : needed + bytes;
        ++storages;
      }
    }
    return pickle::Value::external(0);
  };
  try {
    (void)pickle::run(file.slice(data, size - data), po);
  } catch (const Error&) {
    r.problems.push_back("truncated download: the file (" + human(size) +
                         ") ends before its end-of-archive records, and even its data.pkl is incomplete");
    return;
  }
  // Storage keys may repeat (ties); the sum counts each reference, so only
  // claim a total when it is larger than the file.
  if (needed > size) {
    char pct[16];
    std::snprintf(pct, sizeof pct, "%.0f%%", 100.0 * static_cast<double>(size) / static_cast<double>(needed));
    r.problems.push_back("truncated download: " + human(size) + " of at least " + human(needed) + " present (" + pct +
                         "; data.pkl names " + std::to_string(storages) + " storage references)");
  } else {
    r.problems.push_back("truncated download: the file (" + human(size) +
                         ") ends before its end-of-archive records (central directory)");
  }
}

void check_crcs(const zip::Archive& ar, VerifyReport& r) {
  std::size_t matched = 0, without = 0;
  for (const zip::Record& rec : ar.records()) {
    try {
      if (zip::verify_crc32(ar, rec)) {
        ++matched;
      } else {
        ++without;
      }
    } catch (const Error& e) {
      r.problems.push_back("record '" + rec.name + "' " +
                           (e.code() == ErrorCode::kZipCrcMismatch ? e.message() + " (damaged in transfer or on disk)"
                                                                    : "cannot be read: " + e.message()));
    }
  }
  r.checks.push_back(std::to_string(ar.records().size()) + " records inside the file, none overlapping, sizes as "
                     "declared");
  r.checks.push_back("CRC-32 matches for " + std::to_string(matched) + " records" +
                     (without ? " (" + std::to_string(without) + " written without one)" : ""));
}

// The caller's open options (limits, strict, remote) whose diagnostics become the report's warnings.
Options options_for(VerifyReport& r, const Options& options) {
  Options o = options;
  o.diagnostics = [&r](std::string_view m) { r.warnings.emplace_back(m); };
  return o;
}

void check_checkpoint(const MappedFile& file, VerifyReport& r, const Options& options) {
  const Options o = options_for(r, options);
  try {
    const Checkpoint c = Checkpoint::from_file(file, o);
    r.format = std::string(format_name(c.format()));
    std::uint64_t bytes = 0;
    for (const Storage& s : c.storages()) bytes += s.view_of ? 0 : s.nbytes;
    if (c.format() != Format::kSafetensors) r.checks.push_back("pickle runs to STOP");
    r.checks.push_back(std::to_string(c.storages().size()) + " storages of the declared sizes (" + human(bytes) + ")");
    r.checks.push_back(std::to_string(c.tensors().size()) + " tensors inside their storages");
    if (c.format() == Format::kZip || c.format() == Format::kTorchScript) {
      r.checks.push_back(c.has_byteorder_record()
                             ? "byteorder record: " + std::string(byteorder_name(c.byteorder()))
                             : "no byteorder record (written before torch 2.1; read as little-endian)");
    }
  } catch (const Error& e) {
    r.problems.push_back(e.message() + (e.item().empty() ? "" : " ('" + e.item() + "')"));
  }
}

// A torch.distributed.checkpoint directory: the metadata read inertly, then every tensor
// assembled from its chunks (each chunk's zip and tensor checked as it is opened).
VerifyReport verify_dcp(const std::filesystem::path& path, const Options& options) {
  VerifyReport r;
  r.path = path.string();
  r.format = "dcp";
  const Options o = options_for(r, options);
  try {
    const Checkpoint c = Checkpoint::open(path, o);
    r.checks.push_back("metadata read by the inert pickle machine: " + std::to_string(c.tensors().size()) +
                       " tensors, " + std::to_string(c.byte_items().size()) + " BYTE_IO items");
    for (const auto& g : c.unknown_globals()) r.warnings.push_back("the metadata names " + g + ", not a DCP class");
    std::uint64_t bytes = 0;
    for (std::size_t i = 0; i < c.storages().size(); ++i) bytes += c.storage_bytes(i).size();
    r.checks.push_back("every tensor assembled from its chunks, which cover it once (" + human(bytes) + ")");
  } catch (const Error& e) {
    r.problems.push_back(e.message() + (e.item().empty() ? "" : " ('" + e.item() + "')"));
  }
  return r;
}

// The set as one (the weight_map against the files' tensors, one byte order), as the set opener
// checks it; its errors and warnings into r.
void check_set(const std::string& index, VerifyReport& r, const Options& options) {
  const Options o = options_for(r, options);
  try {
    const Checkpoint c = Checkpoint::open(index, o);
    r.checks.push_back("the index's weight_map: " + std::to_string(c.tensors().size()) + " tensors, each once, in " +
                       std::to_string(c.members().size()) + " files that hold them");
    std::uint64_t bytes = 0;
    for (const Storage& s : c.storages()) bytes += s.view_of ? 0 : s.nbytes;
    for (const auto& [key, value] : c.metadata()) {
      if (key == "total_size") {
        r.checks.push_back("metadata total_size " + value + " (reported, not trusted; the tensors' storages hold " +
                           std::to_string(bytes) + " bytes)");
      }
    }
  } catch (const Error& e) {
    r.problems.push_back(e.message() + (e.item().empty() ? "" : " ('" + e.item() + "')"));
  }
}

// A set: every file the index names checked on its own, then the set as one
// (the weight_map against the files' tensors).
VerifyReport verify_set(const std::filesystem::path& path, const Options& options) {
  VerifyReport r;
  r.path = path.string();
  r.format = "set";
  if (!dcp_metadata_files(path).empty()) return verify_dcp(path, options);
  std::vector<std::filesystem::path> files;
  try {
    files = set_files(path);
  } catch (const Error& e) {
    r.problems.push_back(e.message());
    return r;
  }
  for (const auto& f : files) {
    if (std::error_code ec; !std::filesystem::exists(f, ec)) continue;  // the set check below names it
    const VerifyReport m = verify(f, options);
    const std::string name = f.filename().string() + ": ";
    for (const auto& c : m.checks) r.checks.push_back(name + c);
    for (const auto& p : m.problems) r.problems.push_back(name + p);
    for (const auto& w : m.warnings) r.warnings.push_back(name + w);
  }
  check_set(path.string(), r, options);
  return r;
}

// The checks of one file's bytes: its container (CRCs, or how much of a cut download is present),
// then the checkpoint in it.
void verify_file(const MappedFile& file, VerifyReport& r, const Options& options) {
  const Limits& limits = options.limits;
  const auto head = file.bytes.span().first(std::min<std::size_t>(file.bytes.size(), 512));
  const ContentKind kind = sniff_content(head);
  r.format = describe_content(kind);
  if (kind == ContentKind::kZip || kind == ContentKind::kUnknown) {
    std::optional<zip::Archive> ar;
    try {
      ar.emplace(zip::Archive::from_file(file, limits));
    } catch (const Error& e) {
      if (kind == ContentKind::kZip &&
          (e.code() == ErrorCode::kZipNotZip || e.code() == ErrorCode::kZipTruncated)) {
        measure_cut_zip(file.bytes, r, limits);
      } else {
        r.problems.push_back("the zip container is damaged: " + e.message());
      }
      return;
    }
    check_crcs(*ar, r);
  }
  check_checkpoint(file, r, options);
}

// An object by URL, every byte fetched, each once: the caller's remote options (retries, requests in
// flight, sizes, as every command's Checkpoint::open and open_url honour them), the opener they use
// (remote::Object::open: credentials, redirects, validators), then the object's tail (its first
// request), its head and the rest. Not open_url's zip-structure rounds first: verify reads every byte
// (it checks every CRC), and the rest would then be the storages between local headers already
// present, fetched one request each or with the headers read again.
struct UrlObject {
  MappedFile file;
  std::shared_ptr<const remote::Object> object;  // its transfer: what reading it cost
};

UrlObject fetch_whole(const std::string& url, const Options& options) {
  auto obj = remote::Object::open(url, options.remote);
  obj->set_read_in_full();
  const ByteRange head{0, std::min<std::uint64_t>(obj->size(), 4096)};
  obj->ensure(std::span<const ByteRange>(&head, 1));
  const ByteRange all{0, obj->size()};
  obj->ensure(std::span<const ByteRange>(&all, 1));
  return {obj->file(), std::move(obj)};
}

// What reading an object by URL cost: its bytes once, unless a request was retried.
std::string fetched(const UrlObject& u) {
  const RemoteTransfer t = u.object->transfer();
  return "read by URL: " + std::to_string(t.bytes_read) + " bytes for " + std::to_string(t.object_bytes) + " in " +
         std::to_string(t.requests) + (t.requests == 1 ? " request" : " requests") +
         (t.retries ? " (" + std::to_string(t.retries) + " retried)" : "");
}

std::string problem_of(const Error& e) { return e.message() + (e.item().empty() ? "" : " ('" + e.item() + "')"); }

// A sharded set's index by URL: each shard beside it (the index's URL joined with the weight_map's
// name, as the set opener joins them) fetched whole once and checked as a file, then the set as one.
VerifyReport verify_url_set(const std::string& url, const UrlObject& index, const Options& options) {
  VerifyReport r;
  r.path = index.file.path;  // display_url: no user information, no query
  r.format = "set";
  r.checks.push_back("the index " + fetched(index));
  std::vector<std::string> files;
  try {
    files = set_index_files(index.file.bytes, index.file.path);
  } catch (const Error& e) {
    r.problems.push_back(problem_of(e));
    return r;
  }
  const std::string dir = index.file.path.substr(0, index.file.path.rfind('/') + 1);
  bool all_read = true;
  for (const std::string& file : files) {
    const std::string shard = dir + file;
    VerifyReport m;
    try {
      const UrlObject obj = fetch_whole(shard, options);
      if (looks_like_json(obj.file.bytes)) {
        m.problems.push_back("set member '" + shard + "' is JSON, not a checkpoint");
      } else {
        verify_file(obj.file, m, options);
        m.checks.push_back(fetched(obj));
      }
    } catch (const Error& e) {
      all_read = false;
      m.problems.push_back("cannot be read: " + problem_of(e));
    }
    for (const auto& c : m.checks) r.checks.push_back(file + ": " + c);
    for (const auto& p : m.problems) r.problems.push_back(file + ": " + p);
    for (const auto& w : m.warnings) r.warnings.push_back(file + ": " + w);
  }
  if (all_read) check_set(url, r, options);  // a shard that cannot be read is said once, above
  return r;
}

}  // namespace

VerifyReport verify(const std::filesystem::path& path, const Limits& limits, bool strict) {
  Options options;
  options.limits = limits;
  options.strict = strict;
  return verify(path, options);
}

VerifyReport verify(const std::filesystem::path& path, const Options& options) {
  std::error_code ec;
  const bool url = remote::is_url(path.string());
  if (!url && std::filesystem::is_directory(path, ec)) return verify_set(path, options);
  if (url) {
    // Opened as every command opens a URL, then fetched whole; an index's shards the same way.
    const UrlObject obj = fetch_whole(path.string(), options);
    if (looks_like_json(obj.file.bytes)) return verify_url_set(path.string(), obj, options);
    VerifyReport r;
    r.path = remote::display_url(path.string());
    verify_file(obj.file, r, options);
    r.checks.push_back(fetched(obj));
    return r;
  }
  const MappedFile file = MappedFile::open(path);
  if (looks_like_json(file.bytes)) return verify_set(path, options);
  VerifyReport r;
  r.path = path.string();
  verify_file(file, r, options);
  return r;
}

}  // namespace maploc::torch
