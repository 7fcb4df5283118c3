// redirect.h - which redirects a request follows, and how (internal): secrets stay with their origin.
#pragma once

#include <string>

namespace maploc::remote {

/// What to do with one redirect, decided before any request goes to where it points.
struct RedirectVerdict {
  bool follow = false;
  std::string url;      ///< follow: the URL to request next (user information dropped when it leaves the origin)
  std::string refusal;  ///< !follow: why, naming where it pointed as scheme://host[:port] only
};

/// The redirect of a request for `from` to `to` (absolute, as curl resolves a Location).
/// `signed_request`: the request carries a SigV4 signature or a session token (s3).
/// Refused: a scheme other than http/https, https to plain http, a URL that cannot be parsed, and
/// for a signed request any other origin (scheme, host or port). Followed otherwise; a hop to
/// another origin drops the user information of the URL, so no credential crosses origins.
RedirectVerdict judge_redirect(const std::string& from, const std::string& to, bool signed_request);

}  // namespace maploc::remote
