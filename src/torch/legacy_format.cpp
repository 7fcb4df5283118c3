// legacy_format.cpp - the magic-number stream of torch 0.2-1.5: five pickles, then raw storages (§2).
// torch.load unpickles all five with the full unpickler (magic, protocol version, sys info, the
// object, the storage keys), so the globals of every one of them are unknown_globals: a payload in
// the sys-info pickle runs under torch.load as surely as one in the object. Any pickle protocol
// torch's legacy writer takes (1-5; protocol 0 fails an assertion in torch.save) reads here.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "support/little_endian.h"
#include "globals.h"
#include "state.h"
#include "storage_table.h"

namespace maploc::torch {
namespace {

// 0x1950a86a20f9469cfc6c as LONG1's little-endian bytes (§2.1).
constexpr std::uint8_t kMagic[] = {0x6C, 0xFC, 0x9C, 0x46, 0xF9, 0x20, 0x6A, 0xA8, 0x50, 0x19};
constexpr std::int64_t kProtocolVersion = 1001;

// Adds the globals of one of the stream's pickles that torch's weights_only list does not allow.
void add_globals(std::vector<std::string>& into, const pickle::Result& r) {
  for (std::string& g : globals_not_allowed(r, kWeightsOnly)) into.push_back(std::move(g));
}

// " (its pickle names os.system, ...: torch.load runs them before it refuses the file)", or "".
std::string named_globals(const pickle::Result& r) {
  const auto globals = globals_not_allowed(r, kWeightsOnly);
  if (globals.empty()) return {};
  std::string out = " (the pickle names ";
  for (std::size_t i = 0; i < globals.size(); ++i) out += (i ? ", " : "") + globals[i];
  return out + ", which torch.load runs before it refuses the file)";
}

}  // namespace

bool legacy_magic_first(const Checkpoint::State& st) noexcept {
  try {
    pickle::Options po;
    po.limits = st.options.limits;
    po.stream_name = st.path;
    po.allow_trailing = true;
    const pickle::Result magic = pickle::run(st.file.bytes, po);
    const auto& m = magic.root();
    if (!m.is(pickle::Kind::kInt)) return false;
    const auto mb = m.int_bytes();
    return mb.size() == sizeof kMagic && std::memcmp(mb.data(), kMagic, sizeof kMagic) == 0;
  } catch (...) {
    return false;
  }
}

void read_legacy(Checkpoint::State& st) {
  st.format = Format::kLegacy;
  st.byteorder = ByteOrder::kLittle;  // always little-endian on disk since 2019 (§2.3)
  const Bytes& bytes = st.file.bytes;
  pickle::Options po;
  po.limits = st.options.limits;
  po.stream_name = st.path;
  po.allow_trailing = true;

  pickle::Result magic = pickle::run(bytes, po);
  const auto& m = magic.root();
  const auto mb = m.is(pickle::Kind::kInt) ? m.int_bytes() : std::vector<std::uint8_t>{};
  if (mb.size() != sizeof kMagic || std::memcmp(mb.data(), kMagic, sizeof kMagic) != 0) {
    fail(ErrorCode::kTorchBadLegacy, "invalid magic number; corrupt file?" + named_globals(magic), st.path, 0);
  }
  po.start_offset = magic.end_offset();
  pickle::Result version = pickle::run(bytes, po);
  if (!version.root().is(pickle::Kind::kInt) || version.root().is_big_int() ||
      version.root().as_int() != kProtocolVersion) {
    fail(ErrorCode::kTorchBadLegacy, "invalid protocol version (expected 1001)" + named_globals(version), st.path,
         po.start_offset);
  }
  po.start_offset = version.end_offset();
  pickle::Result sys_info = pickle::run(bytes, po);  // ignored by torch too (§2.1)
  po.start_offset = sys_info.end_offset();

  StorageTable table(st, st.path, nullptr);
  po.persistent_load = [&table](const pickle::Value& pid, std::uint64_t offset) { return table.load(pid, offset); };
  pickle::Result object = pickle::run(bytes, po);
  po.persistent_load = nullptr;
  st.protocol = object.protocol();
  st.root = object.root();
  po.start_offset = object.end_offset();

  pickle::Result keys = pickle::run(bytes, po);
  // Every pickle torch.load unpickles: magic, version, sys info, object, keys.
  for (const pickle::Result* r : {&magic, &version, &sys_info, &object, &keys}) add_globals(st.unknown_globals, *r);
  std::sort(st.unknown_globals.begin(), st.unknown_globals.end());
  st.unknown_globals.erase(std::unique(st.unknown_globals.begin(), st.unknown_globals.end()), st.unknown_globals.end());
  if (!keys.root().is(pickle::Kind::kList)) {
    fail(ErrorCode::kTorchBadLegacy, "the storage key list is not a list" + named_globals(keys), st.path,
         po.start_offset);
  }
  std::vector<Bytes> spans(st.storages.size());  // each storage's bytes in the stream
  std::vector<bool> filled(st.storages.size(), false);
  for (std::size_t i = 0; i < st.storages.size(); ++i) {
    if (!st.storages[i].view_of) st.present_bytes[i] = 0;
  }
  std::uint64_t pos = keys.end_offset();
  const std::uint64_t size = bytes.size();
  for (const auto& k : keys.root().elements()) {
    const auto key = text_of(k);
    const auto index = key ? table.find(*key) : std::nullopt;
    if (!index) {
      fail(ErrorCode::kTorchBadLegacy, "storage key '" + key.value_or("?") + "' in the key list has no persistent id",
           st.path, pos);
    }
    Storage& s = st.storages[*index];
    if (filled[*index]) fail(ErrorCode::kTorchBadLegacy, "storage key '" + s.key + "' listed twice", st.path, pos);
    if (pos > size || size - pos < 8) {
      fail(ErrorCode::kTorchBadLegacy, "the file ends before the element count of storage '" + s.key + "'", st.path, pos);
    }
    const std::uint64_t count = detail::load_u64(bytes.data() + pos);
    const std::uint64_t es = element_size(s.dtype);
    if (count > (size - pos - 8) / es) {
      fail(ErrorCode::kTorchBadLegacy,
           "storage '" + s.key + "' declares " + std::to_string(count) + " elements of " + std::to_string(es) +
               " bytes, more than the " + std::to_string(size - pos - 8) + " bytes left in the file",
           st.path, pos);
    }
    pos += 8;
    s.record = "storages/" + s.key;  // the stream has no records: name the storage's place in it
    s.file_offset = pos;
    st.present_bytes[*index] = count * es;
    spans[*index] = bytes.slice(pos, count * es);
    filled[*index] = true;
    pos += count * es;
  }
  for (std::size_t i = 0; i < st.storages.size(); ++i) {
    Storage& s = st.storages[i];
    if (s.view_of) {
      // A view shares its root's bytes; a root shorter than declared leaves
      // the view without bytes, and validation reports the root's size.
      const Bytes& root = spans[*s.view_of];
      const std::uint64_t off = s.view_offset * element_size(s.dtype);
      s.file_offset = st.storages[*s.view_of].file_offset + off;
      if (off <= root.size() && s.nbytes <= root.size() - off) {
        spans[i] = root.slice(off, s.nbytes);
      } else {
        st.present_bytes[i] = 0;
      }
      continue;
    }
    if (!filled[i]) {
      fail(ErrorCode::kTorchStorageMissing,
           "storage '" + st.storages[i].key + "' is referenced but missing from the storage key list", st.path);
    }
  }
  if (pos != size) st.diagnose(std::to_string(size - pos) + " bytes follow the last storage");
  st.hints.push_back("legacy stream, pickle protocol " + std::to_string(st.protocol) + " (torch < 1.6 or "
                     "_use_new_zipfile_serialization=False)");
  st.results.push_back(std::move(magic));
  st.results.push_back(std::move(version));
  st.results.push_back(std::move(sys_info));
  st.results.push_back(std::move(object));
  st.results.push_back(std::move(keys));
  st.source = stream_source(std::move(spans), st.file, st.storages, st.present_bytes);
}

}  // namespace maploc::torch
