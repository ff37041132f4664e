#include "update/checks.h"

#include "image/plan.h"
#include "util/sign.h"
#include "util/text.h"

namespace sprout::update {

Result<TrustVerdict> CheckTrust(const TrustInputs& in) {
  if (in.trusted_key) {
    if (!in.signature) {
      return Fail(in.source + " is not signed (no manifest.json.sig) and this node trusts only builds signed by " +
                  in.trusted_key_name +
                  "; build it with sprout build --sign KEY, with the key this node's image was "
                  "built with");
    }
    if (auto s = VerifyEd25519(*in.trusted_key, in.manifest, *in.signature); !s) {
      return Fail(in.source + "/manifest.json: " + s.error() + "; this node trusts only builds signed by " +
                  in.trusted_key_name + " (the key its image was built with)");
    }
    return TrustVerdict{true, "signature of manifest.json checked with " + in.trusted_key_name};
  }
  if (!in.insecure_unsigned) {
    return Fail("this node has no update trust root (" + in.trusted_key_name + "), so it cannot tell who made " +
                in.source +
                "; build the node's image with sprout build --sign KEY (the image then trusts that key), or give "
                "--key PUB, or accept an unchecked build with --insecure-unsigned");
  }
  return TrustVerdict{false, "WARNING: --insecure-unsigned: " + in.source +
                                 " is installed without checking who made it (this node has no update trust root " +
                                 in.trusted_key_name + "); anyone who can answer for the build's source can run " +
                                 "their own kernel and root on this node"};
}

Status CheckRoom(std::uint64_t free, std::uint64_t need, std::uint64_t floor, const std::string& where) {
  if (free >= need && free - need >= floor) return Ok{};
  return Fail("not enough room in " + where + ": the build needs " + HumanSize(need) + " and " + HumanSize(floor) +
              " must stay free for etcd, but only " + HumanSize(free) +
              " is free; free space there, or set another floor with --min-free BYTES (docs/updates.md)");
}

Status CheckStateEncryption(const std::vector<std::string>& running_cmdline,
                            const std::vector<std::string>& new_cmdline) {
  const StateOnCmdline node = ReadStateWords(running_cmdline), next = ReadStateWords(new_cmdline);
  const std::string encryption_word = kStateEncryptionWord, without_tpm_word = kWithoutTpmWord;
  const std::string fix =
      "; an update cannot convert a node's state: reinstall the node from the new image, or build the new image with "
      "the node's setting (";
  if (node.encryption != next.encryption) {
    const std::string new_side =
        next.encryption.empty()
            ? "the new image does not encrypt the state partition (no " + encryption_word + " on its command line)"
            : "the new image encrypts the state partition (" + encryption_word + next.encryption + ")";
    const std::string node_side =
        node.encryption.empty() ? "this node's state is plain ext4 (no " + encryption_word + " on its command line)"
                                : "this node's image encrypts its state (" + encryption_word + node.encryption + ")";
    // The profile's spellings are the words' values (profile/profile.h, a layer
    // lib/update does not use), and "none" puts no word on the line.
    const std::string setting = "disk.stateEncryption: " + (node.encryption.empty() ? "none" : node.encryption);
    return Fail(new_side + " and " + node_side + fix + setting + ")");
  }
  const std::string plain = "plain";  // the only value the initrd takes for a plain state
  if (!node.encryption.empty() && node.without_tpm == plain && next.without_tpm != plain) {
    const std::string new_value = next.without_tpm.empty() ? "no " + without_tpm_word + ", which means refuse"
                                                           : without_tpm_word + next.without_tpm;
    return Fail("the new image refuses a plain state partition (" + new_value +
                ") and this node's image lets it stay plain without a TPM (" + without_tpm_word + plain +
                "), so this node's state may be plain ext4, which the new image's initrd would refuse to boot" + fix +
                "disk.withoutTpm: " + plain + ")");
  }
  return Ok{};
}

GateVerdict UnreadableBoot(const std::string& cmdline, std::optional<bool> efi_counted, const std::string& error) {
  for (const auto& w : Split(std::string(Trim(cmdline)), ' ')) {
    if (w.starts_with("sprout.live=")) {
      return {true, "a live boot (" + w + ") has no slots to gate (" + error + ")"};
    }
  }
  if (efi_counted && !*efi_counted) {
    return {true,
            error + "; systemd-boot booted an entry without a boot counter (committed), so there is nothing to gate"};
  }
  return {false, error +
                     "; this boot cannot be judged, so it is not committed (failing the gate: a slot on trial "
                     "falls back after its tries)"};
}

}  // namespace sprout::update
