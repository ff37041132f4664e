// A unified kernel image (UKI): systemd's EFI stub with the kernel, initrd, command line
// and os-release added as PE sections, so that one signed file is the whole boot; and,
// for a TPM-sealed state, the signed PCR policy (efi/pcr_policy.h).
// Pure: bytes in, bytes out; the same inputs give the same bytes.
#pragma once

#include <string>
#include <vector>

#include "efi/pe.h"
#include "util/result.h"

namespace sprout::efi {

// UkiParts are the contents of a UKI's added sections.
struct UkiParts {
  std::string osrel;    // .osrel: the image's os-release
  std::string cmdline;  // .cmdline: the kernel command line (the stub uses only this one under Secure Boot)
  std::string kernel;   // .linux: the kernel (an EFI-bootable bzImage or Image)
  std::string initrd;   // .initrd
  std::string pcrpkey;  // .pcrpkey: the PCR policy's public key, PEM (efi/pcr_policy.h); measured
  std::string pcrsig;   // .pcrsig: its signature of this UKI's PCR 11, JSON; not measured
};

// BuildUki appends the non-empty parts to stub (systemd-boot-efi's linuxx64.efi.stub or
// linuxaa64.efi.stub) as sections .osrel, .cmdline, .linux, .initrd, .pcrpkey and
// .pcrsig, in that order, each placed after the stub's last section at the image's
// section alignment (in memory) and file alignment (in the file), and fixes the headers
// (section count, SizeOfImage, SizeOfInitializedData, CheckSum). Fails, naming the stub,
// when the stub already has one of those sections, is signed, or has no room in its
// headers for a section header per part added (six with the PCR policy; bookworm's
// x86-64 stub has room for seven).
Result<std::string> BuildUki(const std::string& stub, const UkiParts& parts);

// UkiSection reads one added section's bytes back (its raw size, cut to its virtual
// size), or says the UKI has none by that name.
Result<std::string> UkiSection(const std::string& uki, std::string_view name);

}  // namespace sprout::efi
