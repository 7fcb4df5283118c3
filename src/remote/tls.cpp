// tls.cpp - which CA file https trusts: the option, else the environment variables users set.
#include <cstdlib>

#include "http.h"

namespace maploc::remote {

CaFile ca_file_of(const std::string& option, bool s3) {
  if (!option.empty()) return {option, "Options::ca_file (--ca-file)"};
  // AWS_CA_BUNDLE is the AWS CLI's and SDKs' and concerns s3 only; CURL_CA_BUNDLE before
  // SSL_CERT_FILE as the curl tool reads them (SSL_CERT_FILE is OpenSSL's, the most general).
  const char* const names[] = {s3 ? "AWS_CA_BUNDLE" : nullptr, "CURL_CA_BUNDLE", "SSL_CERT_FILE"};
  for (const char* name : names) {
    if (name == nullptr) continue;
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') return {v, std::string("$") + name};
  }
  return {};
}

}  // namespace maploc::remote
