// stream_source.cpp - storage bytes that lie in place in one file: a legacy or tar stream's spans, a safetensors file's.
#include "maploc/error.h"
#include "state.h"
#include "storage_source.h"
#include "url_source.h"

namespace maploc::torch {
namespace {

// The offset of `b` in `file`, when it is a non-empty view of it.
std::optional<std::uint64_t> offset_in(const MappedFile& file, const Bytes& b) {
  const std::uint8_t* base = file.bytes.data();
  if (b.empty() || b.data() < base) return std::nullopt;
  return static_cast<std::uint64_t>(b.data() - base);
}

// kLegacy and kTar: the readers cut each storage's span out of the stream (a view's from its root's).
class StreamSource final : public StorageSource {
 public:
  StreamSource(std::vector<Bytes> spans, const MappedFile& file, const std::vector<Storage>& storages,
               const std::vector<std::uint64_t>& present)
      : spans_(std::move(spans)), file_(file), storages_(storages), present_(present) {
    spans_.resize(storages_.size());
  }

  Bytes bytes(std::size_t i) const override { return ensure_present(file_, spans_[i]); }

  std::optional<FileRange> file_range(std::size_t i) const override { return range_at(file_, own_file_offset(i)); }
  std::optional<std::uint64_t> own_file_offset(std::size_t i) const override {
    return plain_offset_in(file_, spans_[i]);
  }

  std::optional<RemoteRange> remote_range(std::size_t i) const override {
    const Storage& s = storages_[i];
    if (s.view_of || i >= present_.size() || present_[i] != s.nbytes || spans_[i].size() != s.nbytes) return std::nullopt;
    if (spans_[i].data() < file_.bytes.data()) return std::nullopt;
    return remote_range_of(file_, static_cast<std::uint64_t>(spans_[i].data() - file_.bytes.data()), s.nbytes);
  }

  void prefetch(std::span<const std::size_t> indexes) const override {
    if (!file_.source) return;
    std::vector<ByteRange> ranges;
    for (std::size_t i : indexes) {
      if (i >= storages_.size() || storages_[i].view_of) continue;
      if (const auto off = offset_in(file_, spans_[i])) ranges.push_back({*off, spans_[i].size()});
    }
    file_.source->ensure(ranges);
  }

 private:
  std::vector<Bytes> spans_;
  const MappedFile& file_;
  const std::vector<Storage>& storages_;
  const std::vector<std::uint64_t>& present_;
};

// kSafetensors: every storage is one tensor's [file_offset, + nbytes), checked inside the file on open.
class SafetensorsSource final : public StorageSource {
 public:
  SafetensorsSource(const MappedFile& file, const std::vector<Storage>& storages) : file_(file), storages_(storages) {}

  Bytes bytes(std::size_t i) const override { return ensure_present(file_, span(i)); }

  std::optional<FileRange> file_range(std::size_t i) const override { return range_at(file_, own_file_offset(i)); }
  std::optional<std::uint64_t> own_file_offset(std::size_t i) const override {
    return plain_offset_in(file_, span(i));
  }

  std::optional<RemoteRange> remote_range(std::size_t i) const override {
    return remote_range_of(file_, storages_[i].file_offset, storages_[i].nbytes);
  }

  void prefetch(std::span<const std::size_t> indexes) const override {
    if (!file_.source) return;
    std::vector<ByteRange> ranges;
    for (std::size_t i : indexes) {
      if (i < storages_.size() && storages_[i].nbytes != 0) ranges.push_back({storages_[i].file_offset, storages_[i].nbytes});
    }
    file_.source->ensure(ranges);
  }

 private:
  Bytes span(std::size_t i) const {
    return file_.bytes.slice(static_cast<std::size_t>(storages_[i].file_offset),
                             static_cast<std::size_t>(storages_[i].nbytes));
  }

  const MappedFile& file_;
  const std::vector<Storage>& storages_;
};

}  // namespace

std::optional<std::uint64_t> plain_offset_in(const MappedFile& file, const Bytes& raw) {
  if (file.residency != Residency::kMapped && file.residency != Residency::kRead) return std::nullopt;
  const std::uint8_t* base = file.bytes.data();
  if (raw.size() != 0 && (raw.data() < base || raw.data() + raw.size() > base + file.bytes.size())) return std::nullopt;
  return raw.size() == 0 ? 0 : static_cast<std::uint64_t>(raw.data() - base);
}

std::optional<FileRange> range_at(const MappedFile& file, std::optional<std::uint64_t> offset) {
  if (!offset) return std::nullopt;
  return FileRange{file.path, *offset};
}

std::optional<RemoteRange> remote_range_of(const MappedFile& file, std::uint64_t offset, std::uint64_t length) {
  if (!file.source || offset > file.bytes.size() || length > file.bytes.size() - offset) return std::nullopt;
  return RemoteRange{file.source, offset, length};
}

std::unique_ptr<StorageSource> stream_source(std::vector<Bytes> spans, const MappedFile& file,
                                             const std::vector<Storage>& storages,
                                             const std::vector<std::uint64_t>& present) {
  return std::make_unique<StreamSource>(std::move(spans), file, storages, present);
}

std::unique_ptr<StorageSource> safetensors_source(const MappedFile& file, const std::vector<Storage>& storages) {
  return std::make_unique<SafetensorsSource>(file, storages);
}

}  // namespace maploc::torch
