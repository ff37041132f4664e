// Registry credentials and authentication challenges.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "util/result.h"

namespace sprout::oci {

// Credentials are a user name and password (or token) for one registry.
struct Credentials {
  std::string username;
  std::string password;
  std::string origin;  // where they came from, for error messages (never the secret)
};

// CredentialsFromConfig finds registry's entry in a docker-style config.json text:
// auths.<registry>.auth (base64 "user:password") or .username/.password. Keys may be
// written as the bare host[:port] or as https://host[:port][/v1/|/v2/].
Result<std::optional<Credentials>> CredentialsFromConfig(std::string_view json_text, const std::string& registry,
                                                         const std::string& origin);

// FindCredentials looks in order at: the file the profile names (if any), the
// environment (SPROUT_REGISTRY_USERNAME and SPROUT_REGISTRY_PASSWORD), $REGISTRY_AUTH_FILE,
// $DOCKER_CONFIG/config.json and ~/.docker/config.json. No credentials is not an error.
Result<std::optional<Credentials>> FindCredentials(const std::string& registry,
                                                   const std::filesystem::path& profile_file);

// Challenge is a parsed WWW-Authenticate header.
struct Challenge {
  std::string scheme;  // lower-case: "bearer" or "basic"
  std::map<std::string, std::string> params;
};

// ParseChallenge reads `Bearer realm="…",service="…",scope="…"` (quoted or token values).
std::optional<Challenge> ParseChallenge(std::string_view header);

// Base64Decode decodes standard base64; nullopt if it is not valid.
std::optional<std::string> Base64Decode(std::string_view in);

}  // namespace sprout::oci
