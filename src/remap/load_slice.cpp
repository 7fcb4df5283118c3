// load_slice.cpp - remap::load with LoadOptions::slice: one rank places only the rows, columns or tensors it owns.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "maploc/error.h"
#include "maploc/remap/loaded.h"
#include "maploc/remap/plan.h"
#include "host_memory.h"
#include "load_slice.h"
#include "upload.h"
#include "support/flat_index.h"

namespace maploc::remap {
namespace {

[[noreturn]] void bad(const std::string& why, const std::string& tensor) {
  throw Error(ErrorCode::kInvalidArgument, Stage::kRemap, why, std::nullopt, tensor);
}

// Bytes [src, src+len) of the parent storage go to [dst, dst+len) of the slice.
struct Segment {
  std::uint64_t src = 0, dst = 0, len = 0;
};

// One storage of the result: a slice (or the whole) of a parent storage.
struct Part {
  std::size_t parent = 0;
  std::uint64_t nbytes = 0;
  std::vector<Segment> segments;
};

const SliceRule* rule_for(const SliceSpec& spec, const std::string& name) {
  for (const auto& r : spec.rules) {
    if (glob_match(r.pattern, name)) return &r;
  }
  return nullptr;
}

bool contiguous(const torch::Tensor& t) {
  std::int64_t expect = 1;
  for (std::size_t d = t.shape.size(); d-- > 0;) {
    if (t.shape[d] != 1 && t.stride[d] != expect) return false;
    expect *= std::max<std::int64_t>(t.shape[d], 1);
  }
  return true;
}

// Each file opened once, read with pread (only the slices' bytes are asked of the kernel).
class Files {
 public:
  ~Files() {
    for (const auto& [path, fd] : fds_) ::close(fd);
  }
  int fd(const std::string& path) {
    for (const auto& [p, fd] : fds_) {
      if (p == path) return fd;
    }
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error(ErrorCode::kIoOpen, Stage::kIo, "cannot open for slice reads", std::nullopt, path);
    fds_.emplace_back(path, fd);
    return fd;
  }

 private:
  std::vector<std::pair<std::string, int>> fds_;
};

void pread_all(int fd, std::uint8_t* dst, std::uint64_t len, std::uint64_t off, const std::string& path) {
  while (len > 0) {
    const ssize_t n = ::pread(fd, dst, static_cast<std::size_t>(std::min<std::uint64_t>(len, 1u << 30)),
                              static_cast<off_t>(off));
    if (n <= 0) throw Error(ErrorCode::kIoRead, Stage::kIo, "short read of a slice", off, path);
    dst += n;
    off += static_cast<std::uint64_t>(n);
    len -= static_cast<std::uint64_t>(n);
  }
}

Bytes uninitialized(std::uint64_t n) {
  std::shared_ptr<std::uint8_t[]> buf(new std::uint8_t[std::max<std::uint64_t>(n, 1)]);
  return Bytes(std::shared_ptr<const void>(buf, buf.get()), buf.get(), static_cast<std::size_t>(n));
}

}  // namespace

Loaded make_loaded(std::shared_ptr<const std::vector<torch::Tensor>> tensors, std::vector<PlacedStorage> storages,
                   const DeviceInventory& inventory) {
  Loaded out;
  auto by_name = std::make_shared<maploc::detail::FlatIndex>(tensors->size());
  for (std::size_t t = 0; t < tensors->size(); ++t) {
    const std::string& name = (*tensors)[t].name;  // a repeated name keeps its first tensor
    by_name->insert_unique(maploc::detail::hash_text(name), static_cast<std::uint32_t>(t),
                           [&](std::uint32_t k) { return (*tensors)[k].name == name; });
  }
  out.tensors_ = std::move(tensors);
  out.storages_ = std::move(storages);
  out.by_name_ = std::move(by_name);
  out.inventory_ = inventory;
  return out;
}

Loaded load_sliced(const torch::Checkpoint& checkpoint, const LoadOptions& options) {
  const RankSlice& rs = *options.slice;
  if (rs.world_size < 1 || rs.rank < 0 || rs.rank >= rs.world_size) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kRemap,
                "rank " + std::to_string(rs.rank) + " is not in a world of " + std::to_string(rs.world_size));
  }
  const DeviceInventory& inventory = options.inventory ? *options.inventory : DeviceInventory::probe();
  const Plan plan = make_plan(checkpoint, options.map, inventory);
  const auto& storages = checkpoint.storages();
  auto tensors = std::make_shared<std::vector<torch::Tensor>>();
  std::vector<Part> parts;
  std::vector<std::size_t> whole_of(storages.size(), ~std::size_t{0});  // replicated storages, placed once
  SliceReport report;
  for (const torch::Tensor& t : checkpoint.tensors()) {
    if (t.is_component) continue;
    const SliceRule* rule = rule_for(rs.spec, t.name);
    const SliceKind kind = rule ? rule->kind : SliceKind::kReplicate;
    if (kind == SliceKind::kStage) {
      if (rule->stage >= rs.world_size) {
        bad("slice rule stage" + std::to_string(rule->stage) + ":" + rule->pattern + " names a rank outside a world of " +
                std::to_string(rs.world_size), t.name);
      }
      if (rule->stage != rs.rank) {
        ++report.tensors_skipped;
        continue;
      }
    }
    if (t.kind != torch::TensorKind::kDense || !t.storage) {
      bad("rank slicing places dense tensors; '" + t.name + "' is " + std::string(torch::tensor_kind_name(t.kind)) +
              " (load it without a slice)", t.name);
    }
    const std::size_t parent = *t.storage;
    const std::uint64_t e = torch::element_size(t.dtype);
    torch::Tensor out = t;
    if (kind == SliceKind::kReplicate || kind == SliceKind::kStage) {
      if (whole_of[parent] == ~std::size_t{0}) {
        whole_of[parent] = parts.size();
        parts.push_back({parent, storages[parent].nbytes, {{0, 0, storages[parent].nbytes}}});
      }
      out.storage = whole_of[parent];
      ++report.tensors_whole;
      tensors->push_back(std::move(out));
      continue;
    }
    const std::size_t dim = kind == SliceKind::kRows ? 0 : 1;
    if (t.shape.size() <= dim || !contiguous(t)) {
      bad("tensor '" + t.name + "' (" + std::to_string(t.shape.size()) + "-d" + (contiguous(t) ? "" : ", not contiguous") +
              ") cannot be split by " + (dim == 0 ? "rows" : "columns") + "; change the slice rule that matches it",
          t.name);
    }
    const auto [b, en] = slice_bounds(t.shape[dim], rs.rank, rs.world_size);
    out.shape[dim] = en - b;
    Part p{parent, 0, {}};
    if (dim == 0) {
      p.nbytes = static_cast<std::uint64_t>(en - b) * static_cast<std::uint64_t>(t.stride[0]) * e;
      if (p.nbytes) p.segments.push_back({static_cast<std::uint64_t>(t.storage_offset + b * t.stride[0]) * e, 0, p.nbytes});
    } else {
      const std::uint64_t run = static_cast<std::uint64_t>(en - b) * static_cast<std::uint64_t>(t.stride[1]) * e;
      for (std::int64_t r = 0; run != 0 && r < t.shape[0]; ++r) {
        p.segments.push_back({static_cast<std::uint64_t>(t.storage_offset + r * t.stride[0] + b * t.stride[1]) * e,
                              p.nbytes, run});
        p.nbytes += run;
      }
    }
    out.storage_offset = 0;
    out.stride.assign(out.shape.size(), 1);
    for (std::size_t d = out.shape.size(); d-- > 1;) out.stride[d - 1] = out.stride[d] * std::max<std::int64_t>(out.shape[d], 1);
    out.storage = parts.size();
    parts.push_back(std::move(p));
    ++report.tensors_sliced;
    tensors->push_back(std::move(out));
  }

  // Read: pread from the file where the parent storage is a plain range of one, else copy from its bytes.
  const detail::DeviceGuard guard(inventory.backend.get());
  Files files;
  std::vector<PlacedStorage> placed(parts.size());
  std::vector<detail::UploadJob> jobs;
  std::vector<Bytes> held;  // records read from memory (deflated, DCP), alive until the upload ends
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const Part& p = parts[i];
    const Device& target = plan.targets[p.parent];
    const torch::Storage& s = storages[p.parent];
    placed[i].device = target;
    placed[i].nbytes = p.nbytes;
    if (target.kind == Device::Kind::kMeta) continue;
    const auto range = checkpoint.storage_file_range(p.parent);
    const Bytes raw = range ? Bytes() : checkpoint.storage_bytes(p.parent);
    const int fd = range ? files.fd(range->path) : -1;
    if (range) {
      for (const Segment& g : p.segments) report.bytes_from_files += g.len;
    } else {
      report.bytes_from_memory += raw.size();
    }
    // Bytes [offset, offset + n) of the slice, gathered from its segments (ordered by dst, no gaps).
    auto gather = [&p, fd, raw, at = range ? range->offset : 0, path = range ? range->path : std::string()](
                      std::uint64_t offset, std::uint64_t n, std::uint8_t* out) {
      auto g = std::partition_point(p.segments.begin(), p.segments.end(),
                                    [&](const Segment& x) { return x.dst + x.len <= offset; });
      for (; g != p.segments.end() && g->dst < offset + n; ++g) {
        const std::uint64_t from = std::max(offset, g->dst), to = std::min(offset + n, g->dst + g->len);
        std::uint8_t* dst = out + (from - offset);
        const std::uint64_t src = g->src + (from - g->dst);
        if (fd >= 0) {
          pread_all(fd, dst, to - from, at + src, path);
        } else {
          std::memcpy(dst, raw.data() + src, static_cast<std::size_t>(to - from));
        }
      }
    };
    const std::size_t unit = checkpoint.byteorder() == torch::ByteOrder::kBig ? torch::swap_unit(s.dtype) : 1;
    if (target.kind == Device::Kind::kCuda) {
      // Straight from the file into the staging ring: host memory stays the ring's, whatever the slices' size.
      const std::string who = "slice of storage '" + s.key + "'";
      placed[i].owner = detail::device_allocate(inventory.backend, target.index, p.nbytes, &placed[i].data, who);
      placed[i].writable = true;
      if (!range) held.push_back(raw);
      detail::UploadJob job{Bytes(), -1, unit, placed[i].data, target.index, who};
      job.read = gather;
      job.read_size = p.nbytes;
      jobs.push_back(std::move(job));
      continue;
    }
    Bytes buf = uninitialized(p.nbytes);
    auto* dst = const_cast<std::uint8_t*>(buf.data());  // ours alone until placed
    gather(0, p.nbytes, dst);
    for (std::uint64_t k = 0; unit > 1 && k + unit <= p.nbytes; k += unit) std::reverse(dst + k, dst + k + unit);
    placed[i].data = dst;
    placed[i].writable = true;
    placed[i].owner = std::shared_ptr<void>(std::const_pointer_cast<void>(buf.owner()), dst);
  }
  if (!jobs.empty()) detail::upload(*inventory.backend, jobs, -1, options.cuda, detail::Destinations::kSeparate);
  if (options.slice_report) *options.slice_report = report;
  Loaded out = make_loaded(std::move(tensors), std::move(placed), inventory);
  out.set_cuda_options(options.cuda);
  return out;
}

}  // namespace maploc::remap
