#include "image/plan.h"

#include <algorithm>
#include <string_view>

#include "image/arch.h"
#include "util/sha256.h"
#include "util/text.h"

namespace sprout {

std::string SeedOf(const std::string& inputs_json) {
  Sha256 h;
  h.Update("sprout-seed-v2\n");
  h.Update(SPROUT_VERSION);
  h.Update("\n");
  h.Update(inputs_json);
  return h.HexDigest();
}

DiskPlan PlanDisk(const Profile& profile, const std::string& seed) {
  DiskPlan d;
  d.arch = profile.arch;
  d.disk_guid = Guid::Derive(seed, "disk");
  d.esp_uuid = Guid::Derive(seed, "partition:esp");
  d.state_uuid = Guid::Derive(seed, "partition:state");
  d.config_uuid = Guid::Derive(seed, "partition:config");
  d.root_b_uuid = Guid::Derive(seed, "partition:root-b");
  d.verity_b_uuid = Guid::Derive(seed, "partition:root-b-verity");
  Guid vol = Guid::Derive(seed, "fat-volume-id");
  d.esp_volume_id = static_cast<std::uint32_t>(vol.bytes[0]) << 24 | static_cast<std::uint32_t>(vol.bytes[1]) << 16 |
                    static_cast<std::uint32_t>(vol.bytes[2]) << 8 | vol.bytes[3];
  d.state_fs_uuid = Guid::Derive(seed, "fs:state").ToString();
  d.verity_salt = Sha256Hex(seed + "\nverity-salt");
  d.verity_uuid_text = Guid::Derive(seed, "verity-superblock").ToString();
  d.fstab =
      "# Written by sprout. The root is read-only (dm-verity); /var is the state partition,\n"
      "# mounted by the initrd (listed here so systemd knows it); /tmp lives in memory.\n"
      "PARTUUID=" +
      d.state_uuid.ToString() +
      " /var ext4 defaults,noatime 0 0\n"
      "tmpfs /tmp tmpfs mode=1777,nosuid,nodev,size=50% 0 0\n";
  return d;
}

namespace {

// HexValue is a hex digit's value, or -1 for any other character.
int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool IsRootHash(std::string_view text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) { return HexValue(c) >= 0; });
}

SlotUuids SlotUuidsOf(const std::string& root_hash) {
  std::uint8_t bytes[32] = {};
  for (std::size_t i = 0; i < 32 && 2 * i + 1 < root_hash.size(); ++i) {
    const int hi = HexValue(root_hash[2 * i]);
    const int lo = HexValue(root_hash[2 * i + 1]);
    bytes[i] = hi < 0 || lo < 0 ? 0 : static_cast<std::uint8_t>(hi * 16 + lo);
  }
  return {Guid::FromBytes(bytes), Guid::FromBytes(bytes + 16)};
}

void PlanBoot(DiskPlan& d, const Profile& profile, const std::string& root_hash) {
  d.root_hash = root_hash;
  const SlotUuids uuids = SlotUuidsOf(root_hash);
  d.root_uuid = uuids.root;
  d.verity_uuid = uuids.verity;
  d.cmdline = {
      // The initrd opens the verity device "root" before initramfs-tools mounts it.
      "root=/dev/mapper/root",
      "rootfstype=squashfs",
      "ro",
      "sprout.roothash=" + root_hash,
      "sprout.verity.data=PARTUUID=" + d.root_uuid.ToString(),
      "sprout.verity.hash=PARTUUID=" + d.verity_uuid.ToString(),
      // By their GPT names on the disk that holds the root (the initrd and sprout-firstboot
      // look there), not by PARTUUID: one command line then fits every disk, so a signed
      // UKI of a new build boots on a node whose partitions the build never saw.
      std::string(kStateWord) + kStateLabel,
      std::string(kConfigWord) + kConfigLabel,
      // sprout mounts what it needs itself; the generator would guess from the disk.
      "systemd.gpt_auto=0",
      // Fail closed: a root that verity refuses makes initramfs-tools' panic() reboot
      // after 10 s instead of opening a root shell on the console, and a kernel panic
      // (a corrupt block read later) reboots too rather than hanging.
      "panic=10",
      "console=tty0",
      std::string("console=") + TraitsOf(d.arch).serial_console,
  };
  if (profile.state_encryption != StateEncryption::kNone) {
    // Beside the state's and the config area's words; absent otherwise, so an image that
    // does not ask for encryption has the command line it always had.
    const auto config = std::find_if(d.cmdline.begin(), d.cmdline.end(),
                                     [](const std::string& word) { return word.starts_with("sprout.config="); });
    d.cmdline.insert(config + 1, {kStateEncryptionWord + std::string(StateEncryptionName(profile.state_encryption)),
                                  kWithoutTpmWord + std::string(WithoutTpmName(profile.without_tpm))});
  }
  d.cmdline.insert(d.cmdline.end(), profile.cmdline.begin(), profile.cmdline.end());
  d.loader_conf =
      "# systemd-boot settings written by sprout\n"
      // The newest generation with tries left (docs/updates.md).
      "default " +
      std::string(kEntryPattern) +
      "\n"
      "timeout 0\n"
      // The command line carries the root hash, so it must not be edited at boot.
      "editor no\n";
  d.loader_entry = "title sprout " + profile.name +
                   "\n"
                   "linux /sprout/vmlinuz\n"
                   "initrd /sprout/initrd.img\n"
                   "options " +
                   Join(d.cmdline, " ") + "\n";
}

StateOnCmdline ReadStateWords(const std::vector<std::string>& cmdline) {
  const std::string_view encryption_word = kStateEncryptionWord, without_tpm_word = kWithoutTpmWord;
  StateOnCmdline state;
  for (const auto& word : cmdline) {
    if (word.starts_with("sprout.live=")) state.live = true;
    if (word.starts_with(kStateEncryptionWord)) state.encryption = word.substr(encryption_word.size());
    if (word.starts_with(kWithoutTpmWord)) state.without_tpm = word.substr(without_tpm_word.size());
  }
  return state;
}

std::string DescribeState(const StateOnCmdline& state) {
  if (state.live) return "in memory (a live medium keeps nothing)";
  if (state.encryption.empty() || state.encryption == StateEncryptionName(StateEncryption::kNone)) {
    return "plain ext4 (not encrypted)";
  }
  if (state.encryption != StateEncryptionName(StateEncryption::kTpm2)) {
    return kStateEncryptionWord + state.encryption + ", which this sprout does not know";
  }
  std::string text = "encrypted at first boot (LUKS2, key sealed to the TPM: PCRs 7+11); without a TPM: ";
  // Without the word, the initrd refuses, as the profile's default does.
  if (state.without_tpm.empty() || state.without_tpm == WithoutTpmName(WithoutTpm::kRefuse)) {
    return text + "refuse to start";
  }
  if (state.without_tpm == WithoutTpmName(WithoutTpm::kPlain)) return text + "plain ext4 state with a warning";
  return text + kWithoutTpmWord + state.without_tpm + ", which this sprout does not know";
}

std::string StateStatusLine(const StateOnCmdline& state, const std::string& var_source) {
  if (state.live || state.encryption.empty() || state.encryption == StateEncryptionName(StateEncryption::kNone)) {
    return "";
  }
  if (var_source == "/dev/mapper/sprout-state") {
    return "encrypted (LUKS2 on /dev/mapper/sprout-state, unlocked with the TPM at boot)";
  }
  return "NOT encrypted: the image asks for " + std::string(kStateEncryptionWord) + state.encryption +
         ", and /var is " + (var_source.empty() ? std::string("not mounted") : "on " + var_source) +
         " (a node with no TPM at first boot runs plain under disk.withoutTpm: plain); whoever holds the disk can "
         "read etcd's data, the keys and the secrets";
}

std::vector<PartitionSpec> PlanPartitions(const DiskPlan& d, std::uint64_t esp_size, std::uint64_t root_size,
                                          std::uint64_t verity_size, std::uint64_t state_size) {
  // GPT attribute 60 marks a partition read-only for the OS, per the DPS.
  constexpr std::uint64_t kReadOnly = 1ull << 60;
  const Guid root = *Guid::Parse(TraitsOf(d.arch).root_type);
  const Guid verity = *Guid::Parse(TraitsOf(d.arch).root_verity_type);
  return {
      {kEspLabel, *Guid::Parse(dps::kEsp), d.esp_uuid, esp_size, 0},
      {kRootLabel, root, d.root_uuid, root_size, kReadOnly},
      {kVerityLabel, verity, d.verity_uuid, verity_size, kReadOnly},
      {kEmptyLabel, root, d.root_b_uuid, root_size, kReadOnly},
      {kEmptyLabel, verity, d.verity_b_uuid, verity_size, kReadOnly},
      {kConfigLabel, *Guid::Parse(dps::kLinuxGeneric), d.config_uuid, kConfigSize, 0},
      {kStateLabel, *Guid::Parse(dps::kVar), d.state_uuid, state_size, 0},
  };
}

}  // namespace sprout
