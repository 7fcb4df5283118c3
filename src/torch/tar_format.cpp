// tar_format.cpp - torch 0.1.x checkpoints: a tar of 'storages', 'tensors' and 'pickle' (§2.6).
#include <cstring>
#include <map>
#include <string>

#include "globals.h"
#include "state.h"
#include "storage_table.h"

namespace maploc::torch {
namespace {

constexpr std::uint64_t kBlock = 512;

struct Member {
  std::uint64_t offset = 0;  // of the data in the file
  std::uint64_t size = 0;
};

[[noreturn]] void bad_tar(const Checkpoint::State& st, const std::string& why, std::uint64_t offset) {
  fail(ErrorCode::kTorchBadTar, "tar checkpoint: " + why, st.path, offset);
}

// Walks the ustar headers (name at 0, octal size at 124, type at 156).
std::map<std::string, Member> members(const Checkpoint::State& st) {
  std::map<std::string, Member> out;
  const Bytes& b = st.file.bytes;
  std::uint64_t pos = 0;
  // pos may pass the end when the last member is not padded to a whole block.
  while (pos <= b.size() && b.size() - pos >= kBlock) {
    const std::uint8_t* h = b.data() + pos;
    if (h[0] == 0) break;  // end-of-archive blocks
    std::uint64_t size = 0;
    for (std::size_t i = 124; i < 136 && h[i] != 0 && h[i] != ' '; ++i) {
      if (h[i] < '0' || h[i] > '7' || size > (std::uint64_t{1} << 60)) bad_tar(st, "bad member size field", pos + 124);
      size = size * 8 + (h[i] - '0');
    }
    const std::uint64_t data = pos + kBlock;
    if (data > b.size() || size > b.size() - data) bad_tar(st, "member runs past the end of the file", pos);
    const std::string name(reinterpret_cast<const char*>(h), strnlen(reinterpret_cast<const char*>(h), 100));
    const char type = static_cast<char>(h[156]);
    if (type == '0' || type == '\0') out[name] = {data, size};
    pos = data + (size + kBlock - 1) / kBlock * kBlock;
  }
  return out;
}

struct Cursor {
  const Checkpoint::State& st;
  Member m;
  std::uint64_t pos;  // absolute

  pickle::Result pickle_next(pickle::PersistentLoad load = nullptr) {
    pickle::Options po;
    po.limits = st.options.limits;
    po.stream_name = st.path;
    po.allow_trailing = true;
    po.persistent_load = std::move(load);
    const Bytes member = st.file.bytes.slice(m.offset, m.size);
    po.start_offset = pos - m.offset;
    pickle::Result r = pickle::run(member, po);
    pos = m.offset + r.end_offset();
    return r;
  }
  std::uint64_t u64() {
    if (pos + 8 > m.offset + m.size) bad_tar(st, "member ends inside an integer", pos);
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | st.file.bytes.data()[pos + static_cast<std::uint64_t>(i)];
    pos += 8;
    return v;
  }
  std::int64_t i64() { return static_cast<std::int64_t>(u64()); }
};

std::int64_t count_of(const Checkpoint::State& st, const pickle::Result& r) {
  if (!r.root().is(pickle::Kind::kInt) || r.root().is_big_int() || r.root().as_int() < 0) {
    bad_tar(st, "a count is not a non-negative int", 0);
  }
  return r.root().as_int();
}

}  // namespace

void read_tar(Checkpoint::State& st) {
  st.format = Format::kTar;
  st.byteorder = ByteOrder::kLittle;
  const auto ms = members(st);
  for (const char* need : {"storages", "tensors", "pickle"}) {
    if (!ms.count(need)) bad_tar(st, std::string("no '") + need + "' member", 0);
  }
  StorageTable table(st, st.path, nullptr);
  std::map<std::string, std::uint64_t> handles;  // key -> storage handle
  std::vector<Bytes> spans;                       // each storage's bytes in the 'storages' member

  Cursor sc{st, ms.at("storages"), ms.at("storages").offset};
  const std::int64_t nstorages = count_of(st, sc.pickle_next());
  for (std::int64_t i = 0; i < nstorages; ++i) {
    pickle::Result head = sc.pickle_next();
    const auto& t = head.root();
    if (!t.is(pickle::Kind::kTuple) || t.size() != 3 || !t[2].is(pickle::Kind::kGlobal)) {
      bad_tar(st, "storage header is not (key, location, storage_type)", sc.pos);
    }
    const auto dtype = dtype_from_storage_type(t[2].global_module(), t[2].global_name());
    if (!dtype) fail(ErrorCode::kTorchUnknownDType, "unknown storage type " + global_path(t[2]), st.path, sc.pos);
    Storage s;
    s.key = text_of(t[0]).value_or("?");
    s.location = text_of(t[1]).value_or("?");
    s.dtype = *dtype;
    const std::uint64_t numel = sc.u64();
    const std::uint64_t es = element_size(*dtype);
    if (numel > (sc.m.offset + sc.m.size - sc.pos) / es) bad_tar(st, "storage '" + s.key + "' runs past its member", sc.pos);
    s.numel = numel;
    s.nbytes = numel * es;
    s.record = "storages/" + s.key;  // the tar member, and the storage in it
    s.file_offset = sc.pos;
    const std::size_t idx = table.add(s, s.nbytes);
    spans.resize(st.storages.size());
    spans[idx] = st.file.bytes.slice(sc.pos, s.nbytes);
    handles[s.key] = table.add_ref({idx, *dtype});
    sc.pos += s.nbytes;
    // head is dropped here: everything it held was copied (a kept Result per header cost 64 KiB each)
  }
  pickle::Result views = sc.pickle_next();
  if (views.root().is(pickle::Kind::kList) || views.root().is(pickle::Kind::kTuple)) {
    for (const auto& v : views.root().elements()) {
      // (target_key, root_key, offset, numel) in elements of the root.
      if (!v.is(pickle::Kind::kTuple) || v.size() != 4 || !v[2].is(pickle::Kind::kInt) || !v[3].is(pickle::Kind::kInt)) {
        bad_tar(st, "storage view is not (target, root, offset, numel)", 0);
      }
      const auto root = table.find(text_of(v[1]).value_or(""));
      if (!root) bad_tar(st, "storage view of an unknown storage", 0);
      const Storage r = st.storages[*root];
      const auto off = v[2].is_big_int() ? -1 : v[2].as_int();
      const auto len = v[3].is_big_int() ? -1 : v[3].as_int();
      if (off < 0 || len < 0 || static_cast<std::uint64_t>(off) > r.numel ||
          static_cast<std::uint64_t>(len) > r.numel - static_cast<std::uint64_t>(off)) {
        fail(ErrorCode::kTorchTensorOutOfBounds, "storage view outside storage '" + r.key + "'", st.path);
      }
      Storage s = r;
      s.key = text_of(v[0]).value_or("?");
      s.numel = static_cast<std::uint64_t>(len);
      s.nbytes = s.numel * element_size(r.dtype);
      s.view_of = *root;
      s.view_offset = static_cast<std::uint64_t>(off);
      s.file_offset = r.file_offset + s.view_offset * element_size(r.dtype);
      const std::size_t idx = table.add(s, s.nbytes);
      spans.resize(st.storages.size());
      spans[idx] = spans[*root].slice(s.view_offset * element_size(r.dtype), s.nbytes);
      handles[s.key] = table.add_ref({idx, r.dtype});
    }
  }
  st.results.push_back(std::move(views));

  Cursor tc{st, ms.at("tensors"), ms.at("tensors").offset};
  const std::int64_t ntensors = count_of(st, tc.pickle_next());
  for (std::int64_t i = 0; i < ntensors; ++i) {
    pickle::Result head = tc.pickle_next();
    const auto& t = head.root();
    if (!t.is(pickle::Kind::kTuple) || t.size() != 3) bad_tar(st, "tensor header is not (key, storage_key, type)", tc.pos);
    const auto it = handles.find(text_of(t[1]).value_or(""));
    if (it == handles.end()) bad_tar(st, "tensor on an unknown storage", tc.pos);
    Tensor x;
    x.storage = st.refs[it->second].storage;
    x.dtype = st.refs[it->second].dtype;
    const std::uint64_t word = tc.u64();  // i32 ndim + 4 padding bytes
    const std::uint64_t ndim = word & 0xffffffffu;
    if (ndim > st.options.limits.torch_max_rank) {
      bad_tar(st, "tensor rank " + std::to_string(ndim) + " above Limits::torch_max_rank (" +
                      std::to_string(st.options.limits.torch_max_rank) + ")", tc.pos);
    }
    for (std::uint64_t d = 0; d < ndim; ++d) x.shape.push_back(tc.i64());
    for (std::uint64_t d = 0; d < ndim; ++d) x.stride.push_back(tc.i64());
    x.storage_offset = tc.i64();
    if (st.tar_tensor_index.emplace(text_of(t[0]).value_or("?"), st.tar_tensors.size()).second) {
      st.tar_tensors.push_back(std::move(x));
    }
    // head is dropped here: everything it held was copied (a kept Result per header cost 64 KiB each)
  }

  Cursor pc{st, ms.at("pickle"), ms.at("pickle").offset};
  pickle::Result object = pc.pickle_next([&](const pickle::Value& pid, std::uint64_t) -> std::optional<pickle::Value> {
    if (pid.is(pickle::Kind::kTuple) && pid.size() >= 1) return pid[0];  // (module class, file, source)
    const auto key = text_of(pid).value_or("");
    if (auto h = handles.find(key); h != handles.end()) return pickle::Value::external(h->second);
    if (auto t = st.tar_tensor_index.find(key); t != st.tar_tensor_index.end()) {
      return pickle::Value::external(kTarTensorHandle + t->second);  // O(log n), not a walk over the map
    }
    return std::nullopt;
  });
  st.protocol = object.protocol();
  st.root = object.root();
  st.unknown_globals = globals_not_allowed(object, kWeightsOnly);
  st.results.push_back(std::move(object));
  st.hints.push_back("tar format (torch 0.1.x)");
  st.source = stream_source(std::move(spans), st.file, st.storages, st.present_bytes);
}

}  // namespace maploc::torch
