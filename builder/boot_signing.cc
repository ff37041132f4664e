#include "builder/boot_signing.h"

#include "efi/authenticode.h"
#include "efi/pcr_policy.h"
#include "efi/uki.h"
#include "image/arch.h"
#include "util/fs.h"
#include "util/text.h"

namespace sprout::cli {

Result<SecureBootKeys> LoadSecureBootKeys(const std::filesystem::path& key, const std::filesystem::path& cert) {
  if (key.empty() && cert.empty()) return SecureBootKeys{};
  if (key.empty() || cert.empty()) {
    return Fail(
        "--secure-boot-key and --secure-boot-cert go together: give both to sign the image for Secure Boot, or "
        "neither (make a pair with `sprout keygen --secure-boot -o PREFIX`)");
  }
  auto key_pem = ReadFile(key);
  if (!key_pem) return Fail("--secure-boot-key " + key.string() + ": " + key_pem.error());
  auto cert_pem = ReadFile(cert);
  if (!cert_pem) return Fail("--secure-boot-cert " + cert.string() + ": " + cert_pem.error());
  auto subject = efi::CheckSigningPair(*key_pem, *cert_pem, "--secure-boot-key " + key.string());
  if (!subject) return Fail(subject.error());
  return SecureBootKeys{std::move(*key_pem), std::move(*cert_pem), std::move(*subject)};
}

Result<BootFiles> SignedBoot(const BootFiles& boot, const SecureBootKeys& keys, const std::vector<std::string>& cmdline,
                             const std::string& what) {
  const ArchTraits& t = TraitsOf(boot.arch);
  if (boot.stub.empty()) {
    return Fail(std::string("the base has no systemd EFI stub (/usr/lib/systemd/boot/efi/") + t.efi_stub +
                "), which a Secure Boot build makes its unified kernel image from; add systemd-boot-efi to the "
                "base's packages");
  }
  efi::UkiParts parts;
  parts.osrel = boot.os_release;
  parts.cmdline = Join(cmdline, " ");
  parts.kernel = boot.kernel;
  parts.initrd = boot.initrd;
  // The signed PCR policy, with the Secure Boot key: a state sealed to that key unlocks
  // under every UKI it signs (docs/secure-boot.md).
  if (auto s = efi::AddPcrPolicy(parts, keys.key_pem); !s) return Fail(what + ": " + s.error());
  auto uki = efi::BuildUki(boot.stub, parts);
  if (!uki) return Fail(what + ": " + uki.error());
  auto signed_uki = efi::SignPe(*uki, keys.key_pem, keys.cert_pem, what);
  if (!signed_uki) return Fail(signed_uki.error());
  auto loader =
      efi::SignPe(boot.bootloader, keys.key_pem, keys.cert_pem, std::string("systemd-boot (") + t.systemd_boot + ")");
  if (!loader) return Fail(loader.error());
  BootFiles out = boot;
  out.uki = std::move(*signed_uki);
  out.bootloader = std::move(*loader);
  return out;
}

}  // namespace sprout::cli
