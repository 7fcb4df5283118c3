// remote_json.h - the "remote" member of ls --json and load --json: what reading a URL cost (internal).
#pragma once

#include "json_writer.h"
#include "maploc/torch/checkpoint.h"

namespace maploc::cli {

/// Writes "remote": {bytes_read, object_bytes, read_in_full, requests, retries, url} for a
/// checkpoint opened from a URL; nothing for files.
inline void write_remote_json(JsonWriter& w, const torch::Checkpoint& checkpoint) {
  const auto t = checkpoint.remote_transfer();
  if (!t) return;
  w.key("remote")
      .begin_object()
      .field("bytes_read", t->bytes_read)
      .field("object_bytes", t->object_bytes)
      .field("read_in_full", t->read_in_full)
      .field("requests", t->requests)
      .field("retries", t->retries)
      .field("url", t->url)
      .end_object();
}

}  // namespace maploc::cli
