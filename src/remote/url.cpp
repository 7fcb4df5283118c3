// url.cpp - which texts are URLs, how messages show them, and where s3:// requests go.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <map>
#include <optional>
#include <utility>
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

// One profile's settings in an AWS shared file (INI): key -> value. A key indented under a key
// without a value (the config file's nested "s3 =" block) is kept as "parent.key", so it never
// passes for the profile's own setting.
struct Profile {
  std::string file;  // the file it was read from (found == false: none)
  bool found = false;
  std::map<std::string, std::string> values;
  std::string get(const std::string& key) const {
    const auto it = values.find(key);
    return it == values.end() ? std::string() : it->second;
  }
};

// The section that holds `profile` in `file`: "[NAME]" in the credentials file; "[profile NAME]"
// in the config file, where the default profile is "[default]" (or "[profile default]").
Profile read_profile(const std::string& file, const std::string& profile, bool config) {
  Profile p;
  p.file = file;
  std::ifstream in(file);
  if (file.empty() || !in) return p;
  bool inside = false;
  std::string parent;  // the key of the nested block we are in, if any
  for (std::string raw; std::getline(in, raw);) {
    const std::string line = trimmed(raw);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      const std::string name = trimmed(line.substr(1, line.size() - 2));
      inside = config ? (name == "profile " + profile || (profile == "default" && name == "default")) : name == profile;
      // "[profile  NAME]" with more blanks between counts too.
      if (config && !inside && name.rfind("profile", 0) == 0 && name.size() > 7 && (name[7] == ' ' || name[7] == '\t')) {
        inside = trimmed(name.substr(7)) == profile;
      }
      p.found = p.found || inside;
      parent.clear();
      continue;
    }
    const auto eq = line.find('=');
    if (!inside || eq == std::string::npos) continue;
    const std::string key = trimmed(line.substr(0, eq)), value = trimmed(line.substr(eq + 1));
    const bool indented = raw[0] == ' ' || raw[0] == '\t';
    if (indented && !parent.empty()) {
      p.values[parent + "." + key] = value;
      continue;
    }
    parent = value.empty() ? key : std::string();
    p.values[key] = value;
  }
  return p;
}

std::string home_file(const char* variable, const char* below_home) {
  std::string file = env(variable);
  if (file.empty() && !env("HOME").empty()) file = env("HOME") + below_home;
  return file;
}

// What the AWS CLI reads besides the environment: the profile $AWS_PROFILE (else "default") of
// $AWS_SHARED_CREDENTIALS_FILE (else ~/.aws/credentials) and of $AWS_CONFIG_FILE (else
// ~/.aws/config).
struct SharedFiles {
  std::string profile;
  bool named = false;  // $AWS_PROFILE set
  Profile credentials, config;
};

SharedFiles read_shared_files() {
  SharedFiles f;
  f.profile = env("AWS_PROFILE");
  f.named = !f.profile.empty();
  if (!f.named) f.profile = "default";
  f.credentials = read_profile(home_file("AWS_SHARED_CREDENTIALS_FILE", "/.aws/credentials"), f.profile, false);
  f.config = read_profile(home_file("AWS_CONFIG_FILE", "/.aws/config"), f.profile, true);
  return f;
}

// A profile that gets its credentials some other way than static keys is an error that says what
// to do: maploc signs with static keys only.
[[noreturn]] void not_static(const SharedFiles& f, const Profile& p, const std::string& how, const std::string& shown) {
  bad_url(shown, "profile '" + f.profile + "' of " + p.file + " gets its credentials by " + how +
                     ", which maploc does not do: it signs with static keys only. Export them, e.g. eval \"$(aws "
                     "configure export-credentials --profile " + f.profile +
                     " --format env)\" (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN); a public "
                     "bucket reads unsigned with AWS_CONFIG_FILE=/dev/null");
}

// The first of `hows` the profile sets in either file, if any.
std::optional<std::pair<const Profile*, std::string>> first_of(const SharedFiles& f,
                                                               std::initializer_list<const char*> hows) {
  for (const Profile* p : {&f.credentials, &f.config}) {
    if (!p->found) continue;
    for (const char* how : hows) {
      if (!p->get(how).empty()) return std::make_pair(p, std::string(how));
    }
  }
  return std::nullopt;
}

// Credentials of the profile, in the AWS CLI's order: a role, a web identity or SSO (refused), then
// static keys of the credentials file's profile, then of the config file's, then a
// credential_process (refused). Nothing at all: unsigned requests (public buckets).
void read_file_credentials(Target& t, const SharedFiles& f, const std::string& shown) {
  if (const auto by = first_of(f, {"role_arn", "web_identity_token_file", "sso_session", "sso_start_url",
                                   "sso_account_id", "sso_role_name"})) {
    not_static(f, *by->first, by->second, shown);
  }
  for (const Profile* p : {&f.credentials, &f.config}) {
    if (!p->found || (p->get("aws_access_key_id").empty() && p->get("aws_secret_access_key").empty())) continue;
    t.access_key = p->get("aws_access_key_id");
    t.secret_key = p->get("aws_secret_access_key");
    t.session_token = p->get("aws_session_token");
    if (t.access_key.empty() || t.secret_key.empty()) {
      bad_url(shown, "profile '" + f.profile + "' of " + p->file +
                         " sets only one of aws_access_key_id and aws_secret_access_key; set both to sign s3 "
                         "requests");
    }
    return;
  }
  if (const auto by = first_of(f, {"credential_process", "source_profile", "credential_source"})) {
    not_static(f, *by->first, by->second, shown);
  }
  if (f.named && !f.credentials.found && !f.config.found) {
    bad_url(shown, "AWS_PROFILE names profile '" + f.profile + "', which is in neither " +
                       (f.credentials.file.empty() ? std::string("~/.aws/credentials") : f.credentials.file) +
                       " nor " + (f.config.file.empty() ? std::string("~/.aws/config") : f.config.file) +
                       "; fix AWS_PROFILE, or export AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
  }
}

Target resolve_s3(const std::string& url, const std::string& shown) {
  const std::string rest = url.substr(5);
  const auto slash = rest.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == rest.size()) {
    bad_url(shown, "an s3 URL names a bucket and a key: s3://bucket/key");
  }
  const std::string bucket = rest.substr(0, slash), key = rest.substr(slash + 1);
  const SharedFiles files = read_shared_files();
  std::string region = env("AWS_REGION");
  if (region.empty()) region = env("AWS_DEFAULT_REGION");
  if (region.empty()) region = files.config.get("region");
  if (region.empty()) region = "us-east-1";
  std::string endpoint = env("AWS_ENDPOINT_URL_S3");
  if (endpoint.empty()) endpoint = env("AWS_ENDPOINT_URL");
  if (endpoint.empty()) endpoint = files.config.get("endpoint_url");
  Target t;
  t.display = shown;
  if (!endpoint.empty()) {
    while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
    if (endpoint.rfind("http://", 0) != 0 && endpoint.rfind("https://", 0) != 0) {
      bad_url(shown, "the S3 endpoint (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL or the profile's endpoint_url) is not "
                     "an http:// or https:// URL: '" + display_url(endpoint) + "'");
    }
    t.url = endpoint + "/" + bucket + "/" + encode_key(key);  // path-style: S3-compatible stores
  } else if (bucket.find('.') != std::string::npos) {
    t.url = "https://s3." + region + ".amazonaws.com/" + bucket + "/" + encode_key(key);
  } else {
    t.url = "https://" + bucket + ".s3." + region + ".amazonaws.com/" + encode_key(key);
  }
  t.access_key = env("AWS_ACCESS_KEY_ID");
  t.secret_key = env("AWS_SECRET_ACCESS_KEY");
  t.session_token = env("AWS_SESSION_TOKEN");
  if (t.access_key.empty() && t.secret_key.empty()) read_file_credentials(t, files, shown);
  if (!t.access_key.empty() || !t.secret_key.empty()) {
    if (t.access_key.empty() || t.secret_key.empty()) {
      bad_url(shown, "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together to sign s3 requests");
    }
    t.sigv4 = "aws:amz:" + region + ":s3";
  }
  return t;
}

// Where the user information of the text after "://" ends (the position of its '@'), or npos when
// it has none. A raw '#', '?', '/' or '@' typed in a password (or a token given as user name) would
// end the authority early, so the user information is taken to reach the last '@' of `rest` when
// there is any sign of it: an '@' before the first '?' or '#', or a ':' before the first '/', '?'
// or '#' (a password cut short; a password of digits looks like a port, so a port counts too). An
// '@' only in the query or fragment of a URL without such a sign is the query's. Erring this way
// can hide a host name, never a password.
std::size_t user_info_end(std::string_view rest) {
  const auto at = rest.rfind('@');
  if (at == std::string_view::npos) return at;
  if (rest.find('@') < rest.find_first_of("?#")) return at;
  const std::string_view naive = rest.substr(0, rest.find_first_of("/?#"));
  const bool colon = naive.find(':') != std::string_view::npos && naive.front() != '[';  // not an IPv6 literal
  return colon ? at : std::string_view::npos;
}

}  // namespace

bool is_url(std::string_view text) noexcept {
  return starts_with(text, "http://") || starts_with(text, "https://") || starts_with(text, "s3://");
}

std::string display_url(std::string_view url) {
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return std::string(url.substr(0, url.find_first_of("?#")));
  std::string_view rest = url.substr(scheme_end + 3);
  if (const auto at = user_info_end(rest); at != std::string_view::npos) rest = rest.substr(at + 1);
  rest = rest.substr(0, rest.find_first_of("?#"));
  return std::string(url.substr(0, scheme_end + 3)) + std::string(rest);
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
