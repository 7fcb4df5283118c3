// verify.cpp - container, CRC, pickle and tensor checks with messages for people, cut downloads measured.
#include "maploc/torch/verify.h"

#include <algorithm>
#include <cstdio>
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
#include "json_subset.h"
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

// What a set's check needs of one member, taken from the checkpoint verify opened anyway.
struct MemberFacts {
  bool opened = false;
  std::vector<std::string> names;  // tensors a weight_map may name (not components, not held by another)
  ByteOrder byteorder = ByteOrder::kLittle;
  std::uint64_t storage_bytes = 0;
};

void check_checkpoint(const MappedFile& file, VerifyReport& r, const Limits& limits, bool strict,
                      MemberFacts* facts = nullptr) {
  Options o;
  o.limits = limits;
  o.strict = strict;
  o.diagnostics = [&r](std::string_view m) { r.warnings.emplace_back(m); };
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
    if (facts != nullptr) {
      facts->opened = true;
      facts->byteorder = c.byteorder();
      facts->storage_bytes = bytes;
      for (const Tensor& t : c.tensors()) {
        if (!t.is_component && !t.held_by) facts->names.push_back(t.name);
      }
    }
  } catch (const Error& e) {
    r.problems.push_back(e.message() + (e.item().empty() ? "" : " ('" + e.item() + "')"));
  }
}

// A torch.distributed.checkpoint directory: the metadata read inertly, then every tensor
// assembled from its chunks (each chunk's zip and tensor checked as it is opened).
VerifyReport verify_dcp(const std::filesystem::path& path, const Limits& limits, bool strict) {
  VerifyReport r;
  r.path = path.string();
  r.format = "dcp";
  Options o;
  o.limits = limits;
  o.strict = strict;
  o.diagnostics = [&r](std::string_view m) { r.warnings.emplace_back(m); };
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

// A set: every file the index names checked on its own, then the set as one
// (the weight_map against the files' tensors).
VerifyReport verify_set(const std::filesystem::path& path, const Limits& limits, bool strict) {
  VerifyReport r;
  r.path = path.string();
  r.format = "set";
  if (!dcp_metadata_files(path).empty()) return verify_dcp(path, limits, strict);
  std::vector<std::filesystem::path> files;
  try {
    files = set_files(path);
  } catch (const Error& e) {
    r.problems.push_back(e.message());
    return r;
  }
  for (const auto& f : files) {
    if (std::error_code ec; !std::filesystem::exists(f, ec)) continue;  // the set check below names it
    const VerifyReport m = verify(f, limits, strict);
    const std::string name = f.filename().string() + ": ";
    for (const auto& c : m.checks) r.checks.push_back(name + c);
    for (const auto& p : m.problems) r.problems.push_back(name + p);
    for (const auto& w : m.warnings) r.warnings.push_back(name + w);
  }
  Options o;
  o.limits = limits;
  o.strict = strict;
  o.diagnostics = [&r](std::string_view m) { r.warnings.emplace_back(m); };
  try {
    const Checkpoint c = Checkpoint::open(path, o);
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
  return r;
}

// The checks of one file's bytes: its container (CRCs, or how much of a cut download is present),
// then the checkpoint in it.
void verify_file(const MappedFile& file, VerifyReport& r, const Limits& limits, bool strict,
                 MemberFacts* facts = nullptr) {
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
  check_checkpoint(file, r, limits, strict, facts);
}

// An object by URL, every byte fetched (those present already are not fetched again).
MappedFile whole(const remote::Object& obj) {
  obj.set_read_in_full();
  const ByteRange all{0, obj.size()};
  obj.ensure(std::span<const ByteRange>(&all, 1));
  return obj.file();
}

// What reading an object by URL cost: its bytes once, unless a request was retried.
std::string fetched(const remote::Object& obj) {
  const RemoteTransfer t = obj.transfer();
  return "read by URL: " + std::to_string(t.bytes_read) + " bytes for " + std::to_string(t.object_bytes) + " in " +
         std::to_string(t.requests) + (t.requests == 1 ? " request" : " requests") +
         (t.retries ? " (" + std::to_string(t.retries) + " retried)" : "");
}

// A sharded set's index read by URL: the weight_map as the set opener reads it (checkpoint_set.cpp,
// the same rules and words), so that each shard is fetched once, whole, for its own checks, and the
// set's check runs on what those checks opened instead of fetching the shards' structure again.
struct UrlIndex {
  std::vector<std::string> files;                          // sorted, each once
  std::vector<std::pair<std::string, std::size_t>> entries;  // tensor name, index into files; by name
  std::string total_size;                                  // metadata's, as written
};

UrlIndex parse_url_index(const Bytes& bytes, const std::string& path) {
  using T = json::Reader::Type;
  UrlIndex ix;
  bool map_seen = false, map_is_object = false, meta_seen = false;
  std::vector<std::pair<std::string, std::optional<std::string>>> map;
  try {
    json::Reader r(bytes.text(), 64);
    if (r.peek() == T::kObject) {
      r.object([&](std::string&& key) {
        if (key == "weight_map" && !map_seen) {
          map_seen = true;
          map_is_object = r.peek() == T::kObject;
          if (!map_is_object) return r.skip();
          r.object([&](std::string&& name) {
            if (r.peek() == T::kString) {
              map.emplace_back(std::move(name), r.string());
            } else {
              r.skip();
              map.emplace_back(std::move(name), std::nullopt);
            }
          });
        } else if (key == "metadata" && !meta_seen && r.peek() == T::kObject) {
          meta_seen = true;
          r.object([&](std::string&& k) {
            const T t = r.peek();
            if (k == "total_size" && t == T::kString) ix.total_size = r.string();
            else if (k == "total_size" && t == T::kNumber) ix.total_size = std::string(r.number());
            else r.skip();
          });
        } else {
          if (key == "metadata") meta_seen = true;
          r.skip();
        }
      });
    } else {
      r.skip();
    }
    r.end();
  } catch (const json::Failure& f) {
    throw Error(ErrorCode::kTorchBadSet, Stage::kTorch, "index: the JSON does not parse: " + f.message, f.offset, path);
  }
  if (!map_is_object) {
    throw Error(ErrorCode::kTorchNotCheckpoint, Stage::kTorch,
                "not a torch checkpoint: it is JSON without a \"weight_map\" object (a sharded set's index maps "
                "each tensor to its file, e.g. model.safetensors.index.json)",
                std::nullopt, path);
  }
  for (const auto& [name, file] : map) {
    if (!file || file->empty()) {
      throw Error(ErrorCode::kTorchBadSet, Stage::kTorch,
                  "the weight_map maps tensor '" + name + "' to something other than a file name", std::nullopt, path);
    }
    const std::filesystem::path p(*file);
    bool up = false;
    for (const auto& part : p) up = up || part == "..";
    if (p.is_absolute() || up) {
      throw Error(ErrorCode::kTorchBadSet, Stage::kTorch,
                  "the weight_map names file '" + *file + "', which leaves the index's directory; shards must lie "
                  "beside or below the index",
                  std::nullopt, path);
    }
    ix.files.push_back(*file);
  }
  std::sort(ix.files.begin(), ix.files.end());
  ix.files.erase(std::unique(ix.files.begin(), ix.files.end()), ix.files.end());
  for (const auto& [name, file] : map) {
    const auto at = std::lower_bound(ix.files.begin(), ix.files.end(), *file);
    ix.entries.emplace_back(name, static_cast<std::size_t>(at - ix.files.begin()));
  }
  std::stable_sort(ix.entries.begin(), ix.entries.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t i = 1; i < ix.entries.size(); ++i) {
    if (ix.entries[i].first == ix.entries[i - 1].first) {
      throw Error(ErrorCode::kTorchBadSet, Stage::kTorch,
                  "the weight_map lists tensor '" + ix.entries[i].first + "' twice (to '" +
                      ix.files[ix.entries[i - 1].second] + "' and '" + ix.files[ix.entries[i].second] +
                      "'); Python's json keeps the last silently, maploc will not guess: fix the index",
                  std::nullopt, path);
    }
  }
  return ix;
}

std::string problem_of(const Error& e) { return e.message() + (e.item().empty() ? "" : " ('" + e.item() + "')"); }

VerifyReport verify_url_set(const remote::Object& index_object, const Limits& limits, bool strict) {
  VerifyReport r;
  const MappedFile index = whole(index_object);
  r.path = index.path;  // display_url: no user information, no query
  r.format = "set";
  r.checks.push_back("the index " + fetched(index_object));
  UrlIndex ix;
  try {
    ix = parse_url_index(index.bytes, index.path);
  } catch (const Error& e) {
    r.problems.push_back(problem_of(e));
    return r;
  }
  // Shards lie beside the index: its URL's directory joined with the weight_map's name (as the
  // set opener joins them).
  const std::string dir = index.path.substr(0, index.path.rfind('/') + 1);
  std::vector<MemberFacts> facts(ix.files.size());
  for (std::size_t f = 0; f < ix.files.size(); ++f) {
    const std::string name = ix.files[f] + ": ", url = dir + ix.files[f];
    VerifyReport m;
    try {
      const auto obj = remote::Object::open(url, Options{}.remote);
      const ByteRange head{0, std::min<std::uint64_t>(obj->size(), 4096)};
      obj->ensure(std::span<const ByteRange>(&head, 1));
      if (looks_like_json(obj->bytes().slice(0, static_cast<std::size_t>(head.length)))) {
        m.problems.push_back("set member '" + url + "' is JSON, not a checkpoint");
      } else {
        verify_file(whole(*obj), m, limits, strict, &facts[f]);
        m.checks.push_back(fetched(*obj));
      }
    } catch (const Error& e) {
      m.problems.push_back("cannot be read: " + problem_of(e));
    }
    for (const auto& c : m.checks) r.checks.push_back(name + c);
    for (const auto& p : m.problems) r.problems.push_back(name + p);
    for (const auto& w : m.warnings) r.warnings.push_back(name + w);
  }
  // The set as one: each tensor the weight_map names is in the file it names; what a file holds
  // beyond the map is left out (a warning, as the set opener says); one byte order throughout.
  bool set_ok = true;
  std::optional<std::size_t> first;
  for (std::size_t f = 0; f < ix.files.size(); ++f) {
    MemberFacts& m = facts[f];
    if (!m.opened) {
      set_ok = false;  // its problem is reported above
      continue;
    }
    std::sort(m.names.begin(), m.names.end());
    std::vector<std::string_view> wanted;
    for (const auto& [tensor, file] : ix.entries) {
      if (file == f) wanted.emplace_back(tensor);
    }
    for (const auto& w : wanted) {
      if (!std::binary_search(m.names.begin(), m.names.end(), w)) {
        set_ok = false;
        r.problems.push_back("the weight_map puts tensor '" + std::string(w) + "' in '" + ix.files[f] +
                             "', which does not hold it; the shard or the index is from another version of the model");
      }
    }
    for (const auto& n : m.names) {
      if (!std::binary_search(wanted.begin(), wanted.end(), std::string_view(n))) {
        r.warnings.push_back("tensor '" + n + "' is in '" + ix.files[f] +
                             "' but not in the weight_map; it is left out (transformers loads only what the map names)");
      }
    }
    if (!first) {
      first = f;
    } else if (m.byteorder != facts[*first].byteorder) {
      set_ok = false;
      r.problems.push_back("'" + ix.files[f] + "' stores " + std::string(byteorder_name(m.byteorder)) +
                           "-endian data, the set's first file " + std::string(byteorder_name(facts[*first].byteorder)) +
                           "-endian; re-save one of them");
    }
  }
  if (set_ok) {
    std::uint64_t bytes = 0;
    for (const MemberFacts& m : facts) bytes += m.storage_bytes;
    r.checks.push_back("the index's weight_map: " + std::to_string(ix.entries.size()) + " tensors, each once, in " +
                       std::to_string(ix.files.size()) + " files that hold them");
    if (!ix.total_size.empty()) {
      r.checks.push_back("metadata total_size " + ix.total_size + " (reported, not trusted; the tensors' storages hold " +
                         std::to_string(bytes) + " bytes)");
    }
  }
  return r;
}

}  // namespace

VerifyReport verify(const std::filesystem::path& path, const Limits& limits, bool strict) {
  std::error_code ec;
  const bool url = remote::is_url(path.string());
  if (!url && std::filesystem::is_directory(path, ec)) return verify_set(path, limits, strict);
  if (url) {
    // Fetched whole (verify reads every byte), each byte once: the object's tail (its first request),
    // its head, then the rest; an index's shards are verified the same way (verify_url_set).
    const auto obj = remote::Object::open(path.string(), Options{}.remote);
    const ByteRange head{0, std::min<std::uint64_t>(obj->size(), 4096)};
    obj->ensure(std::span<const ByteRange>(&head, 1));
    if (looks_like_json(obj->bytes().slice(0, static_cast<std::size_t>(head.length)))) {
      return verify_url_set(*obj, limits, strict);
    }
    VerifyReport r;
    r.path = remote::display_url(path.string());
    verify_file(whole(*obj), r, limits, strict);
    r.checks.push_back(fetched(*obj));
    return r;
  }
  const MappedFile file = MappedFile::open(path);
  if (looks_like_json(file.bytes)) return verify_set(path, limits, strict);
  VerifyReport r;
  r.path = path.string();
  verify_file(file, r, limits, strict);
  return r;
}

}  // namespace maploc::torch
