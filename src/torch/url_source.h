// url_source.h - checkpoints read from a URL: what is fetched before the readers run (internal).
#pragma once

#include <string>

#include "maploc/bytes.h"
#include "maploc/mapped_file.h"
#include "maploc/torch/checkpoint.h"

namespace maploc::torch {

/// Opens url and fetches what opening the checkpoint reads (docs/remote.md): for a zip, the end
/// records, the central directory, every local header and every record outside data/ and
/// constants/; for safetensors, the header; anything else (legacy, tar) in full.
MappedFile open_url(const std::string& url, const Options& options);

/// `bytes`, a view of `file`, made present first when `file` has a source.
Bytes ensure_present(const MappedFile& file, Bytes bytes);

}  // namespace maploc::torch
