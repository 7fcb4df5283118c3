// redirect.cpp - the redirect policy of http.cpp: same origin, https never to http, no credentials
// to another origin (docs/remote.md, "Redirects").
#include "redirect.h"

#include <curl/curl.h>

#include <cctype>
#include <optional>
#include <utility>

namespace maploc::remote {
namespace {

// scheme, host (lowercase) and port (the scheme's default when none is written) of a URL.
struct Origin {
  std::string scheme, host, port;
  std::string written_port;  // empty when the URL names none
  bool operator==(const Origin& o) const { return scheme == o.scheme && host == o.host && port == o.port; }
  // scheme://host[:port]: what messages may name (never user information, a path or a query).
  std::string shown() const { return scheme + "://" + host + (written_port.empty() ? "" : ":" + written_port); }
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// One part of a parsed URL; empty when it has none.
std::string part(CURLU* u, CURLUPart which, unsigned flags = 0) {
  char* text = nullptr;
  if (curl_url_get(u, which, &text, flags) != CURLUE_OK || text == nullptr) return {};
  std::string out(text);
  curl_free(text);
  return out;
}

// The origin of `url`, and the URL without its user information; nullopt when curl cannot parse it.
std::optional<std::pair<Origin, std::string>> parse(const std::string& url) {
  CURLU* u = curl_url();
  if (u == nullptr) return std::nullopt;
  std::optional<std::pair<Origin, std::string>> out;
  if (curl_url_set(u, CURLUPART_URL, url.c_str(), CURLU_NON_SUPPORT_SCHEME) == CURLUE_OK) {
    Origin o{lower(part(u, CURLUPART_SCHEME)), lower(part(u, CURLUPART_HOST)),
             part(u, CURLUPART_PORT, CURLU_DEFAULT_PORT), part(u, CURLUPART_PORT)};
    curl_url_set(u, CURLUPART_USER, nullptr, 0);
    curl_url_set(u, CURLUPART_PASSWORD, nullptr, 0);
    curl_url_set(u, CURLUPART_OPTIONS, nullptr, 0);
    if (!o.scheme.empty() && !o.host.empty()) out.emplace(std::move(o), part(u, CURLUPART_URL));
  }
  curl_url_cleanup(u);
  return out;
}

}  // namespace

RedirectVerdict judge_redirect(const std::string& from, const std::string& to, bool signed_request) {
  RedirectVerdict v;
  const auto here = parse(from), there = parse(to);
  if (!here || !there) {
    v.refusal = "a redirect to a URL maploc cannot parse was refused";
    return v;
  }
  const Origin& a = here->first;
  const Origin& b = there->first;
  const std::string where = "a redirect to " + b.shown();
  if (b.scheme != "http" && b.scheme != "https") {
    v.refusal = where + " was refused: maploc follows redirects to http and https only";
  } else if (a.scheme == "https" && b.scheme == "http") {
    v.refusal = where + " was refused: from https to plain http, which maploc never follows (the request and "
                        "its answer would cross the network unencrypted)";
  } else if (signed_request && !(a == b)) {
    v.refusal = where + " was refused: another origin (scheme, host or port) than " + a.shown() +
                ", the one the request was signed for; maploc sends s3 signatures and session tokens to that origin "
                "only (name the endpoint that serves the object: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the "
                "profile's endpoint_url, or the bucket's region in AWS_REGION)";
  } else {
    v.follow = true;
    v.url = a == b ? to : there->second;
  }
  return v;
}

}  // namespace maploc::remote
