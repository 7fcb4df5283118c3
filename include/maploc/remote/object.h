// object.h - an object read from a URL (http, https, s3) by ranged requests into a sparse buffer.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "maploc/bytes.h"
#include "maploc/mapped_file.h"

namespace maploc::remote {

/// True for the sources read by URL: "http://", "https://" and "s3://".
bool is_url(std::string_view text) noexcept;

/// The URL as messages show it: scheme, host, port and path; never user information, a query
/// string (a presigned URL's signature) or a fragment.
std::string display_url(std::string_view url);

/// How an object is read (docs/remote.md).
struct Options {
  /// Ranged requests in flight at once; 0: $MAPLOC_REMOTE_PARALLEL, else 8.
  unsigned parallel = 0;
  /// Attempts after the first for a request that failed in a way that may pass (5xx, 429, a
  /// dropped connection, a short body, a wrong Content-Range), with backoff 50 ms, 100 ms, ...
  unsigned retries = 4;
  /// Missing ranges are fetched in requests of at most this many bytes.
  std::uint64_t chunk_bytes = 8u << 20;
  /// Missing pieces of one ensure() closer than this are fetched by one request (the bytes
  /// between are read and dropped): a request costs a round trip, 64 KiB less than one on most links.
  std::uint64_t merge_gap = 64u << 10;
  /// The first request asks for the object's last bytes (a zip's end records and, mostly, its
  /// central directory); this many.
  std::uint64_t tail_bytes = 128u << 10;
  /// A server that answers a ranged request with the whole object (200) is accepted only on the
  /// first request and only for objects up to this size; otherwise kRemoteBadResponse.
  std::uint64_t whole_object_bytes = 16u << 20;

  // Time bounds (docs/remote.md, "Time bounds"). A field left 0 takes its environment variable,
  // else the default named; a read of N bytes fails within
  // max(timeout_ms + N / timeout_rate, retry_budget_ms) plus one backoff (2 s at most).
  /// TCP and TLS setup of a connection; 0: $MAPLOC_REMOTE_CONNECT_TIMEOUT_MS, else 10 s.
  std::uint64_t connect_timeout_ms = 0;
  /// The least time a request may take, connecting included; 0: $MAPLOC_REMOTE_TIMEOUT_MS, else 30 s.
  std::uint64_t timeout_ms = 0;
  /// A request of N bytes may take timeout_ms + N / timeout_rate seconds in all (its total
  /// timeout); 0: $MAPLOC_REMOTE_TIMEOUT_RATE (bytes/s), else 64 KiB/s (an 8 MiB request: 158 s).
  std::uint64_t timeout_rate = 0;
  /// A transfer slower than low_speed_bytes per second for low_speed_seconds fails (a stall or a
  /// trickle; waiting for the answer counts); 0: $MAPLOC_REMOTE_LOW_SPEED_BYTES, else 1024.
  std::uint64_t low_speed_bytes = 0;
  /// 0: $MAPLOC_REMOTE_LOW_SPEED_SECONDS, else 30.
  std::uint64_t low_speed_seconds = 0;
  /// An error answer (404, 503, ...) is read up to this many bytes, then the request fails with its
  /// status; 0: $MAPLOC_REMOTE_ERROR_BODY_BYTES, else 64 KiB.
  std::uint64_t error_body_bytes = 0;
  /// Retries of one read start only while its first attempt began less than this long ago (and
  /// `retries` are left); each retry's total timeout is cut to what is left of it;
  /// 0: $MAPLOC_REMOTE_RETRY_BUDGET_MS, else 120 s.
  std::uint64_t retry_budget_ms = 0;

  /// A file of PEM certificates trusted for https (a private CA) instead of the system's; empty:
  /// $AWS_CA_BUNDLE (s3:// only), else $CURL_CA_BUNDLE, else $SSL_CERT_FILE, else the system's
  /// (docs/remote.md, "TLS"). A file that cannot be read is kRemoteBadUrl naming it.
  std::string ca_file;
};

/// An object behind a URL. Its bytes are an anonymous read-only-to-callers mapping of the
/// object's size (MAP_NORESERVE: pages never fetched cost nothing) filled by ensure(); the
/// validators the first answer gave (ETag, else Last-Modified) are sent with every later request
/// (If-Match, If-Unmodified-Since), so a change of the object is an error, never mixed bytes.
class Object final : public RangeSource, public std::enable_shared_from_this<Object> {
 public:
  /// Sends the first request (the last tail_bytes bytes) and learns the size. s3://bucket/key is
  /// read from $AWS_ENDPOINT_URL (path-style) or AWS's regional endpoint ($AWS_REGION,
  /// $AWS_DEFAULT_REGION), signed with SigV4 from $AWS_ACCESS_KEY_ID, $AWS_SECRET_ACCESS_KEY and
  /// $AWS_SESSION_TOKEN, else from the profile $AWS_PROFILE of ~/.aws/credentials, else of
  /// ~/.aws/config, which also gives the region and endpoint_url after the environment's (unsigned
  /// when no key is found; kRemoteBadUrl for a profile with a role or SSO only). Raises the
  /// kRemote* codes.
  static std::shared_ptr<Object> open(const std::string& url, const Options& options = {});
  ~Object() override;

  std::uint64_t size() const noexcept;
  /// The whole object, the raw buffer: bytes not yet ensured read as zeros (file().view() and
  /// the accessors RangeSource lists fetch first).
  const Bytes& bytes() const noexcept;
  /// A MappedFile of bytes() named by display_url(), with this object as its source.
  MappedFile file() const;
  /// True when every byte is present.
  bool complete() const;
  /// Marks the transfer as a whole read (a format without an index at its tail).
  void set_read_in_full() const;

  void ensure(std::span<const ByteRange> ranges) const override;
  /// The same with another merge gap (the URL opener merges less: only what it reads counts).
  void ensure(std::span<const ByteRange> ranges, std::uint64_t merge_gap) const;
  void read(std::uint64_t offset, std::uint64_t length, std::uint8_t* out) const override;
  unsigned read_parallel() const override;
  RemoteTransfer transfer() const override;

  struct Impl;

 private:
  explicit Object(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace maploc::remote
