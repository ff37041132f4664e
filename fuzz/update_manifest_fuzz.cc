// libFuzzer target for what `sprout-firstboot update apply` reads of a build before it
// knows who made it: manifest.json (ParseBuild, which reads its identity, data map and
// outputs) and an image.json's identity (ReadIdentity, for the running build's record on
// the ESP, which anyone with the disk can write). Neither may crash, hang or read out of
// bounds, and an identity read twice is the same. Seeds: fuzz/corpus/update_manifest_fuzz/.
#include <cstddef>
#include <cstdint>
#include <string>

#include "update/build.h"
#include "update/identity.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string digest(64, '0');
  (void)sprout::update::ParseBuild("fuzz", text, digest, digest + "  manifest.json\n");
  auto a = sprout::update::ReadIdentity(text, "fuzz");
  auto b = sprout::update::ReadIdentity(text, "fuzz");
  if (static_cast<bool>(a) != static_cast<bool>(b)) __builtin_trap();
  if (a && (a->serial != b->serial || a->profile != b->profile || a->role != b->role || a->cluster != b->cluster))
    __builtin_trap();
  if (a) {
    (void)sprout::update::CheckIdentityRules(*a, *b, false, false);
  }
  return 0;
}
