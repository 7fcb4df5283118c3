// inflate.cpp - zlib raw inflate for deflated records, with bomb checks.
#include "inflate.h"

#include <zlib.h>

#include <limits>
#include <vector>

#include "maploc/error.h"

namespace maploc::zip {
namespace {

[[noreturn]] void fail(ErrorCode code, const std::string& path, std::string message, std::uint64_t offset) {
  throw Error(code, Stage::kZip, std::move(message), offset, path);
}

// Ends the zlib stream on every path out of inflate_record.
struct InflateStream {
  z_stream z{};
  bool live = false;
  ~InflateStream() {
    if (live) inflateEnd(&z);
  }
};

}  // namespace

Bytes inflate_record(const Bytes& compressed, const Record& record, const Limits& limits,
                     const std::string& path) {
  const std::string who = "deflated record '" + record.name + "'";
  if (record.size > limits.zip_max_inflated_bytes) {
    fail(ErrorCode::kZipRecordTooLarge, path,
         who + " declares " + std::to_string(record.size) + " bytes, above the limit of " +
             std::to_string(limits.zip_max_inflated_bytes) + " (raise Limits::zip_max_inflated_bytes)",
         record.data_offset);
  }
  // Deflate cannot expand more than ~1032:1; a larger declared ratio is a bomb.
  if (record.size / std::max<std::uint64_t>(record.compressed_size, 1) > limits.zip_max_compression_ratio) {
    fail(ErrorCode::kZipRecordTooLarge, path,
         who + " declares " + std::to_string(record.size) + " bytes from " +
             std::to_string(record.compressed_size) + " compressed, a ratio above " +
             std::to_string(limits.zip_max_compression_ratio) + " (raise Limits::zip_max_compression_ratio)",
         record.data_offset);
  }
  std::vector<std::uint8_t> out(static_cast<std::size_t>(record.size));
  InflateStream s;
  if (inflateInit2(&s.z, -MAX_WBITS) != Z_OK) {
    fail(ErrorCode::kZipInflate, path, "zlib could not start inflating " + who, record.data_offset);
  }
  s.live = true;
  constexpr std::uint64_t kChunk = std::numeric_limits<uInt>::max();
  std::uint64_t in_left = compressed.size(), out_done = 0;
  const std::uint8_t* in = compressed.data();
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (s.z.avail_in == 0 && in_left > 0) {
      s.z.next_in = const_cast<Bytef*>(in);
      s.z.avail_in = static_cast<uInt>(std::min(in_left, kChunk));
      in += s.z.avail_in;
      in_left -= s.z.avail_in;
    }
    // One spare byte past the declared size lets us see a stream that is too long.
    std::uint8_t spare = 0;
    if (out_done < out.size()) {
      s.z.next_out = out.data() + out_done;
      s.z.avail_out = static_cast<uInt>(std::min<std::uint64_t>(out.size() - out_done, kChunk));
    } else {
      s.z.next_out = &spare;
      s.z.avail_out = 1;
    }
    const uInt before = s.z.avail_out;
    rc = inflate(&s.z, Z_NO_FLUSH);
    const uInt produced = before - s.z.avail_out;
    if (out_done >= out.size() && produced > 0) {
      fail(ErrorCode::kZipSizeMismatch, path,
           who + " inflates to more than its declared " + std::to_string(record.size) + " bytes",
           record.data_offset);
    }
    out_done += produced;
    if (rc == Z_STREAM_END) break;
    if (rc == Z_BUF_ERROR && s.z.avail_in == 0 && in_left == 0) {
      fail(ErrorCode::kZipSizeMismatch, path,
           who + " ends after " + std::to_string(out_done) + " of its declared " +
               std::to_string(record.size) + " bytes (truncated deflate stream)",
           record.data_offset);
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      fail(ErrorCode::kZipInflate, path,
           who + " is not valid deflate data (zlib: " + (s.z.msg ? s.z.msg : "error " + std::to_string(rc)) + ")",
           record.data_offset);
    }
  }
  if (out_done != out.size()) {
    fail(ErrorCode::kZipSizeMismatch, path,
         who + " inflates to " + std::to_string(out_done) + " bytes but declares " + std::to_string(record.size),
         record.data_offset);
  }
  return Bytes::owned(std::move(out));
}

}  // namespace maploc::zip
