// url.cpp - which texts are URLs, how messages show them, and where s3:// requests go.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "maploc/error.h"
#include "maploc/remote/object.h"
#include "target.h"

namespace maploc::remote {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

[[noreturn]] void bad_url(const std::string& shown, const std::string& why) {
  throw Error(ErrorCode::kRemoteBadUrl, Stage::kIo, why, std::nullopt, shown);
}

// RFC 3986 percent-encoding of an S3 key, '/' kept (what SigV4's canonical URI expects).
std::string encode_key(std::string_view key) {
  std::string out;
  for (const char c : key) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || (u >= '0' && u <= '9') || c == '-' || c == '_' ||
        c == '.' || c == '~' || c == '/') {
      out += c;
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", u);
      out += buf;
    }
  }
  return out;
}

std::string trimmed(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// The profile's keys of the shared credentials file ($AWS_SHARED_CREDENTIALS_FILE, else
// ~/.aws/credentials; profile $AWS_PROFILE, else "default"), for what the environment leaves unset.
void read_credentials_file(Target& t) {
  std::string file = env("AWS_SHARED_CREDENTIALS_FILE");
  if (file.empty() && !env("HOME").empty()) file = env("HOME") + "/.aws/credentials";
  std::ifstream in(file);
  if (!in) return;
  std::string profile = env("AWS_PROFILE");
  if (profile.empty()) profile = "default";
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    line = trimmed(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      inside = trimmed(line.substr(1, line.size() - 2)) == profile;
      continue;
    }
    const auto eq = line.find('=');
    if (!inside || eq == std::string::npos) continue;
    const std::string key = trimmed(line.substr(0, eq)), value = trimmed(line.substr(eq + 1));
    if (key == "aws_access_key_id") t.access_key = value;
    if (key == "aws_secret_access_key") t.secret_key = value;
    if (key == "aws_session_token") t.session_token = value;
  }
}

Target resolve_s3(const std::string& url, const std::string& shown) {
  const std::string rest = url.substr(5);
  const auto slash = rest.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == rest.size()) {
    bad_url(shown, "an s3 URL names a bucket and a key: s3://bucket/key");
  }
  const std::string bucket = rest.substr(0, slash), key = rest.substr(slash + 1);
  std::string region = env("AWS_REGION");
  if (region.empty()) region = env("AWS_DEFAULT_REGION");
  if (region.empty()) region = "us-east-1";
  std::string endpoint = env("AWS_ENDPOINT_URL_S3");
  if (endpoint.empty()) endpoint = env("AWS_ENDPOINT_URL");
  Target t;
  t.display = shown;
  if (!endpoint.empty()) {
    while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
    t.url = endpoint + "/" + bucket + "/" + encode_key(key);  // path-style: S3-compatible stores
  } else if (bucket.find('.') != std::string::npos) {
    t.url = "https://s3." + region + ".amazonaws.com/" + bucket + "/" + encode_key(key);
  } else {
    t.url = "https://" + bucket + ".s3." + region + ".amazonaws.com/" + encode_key(key);
  }
  t.access_key = env("AWS_ACCESS_KEY_ID");
  t.secret_key = env("AWS_SECRET_ACCESS_KEY");
  t.session_token = env("AWS_SESSION_TOKEN");
  if (t.access_key.empty() && t.secret_key.empty()) read_credentials_file(t);
  if (!t.access_key.empty() || !t.secret_key.empty()) {
    if (t.access_key.empty() || t.secret_key.empty()) {
      bad_url(shown, "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together to sign s3 requests");
    }
    t.sigv4 = "aws:amz:" + region + ":s3";
  }
  return t;
}

}  // namespace

bool is_url(std::string_view text) noexcept {
  return starts_with(text, "http://") || starts_with(text, "https://") || starts_with(text, "s3://");
}

std::string display_url(std::string_view url) {
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return std::string(url.substr(0, url.find_first_of("?#")));
  std::string_view rest = url.substr(scheme_end + 3);
  rest = rest.substr(0, rest.find_first_of("?#"));
  const auto path_at = rest.find('/');
  std::string_view authority = rest.substr(0, path_at);
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) authority = authority.substr(at + 1);
  std::string out(url.substr(0, scheme_end + 3));
  out += authority;
  if (path_at != std::string_view::npos) out += rest.substr(path_at);
  return out;
}

Target resolve_target(const std::string& url) {
  const std::string shown = display_url(url);
  if (starts_with(url, "s3://")) return resolve_s3(url, shown);
  if (!starts_with(url, "http://") && !starts_with(url, "https://")) {
    bad_url(shown, "not a URL maploc reads (http://, https:// or s3://)");
  }
  Target t;
  t.url = url;
  t.display = shown;
  return t;
}

}  // namespace maploc::remote
