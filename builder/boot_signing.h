// Secure Boot in `sprout build` (docs/secure-boot.md): the key pair given with
// --secure-boot-key and --secure-boot-cert, and the signed boot files it makes: systemd-boot
// and a unified kernel image whose embedded command line is the only one Secure Boot
// firmware lets the kernel see.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "image/boot_files.h"
#include "util/result.h"

namespace sprout::cli {

// SecureBootKeys is the signing pair of a Secure Boot build, in PEM; both empty when the
// build is not signed for Secure Boot.
struct SecureBootKeys {
  std::string key_pem, cert_pem;
  std::string subject;  // the certificate's subject, for the build's report
  bool on() const { return !key_pem.empty(); }
};

// LoadSecureBootKeys reads and checks the pair the two flags name (both or neither), so
// a wrong key fails before the build's long steps.
Result<SecureBootKeys> LoadSecureBootKeys(const std::filesystem::path& key, const std::filesystem::path& cert);

// SignedBoot is boot with systemd-boot signed and the unified kernel image for cmdline
// (the stub, kernel, initrd, the command line and os-release, and the PCR policy signed
// with the same key: .pcrpkey and .pcrsig) made and signed; what names the image in
// errors ("the disk's unified kernel image").
Result<BootFiles> SignedBoot(const BootFiles& boot, const SecureBootKeys& keys, const std::vector<std::string>& cmdline,
                             const std::string& what);

}  // namespace sprout::cli
