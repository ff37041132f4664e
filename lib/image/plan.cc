#include "image/plan.h"

#include "util/sha256.h"
#include "util/text.h"

namespace sprout {

std::string SeedOf(const std::string& profile_json, const std::string& base_id) {
  Sha256 h;
  h.Update("sprout-seed-v1\n");
  h.Update(SPROUT_VERSION);
  h.Update("\n");
  h.Update(base_id);
  h.Update("\n");
  h.Update(profile_json);
  return h.HexDigest();
}

DiskPlan PlanDisk(const Profile& profile, const std::string& seed) {
  DiskPlan d;
  d.disk_guid = Guid::Derive(seed, "disk");
  d.esp_uuid = Guid::Derive(seed, "partition:esp");
  d.root_uuid = Guid::Derive(seed, "partition:root-a");
  d.state_uuid = Guid::Derive(seed, "partition:state");
  Guid vol = Guid::Derive(seed, "fat-volume-id");
  d.esp_volume_id = static_cast<std::uint32_t>(vol.bytes[0]) << 24 | static_cast<std::uint32_t>(vol.bytes[1]) << 16 |
                    static_cast<std::uint32_t>(vol.bytes[2]) << 8 | vol.bytes[3];
  d.state_fs_uuid = Guid::Derive(seed, "fs:state").ToString();

  d.cmdline = {
      "root=PARTUUID=" + d.root_uuid.ToString(),
      "rootfstype=squashfs",
      "ro",
      "sprout.state=PARTUUID=" + d.state_uuid.ToString(),
      // sprout mounts what it needs itself; the generator would guess from the disk.
      "systemd.gpt_auto=0",
      "console=tty0",
      "console=ttyS0,115200",
  };
  d.cmdline.insert(d.cmdline.end(), profile.cmdline.begin(), profile.cmdline.end());

  d.loader_conf =
      "# systemd-boot settings written by sprout\n"
      "default sprout.conf\n"
      "timeout 0\n"
      // The command line carries the root's identity, so it must not be edited at boot.
      "editor no\n";
  d.loader_entry = "title sprout " + profile.name +
                   "\n"
                   "linux /sprout/vmlinuz\n"
                   "initrd /sprout/initrd.img\n"
                   "options " +
                   Join(d.cmdline, " ") + "\n";
  d.fstab =
      "# Written by sprout. The root is read-only; /var is the state partition, mounted\n"
      "# by the initrd (listed here so systemd knows it); /tmp lives in memory.\n"
      "PARTUUID=" +
      d.state_uuid.ToString() +
      " /var ext4 defaults,noatime 0 0\n"
      "tmpfs /tmp tmpfs mode=1777,nosuid,nodev,size=50% 0 0\n";
  return d;
}

}  // namespace sprout
