// checkpoint_set.cpp - several files read as one checkpoint: an index's weight_map, a directory holding one, or a list.
#include <algorithm>
#include <filesystem>

#include "maploc/error.h"
#include "json_subset.h"
#include "state.h"
#include "url_source.h"

namespace maploc::torch {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kIndexSuffix = ".index.json";

[[noreturn]] void bad_set(const std::string& message, const std::string& item) {
  fail(ErrorCode::kTorchBadSet, message, item);
}

// One weight_map entry: a tensor name and the index of its file in Index::files.
struct MapEntry {
  std::string name;
  std::size_t file = 0;
};

struct Index {
  std::vector<std::string> files;  // as the map names them, sorted, each once
  std::vector<MapEntry> entries;   // sorted by name
  std::vector<std::pair<std::string, std::string>> metadata;
};

// Shards lie beside or below the index: an absolute name or a '..' would let
// an index downloaded with a model read any file the user can.
void check_relative(const std::string& name, const std::string& index) {
  const fs::path p(name);
  bool up = false;
  for (const auto& part : p) up = up || part == "..";
  if (p.is_absolute() || up) {
    bad_set("the weight_map names file '" + name + "', which leaves the index's directory; shards must lie beside "
            "or below the index", index);
  }
}

Index parse_index(const Bytes& bytes, const std::string& path) {
  using T = json::Reader::Type;
  // Read in one pass by the pull reader (no JSON tree: issue 15), keeping the
  // first "weight_map" and "metadata" members; the checks follow the parse.
  struct Mapped {
    std::string name;
    bool is_file;
    std::string file;
  };
  bool is_object = false, map_seen = false, map_is_object = false, meta_seen = false;
  std::vector<Mapped> map;
  Index ix;
  try {
    json::Reader r(bytes.text(), 64);
    if (r.peek() == T::kObject) {
      is_object = true;
      r.object([&](std::string&& key) {
        if (key == "weight_map" && !map_seen) {
          map_seen = true;
          map_is_object = r.peek() == T::kObject;
          if (!map_is_object) return r.skip();
          r.object([&](std::string&& name) {
            const bool is_file = r.peek() == T::kString;
            std::string file = is_file ? r.string() : std::string();
            if (!is_file) r.skip();
            map.push_back({std::move(name), is_file, std::move(file)});
          });
        } else if (key == "metadata" && !meta_seen && r.peek() == T::kObject) {
          meta_seen = true;
          r.object([&](std::string&& k) {
            const T t = r.peek();
            if (t == T::kString) ix.metadata.emplace_back(std::move(k), r.string());
            else if (t == T::kNumber) ix.metadata.emplace_back(std::move(k), std::string(r.number()));
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
    fail(ErrorCode::kTorchBadSet, "index: the JSON does not parse: " + f.message, path, f.offset);
  }
  if (!is_object || !map_is_object) {
    fail(ErrorCode::kTorchNotCheckpoint,
         "not a torch checkpoint: it is JSON without a \"weight_map\" object (a sharded set's index maps each "
         "tensor to its file, e.g. model.safetensors.index.json)",
         path);
  }
  for (const auto& m : map) {
    if (!m.is_file || m.file.empty()) {
      bad_set("the weight_map maps tensor '" + m.name + "' to something other than a file name", path);
    }
    check_relative(m.file, path);
    ix.files.push_back(m.file);
  }
  std::sort(ix.files.begin(), ix.files.end());
  ix.files.erase(std::unique(ix.files.begin(), ix.files.end()), ix.files.end());
  ix.entries.reserve(map.size());
  for (auto& m : map) {
    const auto at = std::lower_bound(ix.files.begin(), ix.files.end(), m.file);
    ix.entries.push_back({std::move(m.name), static_cast<std::size_t>(at - ix.files.begin())});
  }
  std::stable_sort(ix.entries.begin(), ix.entries.end(),
                   [](const MapEntry& a, const MapEntry& b) { return a.name < b.name; });
  for (std::size_t i = 1; i < ix.entries.size(); ++i) {
    if (ix.entries[i].name == ix.entries[i - 1].name) {
      bad_set("the weight_map lists tensor '" + ix.entries[i].name + "' twice (to '" +
                  ix.files[ix.entries[i - 1].file] + "' and '" + ix.files[ix.entries[i].file] +
                  "'); Python's json keeps the last silently, maploc will not guess: fix the index",
              path);
    }
  }
  return ix;
}

Checkpoint open_member(const fs::path& file, const Options& options, const std::string& set) {
  MappedFile mapped = remote::is_url(file.string()) ? open_url(file.string(), options) : MappedFile::open(file);
  if (looks_like_json(mapped.bytes)) bad_set("set member '" + file.string() + "' is JSON, not a checkpoint", set);
  return Checkpoint::from_file(std::move(mapped), options);
}

// The set's source, made when the first member is appended (only this file gives a State a SetSource).
SetSource& set_source(Checkpoint::State& st) {
  if (!st.source) st.source = std::make_unique<SetSource>(st.storage_member);
  return static_cast<SetSource&>(*st.source);
}

// Appends member `c` to the set, with the tensors `keep` marks, their
// components, and only the storages those view (a tensor the map does not
// name must not cost a read).
void append_member(Checkpoint::State& st, Checkpoint c, std::vector<char> keep) {
  SetSource& source = set_source(st);
  const auto& ts = c.tensors();
  const auto& ss = c.storages();
  // Components follow their composite and tensors held in a tensor's state follow their holder
  // (interpret's order), so one pass reaches nested ones: they come with what the map names.
  for (std::size_t i = 0; i < ts.size(); ++i) {
    if (!keep[i] && ts[i].held_by && *ts[i].held_by < i && keep[*ts[i].held_by]) keep[i] = 1;
    if (!keep[i]) continue;
    for (const auto& comp : ts[i].components) {
      if (comp.tensor < ts.size()) keep[comp.tensor] = 1;
    }
  }
  std::vector<char> used(ss.size(), 0);
  for (std::size_t i = 0; i < ts.size(); ++i) {
    if (keep[i] && ts[i].storage) used[*ts[i].storage] = 1;
  }
  for (std::size_t s = 0; s < ss.size(); ++s) {
    if (used[s] && ss[s].view_of) used[*ss[s].view_of] = 1;
  }
  constexpr std::size_t kNone = ~std::size_t{0};
  SetMember info;
  info.path = c.path();
  info.format = c.format();
  info.file_bytes = c.remote_transfer()     ? c.remote_transfer()->object_bytes
                   : c.archive() != nullptr ? c.archive()->file_bytes().size()
                                            : fs::file_size(c.path());
  info.first_storage = st.storages.size();
  info.first_tensor = st.tensors.size();
  std::vector<std::size_t> new_storage(ss.size(), kNone);
  for (std::size_t s = 0; s < ss.size(); ++s) {
    if (!used[s]) continue;
    new_storage[s] = st.storages.size();
    st.storages.push_back(ss[s]);
    st.storage_member.push_back(static_cast<std::uint32_t>(source.member_count()));
    source.add_storage(s);
  }
  for (std::size_t s = info.first_storage; s < st.storages.size(); ++s) {
    if (st.storages[s].view_of) st.storages[s].view_of = new_storage[*st.storages[s].view_of];
  }
  std::vector<std::size_t> new_tensor(ts.size(), kNone);
  for (std::size_t i = 0, n = info.first_tensor; i < ts.size(); ++i) {
    if (keep[i]) new_tensor[i] = n++;
  }
  for (std::size_t i = 0; i < ts.size(); ++i) {
    if (!keep[i]) continue;
    Tensor t = ts[i];
    if (t.storage) t.storage = new_storage[*t.storage];
    for (auto& comp : t.components) comp.tensor = new_tensor[comp.tensor];
    if (t.held_by) {
      t.held_by = new_tensor[*t.held_by] == kNone ? std::nullopt : std::optional<std::size_t>(new_tensor[*t.held_by]);
    }
    st.tensors.push_back(std::move(t));
  }
  info.storage_count = st.storages.size() - info.first_storage;
  info.tensor_count = st.tensors.size() - info.first_tensor;
  if (st.member_info.empty()) {
    st.byteorder = c.byteorder();
    st.has_byteorder_record = c.has_byteorder_record();
    st.protocol = c.pickle_protocol();
  } else if (st.byteorder != c.byteorder()) {
    bad_set("'" + c.path() + "' stores " + std::string(byteorder_name(c.byteorder())) + "-endian data, the set's " +
                "first file " + std::string(byteorder_name(st.byteorder)) + "-endian; re-save one of them",
            st.path);
  } else {
    st.has_byteorder_record = st.has_byteorder_record && c.has_byteorder_record();
  }
  st.unknown_globals.insert(st.unknown_globals.end(), c.unknown_globals().begin(), c.unknown_globals().end());
  st.member_info.push_back(std::move(info));
  source.add_member(std::move(c));
}

void finish(Checkpoint::State& st) {
  st.format = Format::kSet;
  set_source(st);  // a set of no members has a source too
  std::sort(st.unknown_globals.begin(), st.unknown_globals.end());
  st.unknown_globals.erase(std::unique(st.unknown_globals.begin(), st.unknown_globals.end()), st.unknown_globals.end());
  // No name twice across the set (sorting, not hashing: names come from the files).
  std::vector<std::pair<std::string_view, std::size_t>> names;
  for (std::size_t m = 0; m < st.member_info.size(); ++m) {
    const SetMember& info = st.member_info[m];
    for (std::size_t t = info.first_tensor; t < info.first_tensor + info.tensor_count; ++t) {
      if (!st.tensors[t].is_component) names.emplace_back(st.tensors[t].name, m);
    }
  }
  std::sort(names.begin(), names.end());
  for (std::size_t i = 1; i < names.size(); ++i) {
    if (names[i].first == names[i - 1].first && names[i].second != names[i - 1].second) {
      bad_set("tensor '" + std::string(names[i].first) + "' is in both '" + st.member_info[names[i - 1].second].path +
                  "' and '" + st.member_info[names[i].second].path + "'; name the file that should provide it",
              st.path);
    }
  }
  st.hints.push_back(std::to_string(st.tensors.size()) + " tensors in " + std::to_string(st.member_info.size()) +
                     " files");
}

fs::path find_index(const fs::path& dir) {
  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && name.size() > kIndexSuffix.size() && name.ends_with(kIndexSuffix)) {
      found.push_back(e.path());
    }
  }
  std::sort(found.begin(), found.end());
  if (found.empty()) {
    fail(ErrorCode::kTorchNotCheckpoint,
         "a directory holding no *.index.json (the index of a sharded set); open a checkpoint file in it, or "
         "the index",
         dir.string());
  }
  if (found.size() > 1) {
    std::string list;
    for (const auto& f : found) list += (list.empty() ? "'" : ", '") + f.filename().string() + "'";
    bad_set("the directory holds " + std::to_string(found.size()) + " indexes (" + list + "); open the one you mean",
            dir.string());
  }
  return found.front();
}

}  // namespace

bool looks_like_json(const Bytes& bytes) noexcept {
  for (const std::uint8_t b : bytes.span()) {
    if (b == ' ' || b == '\t' || b == '\r' || b == '\n') continue;
    return b == '{';
  }
  return false;
}

void read_set_index(Checkpoint::State& st) {
  const Index ix = parse_index(st.file.bytes, st.path);
  const fs::path dir = fs::path(st.path).parent_path();
  for (std::size_t f = 0; f < ix.files.size(); ++f) {
    if (remote::is_url(st.path) || fs::exists(dir / ix.files[f])) continue;  // a URL's shards: open says
    std::size_t tensors = 0;
    std::string first;
    for (const auto& e : ix.entries) {
      if (e.file != f) continue;
      if (tensors++ == 0) first = e.name;
    }
    bad_set("the weight_map names file '" + ix.files[f] + "' (for " + std::to_string(tensors) + " tensors, '" + first +
                "' first), which is absent; download it, or fix the index",
            st.path);
  }
  for (std::size_t f = 0; f < ix.files.size(); ++f) {
    Checkpoint c = open_member(dir / ix.files[f], st.options, st.path);
    std::vector<std::string_view> wanted;
    for (const auto& e : ix.entries) {
      if (e.file == f) wanted.push_back(e.name);  // sorted, as entries are
    }
    std::vector<char> keep(c.tensors().size(), 0);
    std::vector<std::string_view> present;
    for (std::size_t i = 0; i < c.tensors().size(); ++i) {
      const Tensor& t = c.tensors()[i];
      if (t.is_component || t.held_by) continue;  // they come with their composite or holder
      if (std::binary_search(wanted.begin(), wanted.end(), std::string_view(t.name))) {
        keep[i] = 1;
        present.push_back(t.name);
      } else {
        st.diagnose("tensor '" + t.name + "' is in '" + ix.files[f] +
                    "' but not in the weight_map; it is left out (transformers loads only what the map names)");
      }
    }
    std::sort(present.begin(), present.end());
    for (const auto& name : wanted) {
      if (!std::binary_search(present.begin(), present.end(), name)) {
        bad_set("the weight_map puts tensor '" + std::string(name) + "' in '" + ix.files[f] +
                    "', which does not hold it; the shard or the index is from another version of the model",
                st.path);
      }
    }
    append_member(st, std::move(c), std::move(keep));
  }
  st.metadata = ix.metadata;
  finish(st);
}

std::unique_ptr<Checkpoint::State> read_set_directory(const fs::path& dir, const Options& options) {
  auto st = std::make_unique<Checkpoint::State>();
  st->file = MappedFile::open(find_index(dir));
  st->path = st->file.path;
  st->options = options;
  read_set_index(*st);
  return st;
}

std::unique_ptr<Checkpoint::State> read_set_files(const std::vector<fs::path>& files, const Options& options) {
  if (files.empty()) throw Error(ErrorCode::kInvalidArgument, Stage::kTorch, "open_set: no files given");
  auto st = std::make_unique<Checkpoint::State>();
  st->path = files.front().string() + (files.size() > 1 ? " and " + std::to_string(files.size() - 1) + " more" : "");
  st->options = options;
  for (const auto& f : files) {
    Checkpoint c = open_member(f, options, st->path);
    std::vector<char> keep(c.tensors().size(), 0);
    for (std::size_t i = 0; i < keep.size(); ++i) keep[i] = c.tensors()[i].is_component ? 0 : 1;
    append_member(*st, std::move(c), std::move(keep));
  }
  finish(*st);
  return st;
}

std::vector<std::string> set_index_files(const Bytes& index, const std::string& path) {
  return parse_index(index, path).files;
}

std::vector<fs::path> set_files(const fs::path& index_or_dir) {
  const fs::path index = fs::is_directory(index_or_dir) ? find_index(index_or_dir) : index_or_dir;
  const MappedFile f = MappedFile::open(index);
  std::vector<fs::path> out;
  for (const auto& name : parse_index(f.bytes, f.path).files) out.push_back(index.parent_path() / name);
  return out;
}

}  // namespace maploc::torch
