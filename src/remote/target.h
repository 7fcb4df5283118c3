// target.h - where the requests for one URL go and how they are signed (internal).
#pragma once

#include <string>

namespace maploc::remote {

/// The request URL and its signing, resolved once from the URL given (s3:// becomes https://).
struct Target {
  std::string url;            ///< what curl requests
  std::string display;        ///< what messages name (display_url of the URL given)
  std::string sigv4;          ///< CURLOPT_AWS_SIGV4, e.g. "aws:amz:us-east-1:s3"; empty: unsigned
  std::string access_key;     ///< SigV4 user name; never printed
  std::string secret_key;     ///< SigV4 password; never printed
  std::string session_token;  ///< sent as x-amz-security-token; never printed
};

/// Resolves http(s) and s3 URLs. Raises kRemoteBadUrl.
Target resolve_target(const std::string& url);

}  // namespace maploc::remote
