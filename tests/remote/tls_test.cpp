// tls_test.cpp - a private CA (issue 37, point 6; docs/remote.md, "TLS"): which CA file https
// trusts (Options::ca_file, $AWS_CA_BUNDLE for s3://, $CURL_CA_BUNDLE, $SSL_CERT_FILE), and an https
// loopback server whose certificate a CA made at test time (openssl) signed: refused without the
// CA, read with it from the option, each variable and the CLI's --ca-file.
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "maploc/error.h"
#include "maploc/remote/object.h"
#include "http.h"
#include "remote/remote_checks.h"
#include "run_shell.h"

using namespace maploc;

namespace {

const char* const kCaVariables[] = {"AWS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE"};

// Sets the CA variables for one scope (nullptr: unset), restoring what was there.
class CaEnvironment {
 public:
  CaEnvironment(const char* aws, const char* curl, const char* ssl) {
    const char* values[] = {aws, curl, ssl};
    for (int i = 0; i < 3; ++i) {
      const char* old = std::getenv(kCaVariables[i]);
      saved_[i] = old != nullptr ? old : "";
      had_[i] = old != nullptr;
      if (values[i] != nullptr) {
        ::setenv(kCaVariables[i], values[i], 1);
      } else {
        ::unsetenv(kCaVariables[i]);
      }
    }
  }
  ~CaEnvironment() {
    for (int i = 0; i < 3; ++i) {
      if (had_[i]) {
        ::setenv(kCaVariables[i], saved_[i].c_str(), 1);
      } else {
        ::unsetenv(kCaVariables[i]);
      }
    }
  }

 private:
  std::string saved_[3];
  bool had_[3] = {};
};

// A CA and a certificate for 127.0.0.1 it signed, made with the openssl CLI in a temporary directory.
struct Pki {
  std::string dir, ca, cert, key;
  Pki() {
    // Under the system's temporary directory ($TMPDIR or its default), not a fixed path.
    std::string tmpl = (std::filesystem::temp_directory_path() / "maploc-tls-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    dir = tmpl;
    ca = dir + "/ca.pem";
    cert = dir + "/server.pem";
    key = dir + "/server.key";
    const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes ";
    const std::string d = "'" + dir + "'";
    const auto r = test::run_shell(
        "(cd " + d + " && printf 'subjectAltName=IP:127.0.0.1\\n' > ext.cnf && openssl req -x509" + ec +
        "-keyout ca.key -out ca.pem -days 2 -subj /CN=maploc-test-ca && openssl req" + ec +
        "-keyout server.key -out server.csr -subj /CN=127.0.0.1 && openssl x509 -req -in server.csr -CA ca.pem "
        "-CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile ext.cnf) 2>&1");
    INFO(r.out);
    REQUIRE(r.exit_code == 0);
  }
  ~Pki() {  // at exit, after Catch is gone: no assertion here
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
};

Pki& pki() {
  static Pki p;
  return p;
}

test::LoopbackServer& tls_server() {
  static test::LoopbackServer s(test::kFixtures, {"TEST_TLS_CERT=" + pki().cert, "TEST_TLS_KEY=" + pki().key});
  return s;
}

const std::string kFile = "checkpoints/dtypes.t2x.pt";

std::string https_url() { return "https://127.0.0.1:" + std::to_string(tls_server().port()) + "/ok/" + kFile; }

std::uint64_t local_size() {
  std::ifstream f(test::kFixtures + "/" + kFile, std::ios::binary | std::ios::ate);
  return static_cast<std::uint64_t>(f.tellg());
}

remote::Options quick() {
  remote::Options o;
  o.retries = 0;
  return o;
}

}  // namespace

TEST_CASE("the CA file: the option, else AWS_CA_BUNDLE for s3, else CURL_CA_BUNDLE, else SSL_CERT_FILE", "[remote][tls]") {
  {
    CaEnvironment env("/aws.pem", "/curl.pem", "/ssl.pem");
    CHECK(remote::ca_file_of("/option.pem", true).path == "/option.pem");
    CHECK(remote::ca_file_of("/option.pem", false).path == "/option.pem");
    CHECK(remote::ca_file_of("", true).path == "/aws.pem");
    CHECK(remote::ca_file_of("", true).from == "$AWS_CA_BUNDLE");
    CHECK(remote::ca_file_of("", false).path == "/curl.pem");  // AWS_CA_BUNDLE is for s3:// only
  }
  {
    CaEnvironment env("/aws.pem", nullptr, "/ssl.pem");
    CHECK(remote::ca_file_of("", false).path == "/ssl.pem");
    CHECK(remote::ca_file_of("", false).from == "$SSL_CERT_FILE");
  }
  {
    CaEnvironment env(nullptr, "", "/ssl.pem");  // an empty variable is skipped
    CHECK(remote::ca_file_of("", true).path == "/ssl.pem");
  }
  {
    CaEnvironment env(nullptr, nullptr, nullptr);
    CHECK(remote::ca_file_of("", true).path.empty());
  }
}

TEST_CASE("https with a private CA: refused without it, read with it from the environment", "[remote][tls]") {
  {
    CaEnvironment env(nullptr, nullptr, nullptr);
    const auto [code, message] = test::raised([&] { remote::Object::open(https_url(), quick()); });
    INFO(message);
    CHECK(code == "kRemoteRequest");
    CHECK(message.find("127.0.0.1") != std::string::npos);
    CHECK(message.find("the system's CA store") != std::string::npos);
    CHECK(message.find("--ca-file") != std::string::npos);
  }
  {
    CaEnvironment env(nullptr, pki().ca.c_str(), nullptr);
    CHECK(remote::Object::open(https_url(), quick())->size() == local_size());
  }
  {
    CaEnvironment env(nullptr, nullptr, pki().ca.c_str());
    CHECK(remote::Object::open(https_url(), quick())->size() == local_size());
  }
  {
    CaEnvironment env(pki().ca.c_str(), nullptr, nullptr);  // AWS_CA_BUNDLE: not for https://
    CHECK(test::raised([&] { remote::Object::open(https_url(), quick()); }).first == "kRemoteRequest");
  }
}

TEST_CASE("s3:// over https with a private CA: AWS_CA_BUNDLE is read for it", "[remote][tls]") {
  // Path-style on the loopback endpoint: s3://ok/<file> is https://127.0.0.1:<port>/ok/<file>,
  // unsigned (no key anywhere).
  for (const char* v : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"}) ::unsetenv(v);
  ::setenv("AWS_CONFIG_FILE", "/dev/null", 1);
  ::setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null", 1);
  ::setenv("AWS_ENDPOINT_URL", ("https://127.0.0.1:" + std::to_string(tls_server().port())).c_str(), 1);
  const std::string url = "s3://ok/" + kFile;
  {
    CaEnvironment env(nullptr, nullptr, nullptr);
    CHECK(test::raised([&] { remote::Object::open(url, quick()); }).first == "kRemoteRequest");
  }
  {
    CaEnvironment env(pki().ca.c_str(), "/nonexistent/curl.pem", nullptr);  // AWS_CA_BUNDLE first for s3
    CHECK(remote::Object::open(url, quick())->size() == local_size());
  }
  for (const char* v : {"AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_ENDPOINT_URL"}) ::unsetenv(v);
}

TEST_CASE("https with a private CA: Options::ca_file and --ca-file, a missing CA file named", "[remote][tls]") {
  CaEnvironment env(nullptr, nullptr, "/nonexistent/ignored.pem");
  auto o = quick();
  o.ca_file = pki().ca;
  CHECK(remote::Object::open(https_url(), o)->size() == local_size());

  o.ca_file = pki().dir + "/missing.pem";
  const auto [code, message] = test::raised([&] { remote::Object::open(https_url(), o); });
  CHECK(code == "kRemoteBadUrl");
  CHECK(message.find(pki().dir + "/missing.pem") != std::string::npos);
  CHECK(message.find("--ca-file") != std::string::npos);

  // The variable alone names a file that is not there: the error names it and the variable.
  const auto env_missing = test::raised([&] { remote::Object::open(https_url(), quick()); });
  CHECK(env_missing.first == "kRemoteBadUrl");
  CHECK(env_missing.second.find("/nonexistent/ignored.pem") != std::string::npos);
  CHECK(env_missing.second.find("$SSL_CERT_FILE") != std::string::npos);

  const std::string cli = std::string("'") + MAPLOC_CLI + "' ls --json ";
  const auto ok = test::run_shell(cli + "--ca-file '" + pki().ca + "' '" + https_url() + "' 2>&1");
  INFO(ok.out);
  CHECK(ok.exit_code == 0);
  CHECK(ok.out.find("\"tensors\"") != std::string::npos);
  const auto missing = test::run_shell(cli + "--ca-file /nonexistent/ca.pem '" + https_url() + "' 2>&1");
  INFO(missing.out);
  CHECK(missing.exit_code == 3);
  CHECK(missing.out.find("/nonexistent/ca.pem") != std::string::npos);
}

TEST_CASE("proxies from the environment: http_proxy is used, no_proxy bypasses it", "[remote][proxy]") {
  // range_server.py answers absolute-form requests as a forward proxy for itself; the host named
  // cannot be resolved (.invalid), so only a request through the proxy can succeed.
  const std::string url = "http://maploc-proxy-test.invalid/ok/" + kFile;
  const std::string proxy = "http://127.0.0.1:" + std::to_string(test::fixture_server().port());
  for (const char* v : {"no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY"}) ::unsetenv(v);
  ::setenv("http_proxy", proxy.c_str(), 1);
  CHECK(remote::Object::open(url, quick())->size() == local_size());
  ::setenv("no_proxy", "maploc-proxy-test.invalid", 1);
  const auto [code, message] = test::raised([&] { remote::Object::open(url, quick()); });
  CHECK(code == "kRemoteRequest");  // direct: the name does not resolve
  ::unsetenv("no_proxy");
  ::unsetenv("http_proxy");
  CHECK(test::raised([&] { remote::Object::open(url, quick()); }).first == "kRemoteRequest");
}
