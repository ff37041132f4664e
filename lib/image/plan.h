// The image plan: pure decisions about a disk (GUIDs, labels, partitions, kernel
// command line, loader entry, fstab) made from the profile, a seed of the build inputs
// and the root's verity hash.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "image/gpt.h"
#include "image/guid.h"
#include "profile/profile.h"

namespace sprout {

// DiskPlan holds every identifier and text file the disk's layout implies.
struct DiskPlan {
  Arch arch = Arch::kAmd64;  // picks the root and verity partition types and the serial console
  Guid disk_guid, esp_uuid, state_uuid, config_uuid;
  Guid root_uuid, verity_uuid;      // slot A; from the root hash (set by PlanBoot)
  Guid root_b_uuid, verity_b_uuid;  // the reserved slot B
  std::uint32_t esp_volume_id = 0;
  std::string state_fs_uuid;     // the ext4 file-system UUID
  std::string verity_salt;       // 64 hex digits
  std::string verity_uuid_text;  // the verity superblock's UUID
  std::string root_hash;         // 64 hex digits (set by PlanBoot)
  std::vector<std::string> cmdline;
  std::string loader_conf;
  std::string loader_entry;
  std::string fstab;
};

// Partition labels; the initrd and docs refer to them. "_empty" marks an unused slot,
// as systemd-sysupdate does.
inline constexpr const char* kEspLabel = "sprout-esp";
inline constexpr const char* kRootLabel = "sprout-root-a";
inline constexpr const char* kVerityLabel = "sprout-root-a-verity";
inline constexpr const char* kEmptyLabel = "_empty";
inline constexpr const char* kStateLabel = "sprout-state";
inline constexpr const char* kConfigLabel = "sprout-config";

// The command line names the state partition and the config area by these words and
// their GPT names; both are looked up on the disk that holds the verity root (the data
// partition of sprout.verity.data=), never elsewhere. Older images named them with
// PARTUUID=, which the initrd and sprout-firstboot still read.
inline constexpr const char* kStateWord = "sprout.state=PARTLABEL=";
inline constexpr const char* kConfigWord = "sprout.config=PARTLABEL=";

// The config area's size: small, written by `sprout personalize`, read at boot.
inline constexpr std::uint64_t kConfigSize = 1 << 20;

// Partition indexes in the table PlanPartitions returns.
enum PartitionIndex {
  kEspIndex = 0,
  kRootAIndex,
  kVerityAIndex,
  kRootBIndex,
  kVerityBIndex,
  kConfigIndex,
  kStateIndex
};

// SeedOf digests everything that identifies a build's inputs: their content
// (image/inputs.h's InputsJson, which holds the base's identity) and the sprout version.
std::string SeedOf(const std::string& inputs_json);

// PlanDisk derives the seed-based identifiers, the verity salt and the fstab.
DiskPlan PlanDisk(const Profile& profile, const std::string& seed);

// The image's own loader entry, and the pattern loader.conf boots by: entries are
// named sprout-GENERATION-SLOT.conf, and A/B updates add newer generations
// (docs/updates.md), which systemd-boot sorts first.
inline constexpr const char* kFirstEntryName = "sprout-1-a.conf";
inline constexpr const char* kEntryPattern = "sprout-*";

// SlotUuids are a slot's root and verity partition UUIDs: the two halves of its root
// hash (64 hex digits), each shaped as a version-4 GUID.
struct SlotUuids {
  Guid root, verity;
};
// A root hash that is not 64 hex digits (IsRootHash) gives zero bytes where its digits
// are missing or not hex; it never throws, and callers check IsRootHash first.
SlotUuids SlotUuidsOf(const std::string& root_hash);
// IsRootHash says whether text is a root hash as sprout writes it: 64 hex digits.
bool IsRootHash(std::string_view text);

// The kernel command-line words that ask the initrd to encrypt the state partition at
// first boot and say what a node without a TPM does (docs/secure-boot.md). A profile
// that does not ask for encryption puts neither on the command line.
inline constexpr const char* kStateEncryptionWord = "sprout.state.encryption=";
inline constexpr const char* kWithoutTpmWord = "sprout.state.without-tpm=";

// PlanBoot completes the plan once the root's verity hash is known: the root and
// verity partition UUIDs are the hash's two halves (as the Discoverable Partitions
// Specification suggests), and the kernel command line carries the hash and, when the
// profile asks, the state's encryption words.
void PlanBoot(DiskPlan& plan, const Profile& profile, const std::string& root_hash);

// StateOnCmdline is what a kernel command line asks of the node's state (/var).
struct StateOnCmdline {
  bool live = false;        // sprout.live=: a live medium, whose /var is in memory
  std::string encryption;   // the value of sprout.state.encryption=; "" when absent
  std::string without_tpm;  // the value of sprout.state.without-tpm=; "" when absent
};

// ReadStateWords reads the state's words of a kernel command line, as the initrd does.
StateOnCmdline ReadStateWords(const std::vector<std::string>& cmdline);

// DescribeState renders them for `sprout inspect` and the build's report: "plain ext4
// (not encrypted)", "encrypted at first boot (LUKS2, key sealed to the TPM: PCRs 7+11);
// without a TPM: refuse to start", ... (the PCRs are the ones the initrd seals to).
std::string DescribeState(const StateOnCmdline& state);

// StateStatusLine is what `sprout-firstboot status` says of a node's state, from its
// command line's words and the source /var is mounted from: "" when the image does not
// ask for encryption (the line is left out); "encrypted (LUKS2, ...)" when /var is on
// the device the initrd unlocked; otherwise a warning that it is not.
std::string StateStatusLine(const StateOnCmdline& state, const std::string& var_source);

// PlanPartitions lists the GPT partitions (root and verity types of plan.arch, from the
// Discoverable Partitions Specification): ESP, root A and its verity, the reserved
// root B and its verity (same sizes), the config area, then the state partition last
// so it can grow.
std::vector<PartitionSpec> PlanPartitions(const DiskPlan& plan, std::uint64_t esp_size, std::uint64_t root_size,
                                          std::uint64_t verity_size, std::uint64_t state_size);

}  // namespace sprout
