// inflate.h - raw DEFLATE into an owned buffer of exactly the declared size (internal).
#pragma once

#include <cstdint>
#include <string>

#include "maploc/bytes.h"
#include "maploc/limits.h"
#include "maploc/zip/archive.h"

namespace maploc::zip {

/// Inflates a deflated record. Checks the declared size against
/// Limits::zip_max_inflated_bytes and zip_max_compression_ratio before
/// allocating, and that the stream yields exactly record.size bytes.
Bytes inflate_record(const Bytes& compressed, const Record& record, const Limits& limits,
                     const std::string& path);

}  // namespace maploc::zip
