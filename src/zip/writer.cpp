// writer.cpp - stored records, FB alignment padding, data descriptors, ZIP64 end records (APPNOTE 6.3).
#include "zip/writer.h"

#include <algorithm>

#include "maploc/error.h"
#include "zip/crc32.h"

namespace maploc::zip {
namespace {

constexpr std::uint32_t kLocalSig = 0x04034B50;
constexpr std::uint32_t kDescriptorSig = 0x08074B50;
constexpr std::uint32_t kCentralSig = 0x02014B50;
constexpr std::uint32_t kZip64EndSig = 0x06064B50;
constexpr std::uint32_t kZip64LocatorSig = 0x07064B50;
constexpr std::uint32_t kEndSig = 0x06054B50;
constexpr std::uint64_t kMax32 = 0xFFFFFFFF;
constexpr std::uint16_t kFlags = 0x0808;       // bit 3: sizes in the descriptor; bit 11: UTF-8 names
constexpr std::uint16_t kFlagsEmpty = 0x0800;  // torch writes no descriptor for an empty record
constexpr std::uint16_t kZip64Id = 0x0001;
constexpr std::uint16_t kPaddingId = 0x4246;   // 'F' 'B', PyTorch's padding field (§1.5)

struct Out {
  std::vector<std::uint8_t> b;
  void u16(std::uint64_t v) {
    for (int i = 0; i < 2; ++i) b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  void u32(std::uint64_t v) {
    for (int i = 0; i < 4; ++i) b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  void str(const std::string& s) { b.insert(b.end(), s.begin(), s.end()); }
};

[[noreturn]] void misuse(const std::string& message, const std::string& item = {}) {
  throw Error(ErrorCode::kZipWriterMisuse, Stage::kZip, message, std::nullopt, item);
}

bool needs_zip64(std::uint64_t size, std::uint64_t header_offset) {
  return size >= kMax32 || header_offset >= kMax32;
}

// The ZIP64 extra field miniz writes: sizes when the size needs them, the
// header offset when it needs it (order of APPNOTE 4.5.3).
void zip64_extra(Out& o, std::uint64_t size, std::uint64_t header_offset) {
  const bool big_size = size >= kMax32, big_offset = header_offset >= kMax32;
  o.u16(kZip64Id);
  o.u16((big_size ? 16 : 0) + (big_offset ? 8 : 0));
  if (big_size) {
    o.u64(size);
    o.u64(size);
  }
  if (big_offset) o.u64(header_offset);
}

}  // namespace

Writer::Writer(ByteSink sink, WriterOptions options) : sink_(std::move(sink)), options_(options) {
  const std::uint64_t a = options_.alignment;
  if (a == 0 || a > 65536 || (a & (a - 1)) != 0) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kZip,
                "alignment " + std::to_string(a) + " is not a power of two in 1..65536");
  }
}

void Writer::emit(std::span<const std::uint8_t> bytes) {
  if (bytes.empty()) return;
  sink_(bytes);
  offset_ += bytes.size();
}

void Writer::begin(std::string name, std::uint64_t size) {
  if (open_ || finished_) misuse("begin while a record is open or after finish", name);
  if (name.empty() || name.size() > 0xFFFF) misuse("a record name must have 1..65535 bytes", name);
  for (const Entry& e : entries_) {
    if (e.name == name) misuse("duplicate record name", name);
  }
  const std::uint64_t header = offset_;
  const bool z64 = needs_zip64(size, header);
  // getPadding of inline_container.cc: the data starts after the local
  // header, the name, the ZIP64 extra (if any) and the 4-byte FB header.
  std::uint64_t start = header + 30 + name.size() + 4;
  if (z64) start += 4 + (size >= kMax32 ? 16 : 0) + (header >= kMax32 ? 8 : 0);
  const std::uint64_t a = options_.alignment;
  const std::uint64_t pad = (a - start % a) % a;
  Out o;
  o.u32(kLocalSig);
  o.u16(z64 ? 45 : 0);  // version needed
  o.u16(size == 0 ? kFlagsEmpty : kFlags);
  o.u16(0);  // method: stored
  o.u16(0);  // time
  o.u16(0);  // date
  o.u32(0);  // crc, sizes: in the data descriptor
  o.u32(size >= kMax32 ? kMax32 : 0);
  o.u32(size >= kMax32 ? kMax32 : 0);
  o.u16(name.size());
  const std::uint64_t extra = (z64 ? 4 + (size >= kMax32 ? 16 : 0) + (header >= kMax32 ? 8 : 0) : 0) + 4 + pad;
  o.u16(extra);
  o.str(name);
  if (z64) zip64_extra(o, size, header);
  o.u16(kPaddingId);
  o.u16(pad);
  o.b.insert(o.b.end(), pad, 'Z');
  emit(o.b);
  data_offset_ = offset_;
  entries_.push_back({std::move(name), header, size, 0});
  written_ = 0;
  crc_ = 0;
  open_ = true;
}

void Writer::write(std::span<const std::uint8_t> bytes) {
  if (!open_) misuse("write outside a record");
  Entry& e = entries_.back();
  if (bytes.size() > e.size - written_) {
    misuse("record '" + e.name + "' declared " + std::to_string(e.size) + " bytes; more were written", e.name);
  }
  if (options_.crc32) crc_ = crc32_update(crc_, bytes);
  emit(bytes);
  written_ += bytes.size();
}

void Writer::end() {
  if (!open_) misuse("end outside a record");
  Entry& e = entries_.back();
  if (written_ != e.size) {
    misuse("record '" + e.name + "' declared " + std::to_string(e.size) + " bytes but " + std::to_string(written_) +
               " were written",
           e.name);
  }
  e.crc = crc_;
  open_ = false;
  if (e.size == 0) return;
  Out o;
  o.u32(kDescriptorSig);
  o.u32(e.crc);
  if (needs_zip64(e.size, e.header_offset)) {
    o.u64(e.size);
    o.u64(e.size);
  } else {
    o.u32(e.size);
    o.u32(e.size);
  }
  emit(o.b);
}

void Writer::add(std::string name, std::span<const std::uint8_t> bytes) {
  begin(std::move(name), bytes.size());
  write(bytes);
  end();
}

void Writer::finish() {
  if (open_ || finished_) misuse("finish while a record is open or twice");
  const std::uint64_t cd_offset = offset_;
  for (const Entry& e : entries_) {
    const bool big_size = e.size >= kMax32, big_offset = e.header_offset >= kMax32;
    Out o;
    o.u32(kCentralSig);
    o.u16(big_size || big_offset ? 45 : 0);  // made by
    o.u16(big_size || big_offset ? 45 : 0);  // needed
    o.u16(e.size == 0 ? kFlagsEmpty : kFlags);
    o.u16(0);
    o.u16(0);
    o.u16(0);
    o.u32(e.crc);
    o.u32(std::min(e.size, kMax32));
    o.u32(std::min(e.size, kMax32));
    o.u16(e.name.size());
    o.u16(big_size || big_offset ? 4 + (big_size ? 16 : 0) + (big_offset ? 8 : 0) : 0);
    o.u16(0);  // comment
    o.u16(0);  // disk
    o.u16(0);  // internal attributes
    o.u32(0);  // external attributes
    o.u32(std::min(e.header_offset, kMax32));
    o.str(e.name);
    if (big_size || big_offset) zip64_extra(o, e.size, e.header_offset);
    emit(o.b);
  }
  const std::uint64_t cd_size = offset_ - cd_offset;
  const std::uint64_t zip64_end = offset_;
  const std::uint64_t n = entries_.size();
  Out o;
  o.u32(kZip64EndSig);
  o.u64(44);
  o.u16(0x031E);
  o.u16(45);
  o.u32(0);
  o.u32(0);
  o.u64(n);
  o.u64(n);
  o.u64(cd_size);
  o.u64(cd_offset);
  o.u32(kZip64LocatorSig);
  o.u32(0);
  o.u64(zip64_end);
  o.u32(1);
  o.u32(kEndSig);
  o.u16(0);
  o.u16(0);
  o.u16(std::min<std::uint64_t>(n, 0xFFFF));
  o.u16(std::min<std::uint64_t>(n, 0xFFFF));
  o.u32(std::min(cd_size, kMax32));
  o.u32(std::min(cd_offset, kMax32));
  o.u16(0);
  emit(o.b);
  finished_ = true;
}

}  // namespace maploc::zip
