// http.cpp - ranged GETs over libcurl, each answer checked: status, Content-Range, length, validators.
#include "http.h"

#include "redirect.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <mutex>
#include <optional>

namespace maploc::remote {
namespace {

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

struct ContentRange {
  std::uint64_t first = 0, last = 0, total = 0;
};

// "bytes 0-99/1234"; nullopt for anything else ("bytes */1234" included).
std::optional<ContentRange> parse_content_range(const std::string& v) {
  unsigned long long a = 0, b = 0, t = 0;
  char tail = 0;
  if (std::sscanf(v.c_str(), "bytes %llu-%llu/%llu%c", &a, &b, &t, &tail) != 3 || b < a || b >= t) return std::nullopt;
  return ContentRange{a, b, t};
}

// "bytes */1234" (a 416's statement of the size): 1234; nullopt for anything else.
std::optional<std::uint64_t> parse_unsatisfied_total(const std::string& v) {
  unsigned long long t = 0;
  char tail = 0;
  if (std::sscanf(v.c_str(), "bytes */%llu%c", &t, &tail) != 1) return std::nullopt;
  return t;
}

constexpr int kMaxRedirects = 8;

// Whether requests for `target` carry secrets bound to its origin (a SigV4 signature, a token).
bool signed_request(const Target& target) { return !target.sigv4.empty() || !target.session_token.empty(); }

// Performs the request set up on `curl` for target.url, then each redirect judge_redirect allows
// (at most kMaxRedirects), on the same handle and headers: only to the same origin for a signed
// request, so its signature and token never leave it; never from https to http. A refused redirect
// leaves its reason in `refused` (judge() raises it); too many give CURLE_TOO_MANY_REDIRECTS.
// `status` (the Exchange's) is cleared before each answer.
CURLcode perform_following(CURL* curl, const Target& target, long& status, std::string& refused) {
  std::string url = target.url;
  for (int hops = 0;; ++hops) {
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    status = 0;
    const CURLcode rc = curl_easy_perform(curl);
    char* next = nullptr;
    if (rc != CURLE_OK || curl_easy_getinfo(curl, CURLINFO_REDIRECT_URL, &next) != CURLE_OK || next == nullptr) {
      return rc;
    }
    if (hops == kMaxRedirects) return CURLE_TOO_MANY_REDIRECTS;
    const RedirectVerdict verdict = judge_redirect(url, next, signed_request(target));
    if (!verdict.follow) {
      long code = 0;
      curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
      refused = "HTTP " + std::to_string(code) + ": " + verdict.refusal;
      return rc;
    }
    url = verdict.url;
  }
}

}  // namespace

// The state of one request: headers as they arrive, the body into its destination.
struct Connection::Exchange {
  // Destination: a fixed span (get) or a growing vector (probe).
  std::uint8_t* dest = nullptr;
  std::uint64_t capacity = 0;
  std::vector<std::uint8_t>* grow = nullptr;
  std::uint64_t whole_limit = 0;  // probe: a 200 body may be this long
  bool allow_whole = false;

  long status = 0;
  std::string content_range, etag, last_modified;
  std::uint64_t received = 0;
  bool overflow = false, ignored_range = false;
  std::string refused_redirect;  // why a redirect was not followed (judge_redirect), with its status
  CURL* curl = nullptr;

  // Time bounds and the error body's cap (apply_bounds; docs/remote.md, "Time bounds").
  const Options* options = nullptr;
  std::uint64_t timeout_ms = 0;       // this request's total timeout
  std::uint64_t error_body = 0;       // bytes of an error answer read
  bool error_body_cut = false;        // the error answer was longer than options->error_body_bytes
  char curl_error[CURL_ERROR_SIZE] = {};

  // An error answer's body: read and dropped, up to the cap; then the transfer stops (its status decides).
  std::size_t error_page(std::size_t len) {
    error_body += len;
    if (options != nullptr && error_body > options->error_body_bytes) {
      error_body_cut = true;
      return 0;
    }
    return len;
  }

  static std::size_t on_header(char* data, std::size_t size, std::size_t n, void* self) {
    auto& x = *static_cast<Exchange*>(self);
    const std::string line(data, size * n);
    if (line.rfind("HTTP/", 0) == 0) {  // a new answer (after a redirect or 100-continue)
      x.content_range.clear();
      x.etag.clear();
      x.last_modified.clear();
      return size * n;
    }
    const auto colon = line.find(':');
    if (colon == std::string::npos) return size * n;
    const std::string name = lower(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    if (name == "content-range") x.content_range = value;
    if (name == "etag") x.etag = value;
    if (name == "last-modified") x.last_modified = value;
    return size * n;
  }

  static std::size_t on_body(char* data, std::size_t size, std::size_t n, void* self) {
    auto& x = *static_cast<Exchange*>(self);
    const std::size_t len = size * n;
    if (x.status == 0) curl_easy_getinfo(x.curl, CURLINFO_RESPONSE_CODE, &x.status);
    if (x.status != 200 && x.status != 206) return x.error_page(len);  // an error page: read and dropped
    if (x.status == 200 && !x.allow_whole) {
      x.ignored_range = true;
      return 0;  // aborts the transfer: the whole object is not wanted
    }
    const std::uint64_t cap = x.grow != nullptr ? (x.status == 200 ? x.whole_limit : x.capacity) : x.capacity;
    if (len > cap - x.received) {
      x.overflow = true;
      if (x.status == 200) x.ignored_range = true;
      return 0;
    }
    if (x.grow != nullptr) {
      x.grow->insert(x.grow->end(), reinterpret_cast<std::uint8_t*>(data), reinterpret_cast<std::uint8_t*>(data) + len);
    } else {
      std::memcpy(x.dest + x.received, data, len);
    }
    x.received += len;
    return len;
  }
};

namespace {

// The connect timeout, the request's total timeout, the low-speed limit (a stall or a trickle) and
// curl's own message of which one was reached.
void apply_bounds(CURL* curl, Connection::Exchange& x) {
  const Options& o = *x.options;
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(o.connect_timeout_ms));
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(x.timeout_ms));
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, static_cast<long>(o.low_speed_bytes));
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, static_cast<long>(o.low_speed_seconds));
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, x.curl_error);
}

// The CA file https trusts (Options::ca_file, resolved by Object::open); unset: curl's default store.
void apply_ca(CURL* curl, const Connection::Exchange& x) {
  if (!x.options->ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, x.options->ca_file.c_str());
}

// Sends one GET with `headers`; returns the curl code. The Exchange holds what came back.
CURLcode perform(CURL* curl, const Target& target, const std::vector<std::string>& headers, Connection::Exchange& x) {
  curl_easy_reset(curl);
  x.curl = curl;
  curl_easy_setopt(curl, CURLOPT_URL, target.url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  // Redirects: curl follows none; perform_following() decides each (redirect.cpp).
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  apply_bounds(curl, x);
  apply_ca(curl, x);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "maploc");
  curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, 512L << 10);  // fewer, larger reads of the socket
  curl_easy_setopt(curl, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_2TLS));
  // TLS: curl's defaults verify the peer's certificate and host name; nothing here turns them off.
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &Connection::Exchange::on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &x);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Connection::Exchange::on_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &x);
  curl_slist* list = nullptr;
  for (const auto& h : headers) list = curl_slist_append(list, h.c_str());
  if (!target.sigv4.empty()) {
    curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, target.sigv4.c_str());
    curl_easy_setopt(curl, CURLOPT_USERNAME, target.access_key.c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD, target.secret_key.c_str());
    list = curl_slist_append(list, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    if (!target.session_token.empty()) {
      list = curl_slist_append(list, ("x-amz-security-token: " + target.session_token).c_str());
    }
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
  const CURLcode rc = perform_following(curl, target, x.status, x.refused_redirect);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &x.status);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, nullptr);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, nullptr);  // x.curl_error ends with x
  curl_slist_free_all(list);
  return rc;
}

std::string range_text(std::uint64_t first, std::uint64_t last) {
  return "bytes " + std::to_string(first) + "-" + std::to_string(last);
}

// An error answer cut at Options::error_body_bytes and a bound reached: what the status or curl said.
void judge_bounds(CURLcode rc, const Connection::Exchange& x, const Target& target, const std::string& asked) {
  if (x.error_body_cut) {
    const std::string what = "HTTP " + std::to_string(x.status) + " for " + asked + " (its body was cut at " +
                             std::to_string(x.options->error_body_bytes) + " bytes)";
    if (x.status >= 500 || x.status == 429 || x.status == 408) throw Retryable{ErrorCode::kRemoteRequest, what};
    throw Error(ErrorCode::kRemoteRequest, Stage::kIo, what, std::nullopt, target.display);
  }
  if (rc == CURLE_OPERATION_TIMEDOUT) {
    throw Retryable{ErrorCode::kRemoteRequest,
                    std::string("curl: ") + (x.curl_error[0] != 0 ? x.curl_error : curl_easy_strerror(rc)) + " (" +
                        asked + "; total timeout " + std::to_string(x.timeout_ms) + " ms, at least " +
                        std::to_string(x.options->low_speed_bytes) + " bytes/s over " +
                        std::to_string(x.options->low_speed_seconds) + " s)"};
  }
}

// A certificate no trusted CA signed: says where the trusted CAs came from and how to add one.
void judge_tls(CURLcode rc, const Connection::Exchange& x, const Target& target) {
  if (rc != CURLE_PEER_FAILED_VERIFICATION) return;
  throw Error(ErrorCode::kRemoteRequest, Stage::kIo,
              std::string("curl: ") + (x.curl_error[0] != 0 ? x.curl_error : curl_easy_strerror(rc)) +
                  " (trusted: " + (x.options->ca_file.empty() ? "the system's CA store" : "'" + x.options->ca_file + "'") +
                  "; a private CA: --ca-file or $CURL_CA_BUNDLE, docs/remote.md)",
              std::nullopt, target.display);
}

// Turns what curl and the status say into success, a retryable fault, or an error.
void judge(CURLcode rc, const Connection::Exchange& x, const Target& target, const std::string& asked) {
  judge_bounds(rc, x, target, asked);
  judge_tls(rc, x, target);
  if (x.ignored_range) {
    throw Error(ErrorCode::kRemoteBadResponse, Stage::kIo,
                "the server answered a ranged request (" + asked + ") with the whole object (200): it ignores "
                "Range, which maploc needs for objects of this size; download the file and open it locally",
                std::nullopt, target.display);
  }
  if (x.overflow) throw Retryable{ErrorCode::kRemoteBadResponse, "the body is longer than the " + asked + " asked"};
  if (!x.refused_redirect.empty()) {
    throw Error(ErrorCode::kRemoteRedirects, Stage::kIo, x.refused_redirect + " (for " + asked + ")", std::nullopt,
                target.display);
  }
  if (rc == CURLE_TOO_MANY_REDIRECTS) {
    throw Error(ErrorCode::kRemoteRedirects, Stage::kIo, "too many redirects (a redirect loop?) for " + asked,
                std::nullopt, target.display);
  }
  if (rc == CURLE_UNSUPPORTED_PROTOCOL || rc == CURLE_URL_MALFORMAT) {
    throw Error(ErrorCode::kRemoteBadUrl, Stage::kIo, std::string("curl: ") + curl_easy_strerror(rc), std::nullopt,
                target.display);
  }
  if (rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CONNECT_ERROR || rc == CURLE_SSL_CACERT_BADFILE ||
      rc == CURLE_COULDNT_RESOLVE_HOST) {
    throw Error(ErrorCode::kRemoteRequest, Stage::kIo, std::string("curl: ") + curl_easy_strerror(rc), std::nullopt,
                target.display);
  }
  if (rc != CURLE_OK) {
    throw Retryable{ErrorCode::kRemoteRequest, std::string("curl: ") + curl_easy_strerror(rc) + " (" + asked + ")"};
  }
  if (x.status == 412) {
    throw Error(ErrorCode::kRemoteChanged, Stage::kIo,
                "the object changed while it was read (412 Precondition Failed on If-Match / If-Unmodified-Since "
                "for " + asked + "); open it again",
                std::nullopt, target.display);
  }
  if (x.status >= 500 || x.status == 429 || x.status == 408) {
    throw Retryable{ErrorCode::kRemoteRequest, "HTTP " + std::to_string(x.status) + " for " + asked};
  }
  if (x.status != 200 && x.status != 206) {
    throw Error(ErrorCode::kRemoteRequest, Stage::kIo,
                "HTTP " + std::to_string(x.status) + " for " + asked +
                    (x.status == 403 || x.status == 401 ? " (check the credentials and the URL)" : "") +
                    (x.status == 404 ? " (no such object)" : ""),
                std::nullopt, target.display);
  }
}

// A 416 to the tail request is an empty object, unless its Content-Range gives a size: then the
// server refused a suffix range of an object that has bytes, and the message names that size.
void refuse_unsatisfied_tail(const Connection::Exchange& x, const Target& target, const std::string& asked) {
  const auto total = parse_unsatisfied_total(x.content_range);
  if (!total || *total == 0) return;
  throw Error(ErrorCode::kRemoteBadResponse, Stage::kIo,
              "the server answered 416 (Range Not Satisfiable) to a request for " + asked + ", though it gives the "
              "object's size as " + std::to_string(*total) + " bytes (Content-Range: bytes */" +
                  std::to_string(*total) + "): it does not serve suffix ranges (Range: bytes=-N), which maploc needs",
              std::nullopt, target.display);
}

}  // namespace

std::uint64_t request_timeout_ms(const Options& options, std::uint64_t bytes,
                                 std::chrono::steady_clock::time_point deadline) {
  const std::uint64_t rate = std::max<std::uint64_t>(options.timeout_rate, 1);
  std::uint64_t ms = options.timeout_ms + bytes / rate * 1000 + bytes % rate * 1000 / rate;
  if (deadline != std::chrono::steady_clock::time_point::max()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    ms = std::min<std::uint64_t>(ms, static_cast<std::uint64_t>(std::max<std::int64_t>(left.count(), 1)));
  }
  return std::min<std::uint64_t>(ms, 0x7fffffff);
}

Connection::Connection(const Target& target, const Options& options) : target_(target), options_(options) {
  global_init();
  curl_ = curl_easy_init();
  if (curl_ == nullptr) throw Error(ErrorCode::kRemoteRequest, Stage::kIo, "curl_easy_init failed", std::nullopt, target.display);
}

Connection::~Connection() { curl_easy_cleanup(static_cast<CURL*>(curl_)); }

Probe Connection::probe(std::uint64_t tail, std::uint64_t whole_limit, Tally& tally) {
  Probe p;
  Exchange x;
  x.grow = &p.body;
  x.capacity = tail;
  x.whole_limit = whole_limit;
  x.allow_whole = true;
  x.options = &options_;
  x.timeout_ms = request_timeout_ms(options_, tail, tally.deadline);
  const std::string asked = "the last " + std::to_string(tail) + " bytes";
  ++tally.requests;
  const CURLcode rc = perform(static_cast<CURL*>(curl_), target_, {"Range: bytes=-" + std::to_string(tail)}, x);
  tally.bytes += x.received;
  if (x.status == 416) {  // an empty object has no last bytes
    refuse_unsatisfied_tail(x, target_, asked);
    p.pinned.etag = x.etag;
    p.pinned.last_modified = x.last_modified;
    return p;
  }
  judge(rc, x, target_, asked);
  p.pinned.etag = x.etag;
  p.pinned.last_modified = x.last_modified;
  if (x.status == 200) {
    p.pinned.size = x.received;
    return p;
  }
  const auto cr = parse_content_range(x.content_range);
  if (!cr) throw Retryable{ErrorCode::kRemoteBadResponse, "a 206 answer without a valid Content-Range ('" + x.content_range + "')"};
  const std::uint64_t want = std::min(tail, cr->total);
  if (cr->last + 1 != cr->total || cr->last - cr->first + 1 != want) {
    throw Retryable{ErrorCode::kRemoteBadResponse, "Content-Range '" + x.content_range + "' for " + asked};
  }
  if (x.received != want) {
    throw Retryable{ErrorCode::kRemoteBadResponse,
                    "a short body: " + std::to_string(x.received) + " of " + std::to_string(want) + " bytes"};
  }
  p.pinned.size = cr->total;
  p.offset = cr->first;
  return p;
}

void Connection::get(std::uint64_t first, std::uint64_t length, std::uint8_t* dest, const Pinned& pinned,
                     Tally& tally) {
  const std::uint64_t last = first + length - 1;
  Exchange x;
  x.dest = dest;
  x.capacity = length;
  x.options = &options_;
  x.timeout_ms = request_timeout_ms(options_, length, tally.deadline);
  std::vector<std::string> headers{"Range: bytes=" + std::to_string(first) + "-" + std::to_string(last)};
  const bool weak = pinned.etag.rfind("W/", 0) == 0;
  if (!pinned.etag.empty() && !weak) {
    headers.push_back("If-Match: " + pinned.etag);
  } else if (!pinned.last_modified.empty()) {
    headers.push_back("If-Unmodified-Since: " + pinned.last_modified);
  }
  const std::string asked = range_text(first, last);
  ++tally.requests;
  const CURLcode rc = perform(static_cast<CURL*>(curl_), target_, headers, x);
  tally.bytes += x.received;
  judge(rc, x, target_, asked);
  if (x.status == 200) {
    throw Error(ErrorCode::kRemoteBadResponse, Stage::kIo,
                "the server answered a ranged request (" + asked + ") with the whole object (200): it ignores Range",
                std::nullopt, target_.display);
  }
  if (!pinned.etag.empty() && !x.etag.empty() && x.etag != pinned.etag) {
    throw Error(ErrorCode::kRemoteChanged, Stage::kIo,
                "the object changed while it was read (its ETag is now " + x.etag + ", " + pinned.etag +
                    " when it was opened); open it again",
                std::nullopt, target_.display);
  }
  const auto cr = parse_content_range(x.content_range);
  if (cr && cr->total != pinned.size) {
    throw Error(ErrorCode::kRemoteChanged, Stage::kIo,
                "the object changed while it was read (its size is now " + std::to_string(cr->total) + " bytes, " +
                    std::to_string(pinned.size) + " when it was opened); open it again",
                std::nullopt, target_.display);
  }
  if (!cr || cr->first != first || cr->last != last) {
    throw Retryable{ErrorCode::kRemoteBadResponse,
                    "Content-Range '" + x.content_range + "' for a request of " + asked};
  }
  if (x.received != length) {
    throw Retryable{ErrorCode::kRemoteBadResponse,
                    "a short body: " + std::to_string(x.received) + " of " + std::to_string(length) + " bytes (" +
                        asked + ")"};
  }
}

}  // namespace maploc::remote
