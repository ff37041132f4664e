// The decisions of an A/B update (docs/updates.md), pure: which slot runs and which is
// written, whether the new build fits and is allowed, what to remove and write on the
// ESP and in the GPT. firstboot/update.cc reads the inputs and carries the plan out.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "image/arch.h"  // Arch, with the partition types of each architecture
#include "image/gpt.h"
#include "update/build.h"
#include "update/entries.h"
#include "update/gpt_patch.h"
#include "util/result.h"

namespace sprout::update {

// Slot is one root slot of a disk: its letter and its two partitions.
struct Slot {
  char letter = 'a';
  Partition root, verity;
};

// DiskSlots are a disk's two slots, split into the running one and the other.
struct DiskSlots {
  Slot running, inactive;
};

// RootTypes are the DPS root and root-verity partition types of one architecture
// (image/arch.h's table), and the architecture.
struct RootTypes {
  Guid root, verity;
  Arch arch = Arch::kAmd64;
};

// DiskRootTypes are the root types a disk's root partitions carry (x86-64 or 64-bit
// ARM); nullopt when it has no DPS root partition of either.
std::optional<RootTypes> DiskRootTypes(const GptLayout& disk);

// FindSlots pairs the disk's root and verity partitions in order (slot a, then b) and
// names the running slot: the one whose root PARTUUID derives from running_hash.
Result<DiskSlots> FindSlots(const GptLayout& disk, const std::string& running_hash);

// SlotOfHash is the letter of the slot whose root PARTUUID derives from hash, if any.
std::optional<char> SlotOfHash(const GptLayout& disk, const std::string& hash);

// VerityGeometry is what a dm-verity superblock says about the bytes an update copies.
struct VerityGeometry {
  std::uint64_t data_bytes = 0;  // the data device's protected bytes (the root)
  std::uint64_t hash_bytes = 0;  // superblock block plus the hash tree
};

// ParseVeritySuperblock reads veritysetup's superblock (the first 512 bytes of a hash
// device made with a superblock, SHA-256).
Result<VerityGeometry> ParseVeritySuperblock(const std::vector<std::uint8_t>& sb);

// UpdateInputs is everything an update decides from, read from the node and the build.
struct UpdateInputs {
  std::string cmdline;               // the running kernel command line
  GptLayout disk;                    // the node's disk
  std::vector<Entry> entries;        // sprout's loader entries on the node's ESP
  std::string loader_conf;           // the node's loader/loader.conf
  std::string running_etcd;          // etcd version of the running build ("" if none)
  RecordedIdentity running;          // the running build's identity (ReadIdentity of its image.json)
  bool allow_downgrade = false;      // --allow-downgrade: an equal or older serial
  bool allow_cross_profile = false;  // --allow-cross-profile: another profile, role or cluster
  BuildInfo build;                   // the new build
  GptLayout build_disk;              // the new build's raw image
  VerityGeometry build_verity;       // its slot a's verity superblock
  std::string build_entry;           // its loader entry's text
  int tries = 3;
};

// UpdatePlan is what the node writes, in the order docs/updates.md gives.
struct UpdatePlan {
  DiskSlots slots;
  std::string running_hash;
  std::uint64_t source_root_offset = 0, source_verity_offset = 0;  // in the build's raw image
  VerityGeometry copy;                                             // bytes to copy
  std::vector<std::string> remove_entries;                         // entry file names under loader/entries
  std::vector<std::string> remove_files;                           // ESP paths (relative) no kept entry uses
  std::vector<EntryChange> mark_empty;                             // the inactive slot, labelled _empty first
  std::vector<EntryChange> mark_new;                               // then its new PARTUUIDs and labels
  std::string kernel_dir;                                          // "sprout/b"
  std::string entry_file;                                          // "sprout-2-b+3.conf"
  std::string entry_text;
  std::string serial_note;    // the serials compared (identity.h CheckSerial)
  std::string identity_note;  // the profiles, roles and clusters compared (CheckSameNodes)
};

// PlanUpdate makes the plan or says, naming the input, why the update cannot be done.
Result<UpdatePlan> PlanUpdate(const UpdateInputs& in);

// kUkiFile is the name of a slot's unified kernel image in its folder (sprout/b/sprout.efi),
// as the image's own is sprout/sprout.efi (kUkiPath).
inline constexpr const char* kUkiFile = "sprout.efi";

// EntryPaths are the ESP paths (relative, no leading slash) an entry's linux, initrd
// and efi lines name.
std::vector<std::string> EntryPaths(const std::string& entry_text);

}  // namespace sprout::update
