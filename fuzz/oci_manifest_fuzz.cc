// libFuzzer target: the manifest and index parser (every manifest and index sprout
// reads comes from a registry or an archive it does not control), platform selection
// on what it returns, and the reference and WWW-Authenticate parsers.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "oci/auth.h"
#include "oci/manifest.h"
#include "oci/reference.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto m = sprout::oci::ParseManifest(in);
  if (m.ok()) {
    for (const auto& d : m->layers) {
      // A parsed digest is always safe to use as a file name.
      if (!sprout::oci::IsSha256Digest(d.digest) || d.size < 0) __builtin_trap();
    }
    if (m->is_index) (void)sprout::oci::SelectPlatform(*m, {"linux", "arm64", ""});
  }
  (void)sprout::oci::ParseManifest(in, sprout::oci::kDockerList);
  if (size < 512) {
    (void)sprout::oci::ParseReference(in);
    (void)sprout::oci::ParseChallenge(in);
  }
  return 0;
}
