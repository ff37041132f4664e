#include "oci/reference.h"

#include <algorithm>

namespace sprout::oci {

namespace {

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// ValidComponent checks one path component: lower-case alphanumerics joined by
// separators ('.', '_', '__', one or more '-'), as the distribution grammar says.
bool ValidComponent(std::string_view c) {
  if (c.empty() || !IsLowerAlnum(c.front()) || !IsLowerAlnum(c.back())) return false;
  for (std::size_t i = 0; i < c.size(); ++i) {
    char ch = c[i];
    if (IsLowerAlnum(ch)) continue;
    if (ch == '.' || ch == '-') {
      if (ch == '.' && !IsLowerAlnum(c[i + 1])) return false;
      continue;
    }
    if (ch == '_') {
      if (i + 1 < c.size() && c[i + 1] == '_') ++i;
      if (!IsLowerAlnum(c[i + 1])) return false;
      continue;
    }
    return false;
  }
  return true;
}

bool ValidTag(std::string_view t) {
  if (t.empty() || t.size() > 128) return false;
  auto ok = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
  };
  if (t.front() == '.' || t.front() == '-') return false;
  return std::all_of(t.begin(), t.end(), ok);
}

bool ValidRegistry(std::string_view r) {
  if (r.empty()) return false;
  auto ok = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
           c == ':' || c == '[' || c == ']';
  };
  return std::all_of(r.begin(), r.end(), ok);
}

}  // namespace

bool IsSha256Digest(std::string_view s) {
  if (!s.starts_with("sha256:") || s.size() != 7 + 64) return false;
  return std::all_of(s.begin() + 7, s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string Reference::String() const {
  std::string s = registry + "/" + repository;
  if (!tag.empty()) s += ":" + tag;
  if (!digest.empty()) s += "@" + digest;
  return s;
}

Result<Reference> ParseReference(std::string_view text) {
  const std::string quoted = "image reference '" + std::string(text) + "'";
  if (text.empty()) return Fail("an image reference is empty; write it as registry/repository:tag or @sha256:…");
  Reference r;
  std::string_view rest = text;
  if (auto at = rest.find('@'); at != std::string_view::npos) {
    r.digest = std::string(rest.substr(at + 1));
    rest = rest.substr(0, at);
    if (!IsSha256Digest(r.digest)) {
      return Fail(quoted + ": the digest must be sha256: followed by 64 lower-case hex digits");
    }
  }
  // The tag is after the last ':' that comes after the last '/' (a ':' before it is a port).
  auto slash = rest.rfind('/');
  auto colon = rest.rfind(':');
  if (colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash)) {
    r.tag = std::string(rest.substr(colon + 1));
    rest = rest.substr(0, colon);
    if (!ValidTag(r.tag)) {
      return Fail(quoted + ": tag '" + r.tag + "' is not valid (letters, digits, '_', '.', '-'; at most 128)");
    }
  }
  std::string_view name = rest;
  auto first_slash = name.find('/');
  if (first_slash != std::string_view::npos) {
    std::string_view first = name.substr(0, first_slash);
    if (first.find('.') != std::string_view::npos || first.find(':') != std::string_view::npos ||
        first == "localhost" || std::any_of(first.begin(), first.end(), [](char c) { return c >= 'A' && c <= 'Z'; })) {
      r.registry = std::string(first);
      name = name.substr(first_slash + 1);
      if (!ValidRegistry(r.registry)) return Fail(quoted + ": registry '" + r.registry + "' is not a host[:port]");
    }
  }
  if (r.registry.empty()) {
    return Fail(quoted + " names no registry; write it in full, such as registry.example:5000/" + std::string(name) +
                " (images built by sprout's recipes are localhost/NAME)");
  }
  r.repository = std::string(name);
  if (name.empty()) return Fail(quoted + ": the repository name is missing");
  std::size_t start = 0;
  while (start <= name.size()) {
    auto end = name.find('/', start);
    if (end == std::string_view::npos) end = name.size();
    if (!ValidComponent(name.substr(start, end - start))) {
      return Fail(quoted + ": repository component '" + std::string(name.substr(start, end - start)) +
                  "' must be lower-case letters and digits, joined by '.', '_' or '-'");
    }
    start = end + 1;
  }
  if (r.tag.empty() && r.digest.empty()) r.tag = "latest";
  return r;
}

}  // namespace sprout::oci
