// The image plan: pure decisions about a disk (GUIDs, labels, kernel command line,
// loader entry, fstab) made from the profile and a seed of the build inputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "image/guid.h"
#include "profile/profile.h"

namespace sprout {

// DiskPlan holds every identifier and text file the disk's layout implies.
struct DiskPlan {
  Guid disk_guid, esp_uuid, root_uuid, state_uuid;
  std::uint32_t esp_volume_id = 0;
  std::string state_fs_uuid;  // the ext4 file-system UUID
  std::vector<std::string> cmdline;
  std::string loader_conf;
  std::string loader_entry;
  std::string fstab;
};

// Partition labels; the initrd and docs refer to them.
inline constexpr const char* kEspLabel = "sprout-esp";
inline constexpr const char* kRootLabel = "sprout-root-a";
inline constexpr const char* kStateLabel = "sprout-state";

// SeedOf digests everything that identifies a build's inputs: the resolved profile
// (as JSON), the base's identity and the sprout version.
std::string SeedOf(const std::string& profile_json, const std::string& base_id);

// PlanDisk derives the identifiers and boot files of a disk from the profile and seed.
DiskPlan PlanDisk(const Profile& profile, const std::string& seed);

}  // namespace sprout
