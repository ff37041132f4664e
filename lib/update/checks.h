// What an update checks before it takes a build (docs/updates.md): whom the build is
// signed by, whether the state partition has room for it, and whether the new image
// treats that partition as the running one does (the serial and the profile, role and
// cluster: identity.h). Pure: the node's files, keys, free space and command lines come
// in as values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "util/result.h"

namespace sprout::update {

// kUpdateTrustRoot is where in the root a node keeps its update trust root: the public
// key of the key a signed build (sprout build --sign) was signed with, which the
// builder puts there; every update's signature is checked with it.
inline constexpr const char* kUpdateTrustRoot = "etc/sprout/update.pub";

// TrustInputs are what the signature check decides from.
struct TrustInputs {
  std::optional<std::string> trusted_key;  // the node's trust root (PEM), when it has one
  std::string trusted_key_name;            // where it came from, for messages
  std::string manifest;                    // manifest.json's bytes
  std::optional<std::string> signature;    // manifest.json.sig's bytes, when the build has one
  bool insecure_unsigned = false;          // --insecure-unsigned
  std::string source;                      // the build, for messages
};

// TrustVerdict says how a build was accepted.
struct TrustVerdict {
  bool verified = false;  // signed by the trust root; false only with insecure_unsigned
  std::string note;       // what was checked, or the warning to log
};

// CheckTrust accepts a build signed by the trust root. A node with a trust root refuses
// an unsigned or wrongly signed build, whatever the flags; a node without one refuses
// every build unless insecure_unsigned is given, and then the verdict says loudly that
// nothing was checked.
Result<TrustVerdict> CheckTrust(const TrustInputs& in);

// kEtcdFloor is the free space an update leaves on the state partition, where etcd
// keeps its data, while the downloaded build sits there: etcd cuts its write-ahead log
// into 64 MiB segments that it preallocates whole, and writes a snapshot of its
// database when it compacts the log; on a full file system etcd stops, which costs the
// cluster a member in the middle of a rolling update. 256 MiB is a new log segment
// and a snapshot of a database of up to about 150 MiB (a small cluster's is a few
// MiB), with room for the journal; it is measured without ext4's reserved blocks,
// which are a further margin for etcd (it runs as root). `update apply --min-free`
// sets another floor.
inline constexpr std::uint64_t kEtcdFloor = 256ull << 20;

// CheckRoom refuses to put need bytes on a file system with free bytes available
// when fewer than floor bytes would be left; the message names the numbers and the fix.
Status CheckRoom(std::uint64_t free, std::uint64_t need, std::uint64_t floor, const std::string& where);

// CheckStateEncryption refuses a new image that would find the node's state partition
// (/var) in a form its initrd does not take. The initrd encrypts the state only at first
// boot and never converts a used one (docs/secure-boot.md), so an update must keep what
// the running image set up. From the two kernel command lines' words (the running one,
// /proc/cmdline, and the new image's loader entry's options; image/plan.h's
// kStateEncryptionWord and kWithoutTpmWord) the rule is:
//  - sprout.state.encryption= must be the same on both sides (absent on both, or the
//    same value): a plain state under an encrypting image is refused at boot
//    (without-tpm=refuse) or runs plain while the image says encrypted (=plain), and a
//    LUKS state under an image without the word is never opened;
//  - with encryption on, a node whose words say without-tpm=plain may be running a
//    plain state (it had no TPM at first boot), which only an image that says plain too
//    takes: the initrd treats any other value, or none, as refuse. So the new image must
//    say plain too. The other way (refuse to plain) is allowed: a node under refuse has
//    an encrypted state, which every value opens.
// The words alone decide, not the state on the disk, so a node under plain that did
// encrypt is refused too; its fix is the same (build the new image with the node's
// setting).
Status CheckStateEncryption(const std::vector<std::string>& running_cmdline,
                            const std::vector<std::string>& new_cmdline);

// GateVerdict is the health gate's answer for a boot whose slots it could not read.
struct GateVerdict {
  bool pass = false;
  std::string message;
};

// UnreadableBoot judges a boot when the gate cannot read the node's disk or ESP (error
// says why). It fails closed: the boot is not committed, unless it cannot be a trial
// at all: a live boot (ISO or PXE, sprout.live= on cmdline) has no slots, and a boot
// that systemd-boot reports (its LoaderInfo EFI variable) without a boot counter
// (no LoaderBootCountPath) is of a committed entry. efi_counted is nullopt when the EFI
// variables cannot be read or systemd-boot set none.
GateVerdict UnreadableBoot(const std::string& cmdline, std::optional<bool> efi_counted, const std::string& error);

}  // namespace sprout::update
