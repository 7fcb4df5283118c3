// fuzz_zip.cpp - libFuzzer target: open any bytes as a zip archive and read every record.
#include <cstdint>

#include "fuzz_common.h"
#include "maploc/error.h"
#include "maploc/zip/archive.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace maploc;
  try {
    auto archive = zip::Archive::from_file(fuzz::as_file(data, size), fuzz::fuzz_limits());
    const std::uint64_t file_size = archive.file_bytes().size();
    for (const auto& record : archive.records()) {
      // The directory promise: every record's data lies inside the file.
      if (record.data_offset > file_size || record.compressed_size > file_size - record.data_offset) {
        fuzz::invariant_failed("zip record data outside the file");
      }
      if (archive.find(record.name) != &record) fuzz::invariant_failed("find() disagrees with records()");
      try {
        Bytes bytes = archive.read(record);
        if (bytes.size() != record.size) fuzz::invariant_failed("read() size differs from the declared size");
      } catch (const Error&) {
        // A bad record (inflate error, bomb) is reported; the others stay readable.
      }
    }
    try {
      archive.require_prefix();
    } catch (const Error&) {
    }
  } catch (const Error&) {
  }
  return 0;
}
