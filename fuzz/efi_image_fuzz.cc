// libFuzzer target: the EFI image readers (`sprout inspect FILE.efi` reads any file it is
// given, and a boot loader or UKI on a disk is not trusted until checked): the PE
// headers, a UKI's sections, the Authenticode digest and the signature's PKCS#7, and the
// signed PCR policy (.pcrsig's JSON, .pcrpkey's PEM).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "efi/authenticode.h"
#include "efi/pcr_policy.h"
#include "efi/pe.h"
#include "efi/uki.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string image(reinterpret_cast<const char*>(data), size);
  auto pe = sprout::efi::ParsePe(image, "fuzz");
  if (!pe.ok()) return 0;
  // A parsed image's sections and certificate table lie inside the file.
  for (const auto& s : pe->sections) {
    if (s.raw_size != 0 && std::uint64_t{s.raw_offset} + s.raw_size > size) __builtin_trap();
  }
  if (std::uint64_t{pe->cert_table_offset} + pe->cert_table_size > size) __builtin_trap();
  for (const char* name : {".linux", ".cmdline", ".osrel", ".initrd"}) {
    auto section = sprout::efi::UkiSection(image, name);
    if (section.ok() && section->size() > size) __builtin_trap();
  }
  auto policy = sprout::efi::CheckPcrPolicy(image);
  if (!policy.ok()) __builtin_trap();  // a parsed image is never an error here
  if (policy->ok() && policy->key_fingerprint.size() != 64) __builtin_trap();
  (void)sprout::efi::AuthenticodeDigest(image, "fuzz");
  auto sig = sprout::efi::ReadPeSignature(image, "fuzz");
  if (sig.ok() && !sig->signed_ && pe->cert_table_size != 0) __builtin_trap();
  return 0;
}
