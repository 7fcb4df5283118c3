// url_test.cpp - which texts are URLs, how messages show them, the present-range set, where s3://
// requests go and how they are signed (the environment, ~/.aws/credentials and ~/.aws/config).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "intervals.h"
#include "maploc/error.h"
#include "maploc/remote/object.h"
#include "redirect.h"
#include "target.h"

using namespace maploc;

TEST_CASE("is_url accepts http, https and s3 only", "[remote]") {
  CHECK(remote::is_url("http://example.com/a.pt"));
  CHECK(remote::is_url("https://example.com/a.pt"));
  CHECK(remote::is_url("s3://bucket/key.pt"));
  CHECK_FALSE(remote::is_url("/tmp/http://x"));
  CHECK_FALSE(remote::is_url("ftp://example.com/a.pt"));
  CHECK_FALSE(remote::is_url("model.pt"));
}

TEST_CASE("display_url drops user information, query and fragment", "[remote]") {
  CHECK(remote::display_url("https://user:secret@host:8443/a/b.pt?X-Amz-Signature=abc#f") == "https://host:8443/a/b.pt");
  CHECK(remote::display_url("http://host/a.pt") == "http://host/a.pt");
  CHECK(remote::display_url("s3://bucket/dir/key.pt") == "s3://bucket/dir/key.pt");
  CHECK(remote::display_url("https://tok@host") == "https://host");
}

TEST_CASE("display_url never shows user information, whatever raw characters it holds", "[remote]") {
  // A password (or a token as user name) typed raw with '#', '?', '/' or '@': none of it is shown.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"https://user:pa#ss@host/a.pt", "https://host/a.pt"},
      {"https://user:pa?ss@host:8443/a.pt?q=1", "https://host:8443/a.pt"},
      {"https://user:pa/ss@host/a.pt", "https://host/a.pt"},
      {"https://user:p@ss/w@host/a.pt", "https://host/a.pt"},
      {"https://user:p#s?s/w@host/d/a.pt#frag", "https://host/d/a.pt"},
      {"https://ab/cd+ef=@host/a.pt", "https://host/a.pt"},
      {"http://user:pa#ss@127.0.0.1:9/x", "http://127.0.0.1:9/x"},
      {"https://user:1234#ss@host/a.pt", "https://host/a.pt"},
  };
  for (const auto& [url, shown] : cases) {
    INFO(url);
    const std::string got = remote::display_url(url);
    CHECK(got == shown);
    for (const char* part : {"user", "pa", "ss", "ab", "cd", "ef", "1234", "frag"}) CHECK(got.find(part) == std::string::npos);
  }
  // Without user information, an '@' in the query is the query's (cut), not an end of user information.
  CHECK(remote::display_url("https://host/a.pt?who=a@b.example") == "https://host/a.pt");
  CHECK(remote::display_url("https://[::1]:8443/a.pt?who=a@b.example") == "https://[::1]:8443/a.pt");
  CHECK(remote::display_url("https://host/a.pt#x@y") == "https://host/a.pt");
}

TEST_CASE("judge_redirect: https never to http, signed requests stay with their origin, no credential leaves it", "[remote]") {
  auto refusal = [](const std::string& from, const std::string& to, bool signed_request) {
    const auto v = remote::judge_redirect(from, to, signed_request);
    CHECK_FALSE(v.follow);
    for (const char* hidden : {"u:p", "pw", "sig=", "/y"}) CHECK(v.refusal.find(hidden) == std::string::npos);
    return v.refusal;
  };
  // https to plain http: refused, signed or not, to the same host or another; where it pointed is named.
  CHECK(refusal("https://a.example/x", "http://u:pw@b.example:8080/y?sig=1", false).find("to http://b.example:8080 ") !=
        std::string::npos);
  CHECK(refusal("https://a.example/x", "http://a.example/y", false).find("plain http") != std::string::npos);
  CHECK(refusal("https://a.example/x", "http://a.example/y", true).find("plain http") != std::string::npos);
  // Another scheme than http(s).
  CHECK(refusal("http://a.example/x", "ftp://u:pw@a.example/y", false).find("to ftp://a.example ") != std::string::npos);
  // Signed: another port, host, host name or scheme is another origin.
  for (const char* to : {"https://a.example:8443/y?sig=1", "https://b.example/y"}) {
    INFO(to);
    CHECK(refusal("https://a.example/x", to, true).find("another origin") != std::string::npos);
  }
  CHECK(refusal("http://a.example/x", "https://a.example/y", true).find("another origin") != std::string::npos);
  CHECK(refusal("http://127.0.0.1:9000/x", "http://localhost:9000/y", true).find("to http://localhost:9000 ") !=
        std::string::npos);
  // Signed, same origin (case and a written default port aside): followed as given.
  auto followed = [](const std::string& from, const std::string& to, bool signed_request) {
    const auto v = remote::judge_redirect(from, to, signed_request);
    CHECK(v.follow);
    return v.url;
  };
  CHECK(followed("https://A.example/x", "https://a.example:443/y?z=1", true) == "https://a.example:443/y?z=1");
  CHECK(followed("http://127.0.0.1:9000/x", "http://127.0.0.1:9000/y", true) == "http://127.0.0.1:9000/y");
  // Unsigned: another origin (a CDN) is followed, without user information; http to https too.
  CHECK(followed("https://a.example/x", "https://u:pw@cdn.example/y?sig=1", false) == "https://cdn.example/y?sig=1");
  CHECK(followed("http://u:pw@a.example/x", "https://a.example/y", false) == "https://a.example/y");
  // The same origin keeps the user information curl resolved the Location with.
  CHECK(followed("http://u:pw@a.example/x", "http://u:pw@a.example/y", false) == "http://u:pw@a.example/y");
  // Nothing parseable: refused, showing nothing of it.
  CHECK(refusal("http://a.example/x", "http://[zz/u:pw", false).find("cannot parse") != std::string::npos);
}

TEST_CASE("the present-range set merges and reports what is missing", "[remote]") {
  remote::Intervals s;
  s.add(10, 20);
  s.add(30, 40);
  auto m = s.missing(0, 50);
  REQUIRE(m.size() == 3);
  CHECK((m[0].offset == 0 && m[0].length == 10));
  CHECK((m[1].offset == 20 && m[1].length == 10));
  CHECK((m[2].offset == 40 && m[2].length == 10));
  CHECK(s.missing(12, 18).empty());
  s.add(20, 30);
  CHECK(s.covers(10, 40));
  CHECK(s.missing(5, 45).size() == 2);
  s.add(0, 100);
  CHECK(s.covers(0, 100));
}

TEST_CASE("URLs maploc does not read are kRemoteBadUrl", "[remote]") {
  auto code_of = [](const std::string& url) {
    try {
      (void)remote::Object::open(url);
    } catch (const Error& e) {
      return std::string(error_code_name(e.code()));
    }
    return std::string("no error");
  };
  CHECK(code_of("s3://bucket-only") == "kRemoteBadUrl");
  CHECK(code_of("ftp://example.com/a.pt") == "kRemoteBadUrl");
}

namespace {

// Sets the AWS variables of one test (the rest unset) and restores every one afterwards; writes the
// shared files it is given into a temporary directory named by AWS_CONFIG_FILE and
// AWS_SHARED_CREDENTIALS_FILE.
class AwsFiles {
 public:
  AwsFiles(const std::string& config, const std::string& credentials) {
    for (const char* n : kNames) {
      const char* v = std::getenv(n);
      saved_.emplace_back(n, v == nullptr ? std::nullopt : std::optional<std::string>(v));
      ::unsetenv(n);
    }
    dir_ = std::filesystem::temp_directory_path() / ("maploc-aws-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "config") << config;
    std::ofstream(dir_ / "credentials") << credentials;
    ::setenv("AWS_CONFIG_FILE", (dir_ / "config").c_str(), 1);
    ::setenv("AWS_SHARED_CREDENTIALS_FILE", (dir_ / "credentials").c_str(), 1);
  }
  ~AwsFiles() {
    std::filesystem::remove_all(dir_);
    for (const auto& [n, v] : saved_) {
      if (v) ::setenv(n, v->c_str(), 1);
      else ::unsetenv(n);
    }
  }
  std::string config() const { return (dir_ / "config").string(); }

 private:
  static constexpr const char* kNames[] = {
      "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID",
      "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"};
  std::filesystem::path dir_;
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

// The code and message resolving `url` raises (both empty when it raises nothing).
std::pair<std::string, std::string> resolve_error(const std::string& url) {
  try {
    (void)remote::resolve_target(url);
  } catch (const Error& e) {
    return {std::string(error_code_name(e.code())), e.what()};
  }
  return {};
}

const char* const kConfig =
    "# comment\n"
    "[default]\n"
    "region = eu-north-1\n"
    "\n"
    "[profile keys]\n"
    "region=ap-south-2\n"
    "aws_access_key_id = AKIDCONFIG\n"
    "aws_secret_access_key = configSECRET\n"
    "aws_session_token = configTOKEN\n"
    "s3 =\n"
    "  endpoint_url = http://nested.invalid:1\n"
    "  addressing_style = path\n"
    "\n"
    "[profile both]\n"
    "aws_access_key_id = AKIDCONFIG\n"
    "aws_secret_access_key = configSECRET\n"
    "\n"
    "[profile minio]\n"
    "region = us-west-2\n"
    "endpoint_url = http://127.0.0.1:9000/\n"
    "aws_access_key_id = AKIDMINIO\n"
    "aws_secret_access_key = minioSECRET\n"
    "\n"
    "[profile role]\n"
    "role_arn = arn:aws:iam::123456789012:role/reader\n"
    "source_profile = default\n"
    "\n"
    "[profile sso]\n"
    "sso_session = corp\n"
    "sso_account_id = 123456789012\n"
    "sso_role_name = reader\n"
    "\n"
    "[profile half]\n"
    "aws_access_key_id = AKIDHALF\n"
    "\n"
    "[profile proc]\n"
    "credential_process = /usr/local/bin/get-credentials\n"
    "\n"
    "[profile rolekeys]\n"
    "role_arn = arn:aws:iam::123456789012:role/reader\n"
    "credential_source = Environment\n";

const char* const kCredentials =
    "[both]\n"
    "aws_access_key_id = AKIDCREDS\n"
    "aws_secret_access_key = credsSECRET\n"
    "\n"
    "[rolekeys]\n"  // a role in the config file comes first, as in the AWS CLI
    "aws_access_key_id = AKIDROLEKEYS\n"
    "aws_secret_access_key = rolekeysSECRET\n";

}  // namespace

TEST_CASE("s3: the region and endpoint come from the environment, else the config file's profile", "[remote]") {
  AwsFiles files(kConfig, kCredentials);
  auto t = remote::resolve_target("s3://bucket/a/b c.pt");
  CHECK(t.url == "https://bucket.s3.eu-north-1.amazonaws.com/a/b%20c.pt");  // [default]
  CHECK(t.sigv4.empty());                                                    // no keys anywhere: unsigned
  ::setenv("AWS_PROFILE", "keys", 1);
  t = remote::resolve_target("s3://bucket/k.pt");
  CHECK(t.url == "https://bucket.s3.ap-south-2.amazonaws.com/k.pt");  // not the nested s3 endpoint_url
  CHECK(t.sigv4 == "aws:amz:ap-south-2:s3");
  ::setenv("AWS_DEFAULT_REGION", "sa-east-1", 1);
  CHECK(remote::resolve_target("s3://bucket/k.pt").sigv4 == "aws:amz:sa-east-1:s3");
  ::setenv("AWS_REGION", "ca-central-1", 1);
  CHECK(remote::resolve_target("s3://bucket/k.pt").sigv4 == "aws:amz:ca-central-1:s3");
  ::unsetenv("AWS_REGION");
  ::unsetenv("AWS_DEFAULT_REGION");
  ::setenv("AWS_PROFILE", "minio", 1);
  t = remote::resolve_target("s3://bucket/k.pt");
  CHECK(t.url == "http://127.0.0.1:9000/bucket/k.pt");  // the profile's endpoint_url, path-style
  CHECK(t.sigv4 == "aws:amz:us-west-2:s3");
  ::setenv("AWS_ENDPOINT_URL", "http://127.0.0.2:9001", 1);
  CHECK(remote::resolve_target("s3://bucket/k.pt").url == "http://127.0.0.2:9001/bucket/k.pt");
}

TEST_CASE("s3: static keys come from the credentials file's profile, else the config file's", "[remote]") {
  AwsFiles files(kConfig, kCredentials);
  ::setenv("AWS_PROFILE", "keys", 1);
  auto t = remote::resolve_target("s3://bucket/k.pt");
  CHECK(t.access_key == "AKIDCONFIG");
  CHECK(t.secret_key == "configSECRET");
  CHECK(t.session_token == "configTOKEN");
  ::setenv("AWS_PROFILE", "both", 1);  // in both files: the credentials file's
  t = remote::resolve_target("s3://bucket/k.pt");
  CHECK(t.access_key == "AKIDCREDS");
  CHECK(t.secret_key == "credsSECRET");
  CHECK(t.session_token.empty());
  ::setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);  // the environment's before either file
  ::setenv("AWS_SECRET_ACCESS_KEY", "envSECRET", 1);
  t = remote::resolve_target("s3://bucket/k.pt");
  CHECK(t.access_key == "AKIDENV");
  CHECK(t.secret_key == "envSECRET");
}

TEST_CASE("s3: profiles without static keys are kRemoteBadUrl saying what to export", "[remote]") {
  AwsFiles files(kConfig, kCredentials);
  for (const auto& [profile, how] : std::vector<std::pair<std::string, std::string>>{
           {"role", "role_arn"}, {"sso", "sso_"}, {"proc", "credential_process"}, {"rolekeys", "role_arn"}}) {
    INFO(profile);
    ::setenv("AWS_PROFILE", profile.c_str(), 1);
    const auto [code, what] = resolve_error("s3://bucket/k.pt");
    CHECK(code == "kRemoteBadUrl");
    CHECK(what.find("s3://bucket/k.pt") != std::string::npos);
    CHECK(what.find("profile '" + profile + "'") != std::string::npos);
    CHECK(what.find(files.config()) != std::string::npos);
    CHECK(what.find(how) != std::string::npos);
    CHECK(what.find("static keys only") != std::string::npos);
    CHECK(what.find("AWS_ACCESS_KEY_ID") != std::string::npos);
    CHECK(what.find("AWS_CONFIG_FILE=/dev/null") != std::string::npos);  // what a public bucket needs
  }
  // Exported keys are used, the role profile notwithstanding.
  ::setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "envSECRET", 1);
  CHECK(remote::resolve_target("s3://bucket/k.pt").access_key == "AKIDENV");
  ::unsetenv("AWS_ACCESS_KEY_ID");
  ::unsetenv("AWS_SECRET_ACCESS_KEY");
  // Half a key pair, and a profile in neither file.
  ::setenv("AWS_PROFILE", "half", 1);
  auto [code, what] = resolve_error("s3://bucket/k.pt");
  CHECK(code == "kRemoteBadUrl");
  CHECK(what.find("profile 'half'") != std::string::npos);
  CHECK(what.find("AKIDHALF") == std::string::npos);
  ::setenv("AWS_PROFILE", "nowhere", 1);
  std::tie(code, what) = resolve_error("s3://bucket/k.pt");
  CHECK(code == "kRemoteBadUrl");
  CHECK(what.find("profile 'nowhere'") != std::string::npos);
  // No secret of any profile in any message.
  for (const char* p : {"role", "sso", "proc", "rolekeys", "half", "nowhere"}) {
    ::setenv("AWS_PROFILE", p, 1);
    const auto message = resolve_error("s3://bucket/k.pt").second;
    for (const char* secret : {"configSECRET", "credsSECRET", "minioSECRET", "configTOKEN", "rolekeysSECRET"}) {
      CHECK(message.find(secret) == std::string::npos);
    }
  }
}
