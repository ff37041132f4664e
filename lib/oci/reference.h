// Image references: "[registry[:port]/]repository[:tag][@sha256:HEX]".
#pragma once

#include <string>
#include <string_view>

#include "util/result.h"

namespace sprout::oci {

// Reference is a parsed image reference. A reference always has a tag or a digest;
// a bare name gets the tag "latest". sprout has no default registry: an air-gapped
// build must say where each image comes from, so the registry component is required
// (images built locally use "localhost/...", as podman names them).
struct Reference {
  std::string registry;    // host[:port]
  std::string repository;  // path, e.g. "library/etcd"
  std::string tag;         // empty if only a digest was given
  std::string digest;      // "sha256:HEX", empty if only a tag was given

  // String renders the reference in full: registry/repository[:tag][@digest].
  std::string String() const;
};

// ParseReference reads text; the error names the text and what is wrong with it.
Result<Reference> ParseReference(std::string_view text);

// IsSha256Digest says whether s is "sha256:" followed by 64 lower-case hex digits.
bool IsSha256Digest(std::string_view s);

}  // namespace sprout::oci
