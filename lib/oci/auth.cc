#include "oci/auth.h"

#include <openssl/evp.h>

#include <cctype>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "util/fs.h"
#include "util/text.h"

namespace sprout::oci {

namespace fs = std::filesystem;

std::optional<std::string> Base64Decode(std::string_view in) {
  std::string s(Trim(in));
  if (s.size() % 4 != 0) return std::nullopt;
  if (s.empty()) return std::string();
  std::string out(s.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(s.data()), static_cast<int>(s.size()));
  if (n < 0) return std::nullopt;
  std::size_t pad = 0;
  if (s.ends_with("==")) {
    pad = 2;
  } else if (s.ends_with("=")) {
    pad = 1;
  }
  out.resize(static_cast<std::size_t>(n) - pad);
  return out;
}

namespace {

// HostOf reduces a config.json key to host[:port].
std::string HostOf(std::string key) {
  for (const char* scheme : {"https://", "http://"}) {
    if (key.starts_with(scheme)) key = key.substr(std::string_view(scheme).size());
  }
  if (auto slash = key.find('/'); slash != std::string::npos) key = key.substr(0, slash);
  return key;
}

}  // namespace

Result<std::optional<Credentials>> CredentialsFromConfig(std::string_view json_text, const std::string& registry,
                                                         const std::string& origin) {
  auto j = nlohmann::json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Fail(origin + " is not a JSON object like a docker config.json");
  auto auths = j.find("auths");
  if (auths == j.end()) return std::optional<Credentials>{};
  if (!auths->is_object()) return Fail(origin + ": 'auths' is not an object");
  for (const auto& [key, entry] : auths->items()) {
    if (HostOf(key) != registry || !entry.is_object()) continue;
    Credentials c;
    c.origin = origin;
    if (auto a = entry.find("auth"); a != entry.end() && a->is_string() && !a->get<std::string>().empty()) {
      auto decoded = Base64Decode(a->get<std::string>());
      if (!decoded || decoded->find(':') == std::string::npos) {
        return Fail(origin + ": auths." + key + ".auth is not base64 of user:password");
      }
      auto colon = decoded->find(':');
      c.username = decoded->substr(0, colon);
      c.password = decoded->substr(colon + 1);
      return std::optional<Credentials>(c);
    }
    auto u = entry.find("username");
    auto p = entry.find("password");
    if (u != entry.end() && p != entry.end() && u->is_string() && p->is_string()) {
      c.username = u->get<std::string>();
      c.password = p->get<std::string>();
      return std::optional<Credentials>(c);
    }
  }
  return std::optional<Credentials>{};
}

Result<std::optional<Credentials>> FindCredentials(const std::string& registry, const fs::path& profile_file) {
  auto from_file = [&](const fs::path& f, bool must_exist) -> Result<std::optional<Credentials>> {
    std::error_code ec;
    if (!fs::is_regular_file(f, ec)) {
      if (must_exist) return Fail("the credentials file " + f.string() + " does not exist");
      return std::optional<Credentials>{};
    }
    auto text = ReadFile(f);
    if (!text) return Fail(text.error());
    return CredentialsFromConfig(*text, registry, f.string());
  };
  if (!profile_file.empty()) {
    auto c = from_file(profile_file, true);
    if (!c || c->has_value()) return c;
  }
  const char* user = std::getenv("SPROUT_REGISTRY_USERNAME");
  const char* pass = std::getenv("SPROUT_REGISTRY_PASSWORD");
  if (user && *user && pass) {
    return std::optional<Credentials>(Credentials{user, pass, "SPROUT_REGISTRY_USERNAME/SPROUT_REGISTRY_PASSWORD"});
  }
  std::vector<fs::path> files;
  if (const char* f = std::getenv("REGISTRY_AUTH_FILE"); f && *f) files.emplace_back(f);
  if (const char* d = std::getenv("DOCKER_CONFIG"); d && *d) files.push_back(fs::path(d) / "config.json");
  if (const char* h = std::getenv("HOME"); h && *h) files.push_back(fs::path(h) / ".docker" / "config.json");
  for (const auto& f : files) {
    auto c = from_file(f, false);
    if (!c || c->has_value()) return c;
  }
  return std::optional<Credentials>{};
}

std::optional<Challenge> ParseChallenge(std::string_view header) {
  std::string_view h = Trim(header);
  auto sp = h.find(' ');
  Challenge c;
  std::string_view scheme = h.substr(0, sp);
  for (char ch : scheme) c.scheme += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (c.scheme.empty()) return std::nullopt;
  if (sp == std::string_view::npos) return c;
  std::string_view rest = h.substr(sp + 1);
  std::size_t i = 0;
  while (i < rest.size()) {
    while (i < rest.size() && (rest[i] == ' ' || rest[i] == ',')) ++i;
    auto eq = rest.find('=', i);
    if (eq == std::string_view::npos) break;
    std::string key(Trim(rest.substr(i, eq - i)));
    for (auto& ch : key) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    i = eq + 1;
    std::string value;
    if (i < rest.size() && rest[i] == '"') {
      ++i;
      while (i < rest.size() && rest[i] != '"') {
        if (rest[i] == '\\' && i + 1 < rest.size()) ++i;
        value += rest[i++];
      }
      if (i >= rest.size()) return std::nullopt;  // unterminated quote
      ++i;
    } else {
      auto end = rest.find(',', i);
      if (end == std::string_view::npos) end = rest.size();
      value = std::string(Trim(rest.substr(i, end - i)));
      i = end;
    }
    c.params[key] = value;
  }
  return c;
}

}  // namespace sprout::oci
