// http.h - one libcurl connection: ranged GETs checked against what was asked (internal).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "maploc/error.h"
#include "maploc/remote/object.h"
#include "target.h"

namespace maploc::remote {

/// What the first answer said about the object; sent back with every later request.
struct Pinned {
  std::uint64_t size = 0;
  std::string etag;           ///< empty when the server sent none
  std::string last_modified;  ///< empty when the server sent none
};

/// A failure that may pass when the request is sent again (5xx, 429, a dropped connection, a
/// short body, a wrong Content-Range). Other failures are maploc::Error at once.
struct Retryable {
  ErrorCode code;
  std::string message;
};

/// The first answer: the object's last bytes (or all of it) and its validators.
struct Probe {
  Pinned pinned;
  std::uint64_t offset = 0;        ///< of body's first byte in the object
  std::vector<std::uint8_t> body;
};

/// Body bytes and requests, counted by every connection of an object.
struct Tally {
  std::uint64_t bytes = 0;
  std::uint64_t requests = 0;
  /// This attempt ends by then at the latest (the read's retry budget); max: its own timeout only.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

/// The total timeout of a request of `bytes`: options.timeout_ms + bytes / options.timeout_rate,
/// cut to what is left before `deadline` (at least 1 ms). Options resolved (no zero fields).
std::uint64_t request_timeout_ms(const Options& options, std::uint64_t bytes,
                                 std::chrono::steady_clock::time_point deadline);

/// The CA file trusted for https and where it was named: `option` (Options::ca_file), else
/// $AWS_CA_BUNDLE when `s3`, else $CURL_CA_BUNDLE, else $SSL_CERT_FILE (empty values skipped);
/// path empty: the system's store.
struct CaFile {
  std::string path;
  std::string from;  ///< "Options::ca_file (--ca-file)", "$AWS_CA_BUNDLE", ...
};
CaFile ca_file_of(const std::string& option, bool s3);

class Connection {
 public:
  /// `options`: the time bounds and the CA file, resolved (Object::open); kept by reference.
  Connection(const Target& target, const Options& options);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  /// GET Range: bytes=-tail. A 200 (Range ignored) is accepted for objects up to whole_limit bytes.
  Probe probe(std::uint64_t tail, std::uint64_t whole_limit, Tally& tally);
  /// GET Range: bytes=first-(first+length-1) into dest, with If-Match / If-Unmodified-Since.
  void get(std::uint64_t first, std::uint64_t length, std::uint8_t* dest, const Pinned& pinned, Tally& tally);

  struct Exchange;

 private:
  const Target& target_;
  const Options& options_;
  void* curl_ = nullptr;
};

}  // namespace maploc::remote
