// zip_format.cpp - torch.save (>= 1.6) and torch.jit.save archives: records, byteorder, data.pkl (§1, §3).
#include <algorithm>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "support/huge_chunks.h"
#include "globals.h"
#include "state.h"
#include "storage_table.h"

namespace maploc::torch {
namespace {

std::string trimmed(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.remove_suffix(1);
  return std::string(s);
}

void read_byteorder(Checkpoint::State& st) {
  const zip::Archive& ar = *st.archive;
  st.byteorder = st.options.default_byteorder;
  const zip::Record* rec = ar.find_in_prefix("byteorder");
  if (!rec) return;
  const std::string value = trimmed(ar.read(*rec).text());
  st.has_byteorder_record = true;
  if (value == "little") {
    st.byteorder = ByteOrder::kLittle;
  } else if (value == "big") {
    st.byteorder = ByteOrder::kBig;
  } else {
    st.diagnose("byteorder record says '" + value + "'; assuming " +
                std::string(byteorder_name(st.byteorder)));
  }
}

// What the records say about the torch that wrote the archive (§1.3, §9).
void collect_hints(Checkpoint::State& st) {
  const zip::Archive& ar = *st.archive;
  auto text_of_record = [&](std::string_view name) -> std::optional<std::string> {
    const zip::Record* r = ar.find_in_prefix(name);
    if (!r || r->size > 64) return std::nullopt;
    return trimmed(ar.read(*r).text());
  };
  if (auto v = text_of_record("version")) st.hints.push_back("version record " + *v);
  if (auto v = text_of_record(".data/version")) st.hints.push_back(".data/version " + *v + " (TorchScript with upgraders)");
  if (auto v = text_of_record(".format_version")) st.hints.push_back(".format_version " + *v + " (torch >= 2.7)");
  if (auto v = text_of_record(".storage_alignment")) st.hints.push_back(".storage_alignment " + *v + " (torch >= 2.7)");
  if (st.has_byteorder_record) {
    st.hints.push_back("byteorder record (torch >= 2.1)");
  } else {
    st.hints.push_back("no byteorder record (torch < 2.1 or disabled)");
  }
  if (ar.find_in_prefix(".data/serialization_id")) st.hints.push_back(".data/serialization_id (torch >= 2.2)");
}

pickle::Result run_pickle(Checkpoint::State& st, std::string_view name, StorageTable& table) {
  const zip::Archive& ar = *st.archive;
  const zip::Record& rec = ar.at(name);
  pickle::Options po;
  po.limits = st.options.limits;
  po.stream_name = rec.name;
  po.persistent_load = [&table](const pickle::Value& pid, std::uint64_t offset) { return table.load(pid, offset); };
  return pickle::run(ar.read(rec), po);
}

// A TorchScript archive's code/**/*.debug_pkl (source ranges): torch.jit.load unpickles them too, with
// its C++ unpickler, which runs no Python but whose GLOBALs a scanner must still see. Read for their
// globals only: nothing of them is kept, and they hold no storages (a persistent id is refused). One
// that cannot be read is named in the hints, not an error: torch reads them only for debug info.
void scan_debug_pickles(Checkpoint::State& st) {
  const zip::Archive& ar = *st.archive;
  const std::string code = ar.prefix() + "/code/";
  constexpr std::string_view kSuffix = ".debug_pkl";
  for (const zip::Record& rec : ar.records()) {
    const std::string_view n = rec.name;
    if (n.size() < code.size() + kSuffix.size() || n.compare(0, code.size(), code) != 0 ||
        n.compare(n.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
      continue;
    }
    pickle::Options po;
    po.limits = st.options.limits;
    po.stream_name = rec.name;
    po.persistent_load = [&rec](const pickle::Value&, std::uint64_t) -> std::optional<pickle::Value> {
      throw Error(ErrorCode::kTorchBadPersistentId, Stage::kTorch, "a persistent id in " + rec.name);
    };
    try {
      const pickle::Result r = pickle::run(ar.read(rec), po);
      for (std::string& g : globals_not_allowed(r, kWeightsOnly)) st.unknown_globals.push_back(std::move(g));
    } catch (const Error& e) {
      st.hints.push_back(rec.name + " not read (" + std::string(e.what()) + ")");
    }
  }
}

// Where each storage's bytes start is known once its record is located; the
// record is noted now and file_offset filled in by fill_offsets().
struct Located {
  std::size_t storage;
  const zip::Record* record;
};

// The records of one directory whose names are counts (data/0, data/1, ...:
// torch numbers its storages from 0). One pass over the central directory
// replaces a name hash and a probe per storage; any other key is looked up
// by name. Names are unique in an Archive, so both ways find the same record.
class CountedRecords {
 public:
  CountedRecords(const zip::Archive& ar, std::string_view dir) {
    const std::string head = ar.prefix().empty() ? std::string(dir) : ar.prefix() + "/" + std::string(dir);
    const auto& records = ar.records();
    by_count_.assign(records.size(), nullptr);
    for (const zip::Record& r : records) {
      if (r.name.size() <= head.size() || r.name.compare(0, head.size(), head) != 0) continue;
      const auto k = counted_key(std::string_view(r.name).substr(head.size()));
      if (k && *k < by_count_.size()) by_count_[*k] = &r;
    }
  }

  const zip::Record* find(std::string_view key) const {
    const auto k = counted_key(key);
    return k && *k < by_count_.size() ? by_count_[*k] : nullptr;
  }

 private:
  std::vector<const zip::Record*> by_count_;
};

StorageTable::Locate locate_in(Checkpoint::State& st, std::string dir, std::vector<Located>& pending) {
  CountedRecords counted(*st.archive, dir);
  return [&st, &pending, dir = std::move(dir), counted = std::move(counted)](Storage& s, std::uint64_t& present) {
    const zip::Archive& ar = *st.archive;
    const zip::Record* rec = counted.find(s.key);
    if (!rec) rec = ar.find_in_prefix(dir + s.key);
    if (!rec) {
      fail(ErrorCode::kTorchStorageMissing,
           "storage '" + s.key + "' has no record '" + ar.prefix() + "/" + dir + s.key + "'", ar.path());
    }
    s.record = rec->name;
    s.compressed = rec->method != zip::kMethodStored;
    present = rec->size;
    pending.push_back({st.storages.size(), rec});  // StorageTable::add's index for s
  };
}

void fill_offsets(Checkpoint::State& st, const std::vector<Located>& pending) {
  for (const Located& l : pending) st.storages[l.storage].file_offset = l.record->data_offset;
}

// Reading local headers on a thread of its own pays from this many records.
constexpr std::size_t kBackgroundLocate = 1024;

// Runs `locate` on another thread while `work` runs here. A container error
// wins over one of `work` (the order a sequential reader reports them in).
template <typename Work>
void overlapped(const std::function<void()>& locate, std::size_t records, Work work) {
  if (records < kBackgroundLocate || std::thread::hardware_concurrency() < 2) {
    locate();
    work();
    return;
  }
  std::exception_ptr locate_error;
  std::jthread locator;
  try {
    locator = std::jthread([&] {
      try {
        locate();
      } catch (...) {
        locate_error = std::current_exception();
      }
    });
  } catch (const std::system_error&) {
    locate();  // no thread to be had
  }
  try {
    work();
  } catch (...) {
    if (locator.joinable()) locator.join();
    if (locate_error) std::rethrow_exception(locate_error);
    throw;
  }
  if (locator.joinable()) locator.join();
  if (locate_error) std::rethrow_exception(locate_error);
}

}  // namespace

void read_zip(Checkpoint::State& st, const std::function<void()>& locate_rest) {
  zip::Archive& ar = *st.archive;
  ar.require_prefix();
  const bool torchscript = ar.find_in_prefix("constants.pkl") != nullptr;
  if (!ar.find_in_prefix("data.pkl")) {
    if (ar.find_in_prefix("model.json")) {
      fail(ErrorCode::kTorchUnsupportedFormat,
           "a TorchScript archive of torch 1.0-1.2 (model.json), which torch itself no longer reads", st.path);
    }
    fail(ErrorCode::kTorchNotCheckpoint,
         "a zip archive without '" + ar.prefix() + "/data.pkl': not a torch checkpoint", st.path);
  }
  st.format = torchscript ? Format::kTorchScript : Format::kZip;

  // About one storage per record: no regrowth of the tables while the pickle runs.
  st.storages.reserve(ar.records().size());
  st.present_bytes.reserve(ar.records().size());
  st.refs.reserve(ar.records().size());
  maploc::detail::prefer_huge_pages(st.storages.data(), st.storages.capacity() * sizeof(Storage));
  std::vector<Located> pending;
  pending.reserve(ar.records().size());
  overlapped(locate_rest, ar.records().size(), [&] {
    StorageTable data_table(st, ar.prefix() + "/data.pkl", locate_in(st, "data/", pending));
    data_table.reserve(ar.records().size());
    pickle::Result data = run_pickle(st, "data.pkl", data_table);
    st.protocol = data.protocol();
    st.root = data.root();
    st.unknown_globals = globals_not_allowed(data, kWeightsOnly);
    st.results.push_back(std::move(data));
    if (torchscript) {
      // constants.pkl's ids name records under constants/ (§3.1), keys of their own.
      StorageTable const_table(st, ar.prefix() + "/constants.pkl", locate_in(st, "constants/", pending));
      pickle::Result constants = run_pickle(st, "constants.pkl", const_table);
      st.constants_root = constants.root();
      // torch.load hands a TorchScript archive to torch.jit.load, which unpickles constants.pkl
      // as well: its globals are the archive's as much as data.pkl's.
      for (std::string& g : globals_not_allowed(constants, kWeightsOnly)) st.unknown_globals.push_back(std::move(g));
      scan_debug_pickles(st);
      std::sort(st.unknown_globals.begin(), st.unknown_globals.end());
      st.unknown_globals.erase(std::unique(st.unknown_globals.begin(), st.unknown_globals.end()),
                               st.unknown_globals.end());
      st.results.push_back(std::move(constants));
    }
  });
  fill_offsets(st, pending);
  read_byteorder(st);
  collect_hints(st);
  st.source = zip_source(*st.archive, st.file, st.storages, st.present_bytes);
}

}  // namespace maploc::torch
