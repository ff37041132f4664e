#include "update/plan.h"

#include <algorithm>
#include <set>

#include "image/arch.h"
#include "image/plan.h"
#include "update/checks.h"
#include "update/gpt_patch.h"
#include "update/identity.h"
#include "util/text.h"

namespace sprout::update {

namespace {

std::string SlotLabel(char slot) { return std::string("sprout-root-") + slot; }

// NodePartitionWord is the command line's word for the node's own state or config
// partition, for a build whose entry names them by PARTUUID (images before the words by
// name): the PARTUUID of the partition labelled label on this node's disk.
Result<std::string> NodePartitionWord(const GptLayout& disk, const std::string& key, const std::string& label) {
  for (const auto& p : disk.partitions) {
    if (p.spec.label == label) return key + "PARTUUID=" + p.spec.uuid.ToString();
  }
  return Fail("this node's disk has no partition labelled " + label);
}

// EntryText makes the new entry from the build's own: its kernel and initrd (or unified
// kernel image) in the slot's folder. The state and config partitions are named by their
// GPT names on the root's disk (PlanBoot), which fits this node as it fits the build's
// disk, and are kept as they are; a build from before that names the build's own
// PARTUUIDs, which this node does not have, so those words get the node's.
Result<std::string> EntryText(const std::string& build_entry, const GptLayout& disk, const std::string& dir,
                              const std::string& new_hash) {
  std::string out;
  bool kernel_seen = false, options_seen = false, hash_seen = false;
  for (const auto& raw : Split(build_entry, '\n')) {
    std::string line(Trim(raw));
    if (line.starts_with("linux ")) {
      out += "linux /" + dir + "/vmlinuz\n";
      kernel_seen = true;
    } else if (line.starts_with("initrd ")) {
      out += "initrd /" + dir + "/initrd.img\n";
    } else if (line.starts_with("efi ")) {
      out += "efi /" + dir + "/" + kUkiFile + "\n";
      kernel_seen = true;
    } else if (line.starts_with("options ")) {
      std::string opts;
      for (const auto& w : Split(line.substr(8), ' ')) {
        if (w.empty()) continue;
        std::string word = w;
        for (auto [key, label] : {std::pair{"sprout.state=", kStateLabel}, std::pair{"sprout.config=", kConfigLabel}}) {
          if (!word.starts_with(key) || word.starts_with(std::string(key) + "PARTLABEL=")) continue;
          auto mine = NodePartitionWord(disk, key, label);
          if (!mine) return Fail(mine.error());
          word = *mine;
        }
        if (word.starts_with("sprout.roothash=") && word != "sprout.roothash=" + new_hash) {
          return Fail("the build's loader entry names another root hash than its manifest");
        }
        if (word.starts_with("sprout.roothash=")) hash_seen = true;
        opts += (opts.empty() ? "" : " ") + word;
      }
      out += "options " + opts + "\n";
      options_seen = true;
    } else if (!line.empty()) {
      out += line + "\n";
    }
  }
  if (!kernel_seen || !options_seen) return Fail("the build's loader entry lacks a linux (or efi) or options line");
  // Without its root hash the entry would boot a root that verity does not check, and
  // the node could not tell which slot it runs.
  if (!hash_seen) return Fail("the build's loader entry has no sprout.roothash= on its options line");
  return out;
}

}  // namespace

std::optional<RootTypes> DiskRootTypes(const GptLayout& disk) {
  std::vector<std::string> types;
  for (const auto& p : disk.partitions) types.push_back(p.spec.type.ToString());
  const auto arch = ImageArchOf(std::vector<std::string_view>(types.begin(), types.end()));
  if (!arch) return std::nullopt;
  const ArchTraits& t = TraitsOf(*arch);
  return RootTypes{*Guid::Parse(t.root_type), *Guid::Parse(t.root_verity_type), *arch};
}

std::optional<char> SlotOfHash(const GptLayout& disk, const std::string& hash) {
  auto types = DiskRootTypes(disk);
  if (!types) return std::nullopt;
  const Guid& root_type = types->root;
  if (!IsRootHash(hash)) return std::nullopt;
  const Guid want = SlotUuidsOf(hash).root;
  char letter = 'a';
  for (const auto& p : disk.partitions) {
    if (!(p.spec.type == root_type)) continue;
    if (p.spec.uuid == want) return letter;
    ++letter;
  }
  return std::nullopt;
}

Result<DiskSlots> FindSlots(const GptLayout& disk, const std::string& running_hash) {
  auto types = DiskRootTypes(disk);
  if (!types) return Fail("the disk has no root partition of a known architecture (amd64 or arm64)");
  const Guid& root_type = types->root;
  const Guid& verity_type = types->verity;
  std::vector<Partition> roots, verities;
  for (const auto& p : disk.partitions) {
    if (p.spec.type == root_type) roots.push_back(p);
    if (p.spec.type == verity_type) verities.push_back(p);
  }
  if (roots.size() != 2 || verities.size() != 2) {
    return Fail("the disk has " + std::to_string(roots.size()) + " root and " + std::to_string(verities.size()) +
                " verity partitions, not two of each; only a sprout disk with two root slots can be updated");
  }
  if (running_hash.empty()) {
    return Fail("the kernel command line has no sprout.roothash=; an update runs on a node booted from a sprout disk");
  }
  if (!IsRootHash(running_hash)) {
    return Fail("the root hash '" + running_hash.substr(0, 80) +
                "' is not 64 hex digits; a sprout.roothash= (on the kernel command line, or in a build's manifest) "
                "that is not the image's own cannot name a slot");
  }
  const SlotUuids want = SlotUuidsOf(running_hash);
  DiskSlots s;
  int running = -1;
  for (int i = 0; i < 2; ++i) {
    if (roots[i].spec.uuid == want.root && verities[i].spec.uuid == want.verity) running = i;
  }
  if (running < 0) {
    return Fail("no slot of this disk carries the running root hash " + running_hash.substr(0, 12) +
                "...; was the node booted from an ISO or PXE? An update writes a disk the node booted from");
  }
  const int other = 1 - running;
  s.running = {static_cast<char>('a' + running), roots[running], verities[running]};
  s.inactive = {static_cast<char>('a' + other), roots[other], verities[other]};
  if (s.inactive.root.entry == s.running.root.entry || s.inactive.verity.entry == s.running.verity.entry) {
    return Fail("the inactive slot is the running slot");  // unreachable by construction; never write then
  }
  return s;
}

Result<VerityGeometry> ParseVeritySuperblock(const std::vector<std::uint8_t>& sb) {
  if (sb.size() < 512 || std::string(sb.begin(), sb.begin() + 8) != std::string("verity\0\0", 8)) {
    return Fail("the verity partition has no verity superblock");
  }
  const std::uint8_t* p = sb.data();
  const std::string algorithm(reinterpret_cast<const char*>(p + 32));
  const std::uint64_t data_block = ReadLe(p + 64, 4), hash_block = ReadLe(p + 68, 4), data_blocks = ReadLe(p + 72, 8);
  if (algorithm != "sha256" || data_block == 0 || hash_block < 64 || data_blocks == 0) {
    return Fail("the verity superblock is not SHA-256 with sane block sizes");
  }
  const std::uint64_t per_block = hash_block / 32;
  std::uint64_t n = data_blocks, tree = 0;
  do {
    n = (n + per_block - 1) / per_block;
    tree += n;
  } while (n > 1);
  VerityGeometry g;
  g.data_bytes = data_blocks * data_block;
  g.hash_bytes = hash_block + tree * hash_block;  // the superblock takes the first hash block
  return g;
}

std::vector<std::string> EntryPaths(const std::string& entry_text) {
  std::vector<std::string> out;
  for (const auto& raw : Split(entry_text, '\n')) {
    std::string line(Trim(raw));
    for (const char* key : {"linux ", "initrd ", "efi "}) {
      if (line.starts_with(key)) {
        std::string path(Trim(line.substr(std::string(key).size())));
        while (path.starts_with("/")) path = path.substr(1);
        out.push_back(path);
      }
    }
  }
  return out;
}

Result<UpdatePlan> PlanUpdate(const UpdateInputs& in) {
  UpdatePlan plan;
  plan.running_hash = RootHashOfCmdline(in.cmdline);
  auto slots = FindSlots(in.disk, plan.running_hash);
  if (!slots) return Fail(slots.error());
  plan.slots = *slots;
  const Slot& target = plan.slots.inactive;

  if (in.build.root_hash == plan.running_hash) {
    return Fail("the node already runs this build (root hash " + plan.running_hash.substr(0, 12) + "...)");
  }
  bool by_pattern = false;
  for (const auto& line : Split(in.loader_conf, '\n')) {
    if (Trim(line) == std::string("default ") + kEntryPattern) by_pattern = true;
  }
  if (!by_pattern) {
    return Fail(
        "loader/loader.conf on the ESP does not boot by the pattern 'sprout-*' (an image from a sprout before "
        "A/B updates); reflash the node with a current image");
  }
  if (auto s = CheckEtcdRule(in.running_etcd, in.build.etcd_version); !s) return Fail(s.error());
  auto identity = CheckIdentityRules(in.running, in.build.identity, in.allow_downgrade, in.allow_cross_profile);
  if (!identity) return Fail(identity.error());
  plan.identity_note = identity->nodes;
  plan.serial_note = identity->serial;
  // The new entry keeps the build's state words (EntryText copies them), so they are
  // what the node's next boot reads.
  if (auto s = CheckStateEncryption(CmdlineWords(in.cmdline), EntryOptionsWords(in.build_entry)); !s)
    return Fail(s.error());

  // The booted entry must be committed: updating from a slot on trial would remove
  // the only committed entry (the other slot's) and leave nothing to fall back to.
  auto booted = BootedEntry(in.entries, plan.running_hash);
  if (!booted) {
    return Fail("no sprout loader entry on the ESP boots the running root " + plan.running_hash.substr(0, 12) +
                "...; an image from a sprout before A/B updates? Reflash the node with a current image");
  }
  if (booted->name.counted) {
    return Fail("the running slot is still on trial (entry " + booted->name.file +
                "); it is committed once the node is healthy (sprout-firstboot update status), then update again");
  }

  // The build's slot a is what goes into this node's inactive slot.
  auto build_slots = FindSlots(in.build_disk, in.build.root_hash);
  if (!build_slots) return Fail("the build's raw image " + in.build.raw_file + ": " + build_slots.error());
  // FindSlots found both disks' root types, so DiskRootTypes has a value for each.
  const std::string node_arch = ArchName(DiskRootTypes(in.disk)->arch);
  const std::string build_arch = ArchName(DiskRootTypes(in.build_disk)->arch);
  if (node_arch != build_arch) {
    return Fail("the build is an " + build_arch + " image and this node runs " + node_arch +
                "; update it with a build of the same profile for " + node_arch + " (sprout build --arch " + node_arch +
                ")");
  }
  const Slot& source = build_slots->running;
  plan.source_root_offset = source.root.offset();
  plan.source_verity_offset = source.verity.offset();
  plan.copy = in.build_verity;
  if (plan.copy.data_bytes > source.root.size() || plan.copy.hash_bytes > source.verity.size()) {
    return Fail("the build's verity superblock describes more than its partitions hold; the raw image is damaged");
  }
  if (plan.copy.data_bytes > target.root.size()) {
    return Fail("the new root (" + HumanSize(plan.copy.data_bytes) + ") does not fit slot " +
                std::string(1, target.letter) + "'s root partition (" + HumanSize(target.root.size()) +
                "); make the new root smaller, or reflash with a larger disk.rootSize");
  }
  if (plan.copy.hash_bytes > target.verity.size()) {
    return Fail("the new verity tree (" + HumanSize(plan.copy.hash_bytes) + ") does not fit slot " +
                std::string(1, target.letter) + "'s verity partition (" + HumanSize(target.verity.size()) + ")");
  }

  // Entries of the inactive slot point at a root about to be overwritten: they go, and
  // so do the files only they use.
  int generation = 0;
  std::set<std::string> kept_paths;
  for (const auto& e : in.entries) {
    generation = std::max(generation, e.name.generation);
    if (EntryRootHash(e.text) == plan.running_hash) {
      for (const auto& p : EntryPaths(e.text)) kept_paths.insert(p);
    } else {
      plan.remove_entries.push_back(e.name.file);
    }
  }
  std::set<std::string> removed;
  for (const auto& e : in.entries) {
    if (EntryRootHash(e.text) == plan.running_hash) continue;
    for (const auto& p : EntryPaths(e.text)) {
      if (!kept_paths.count(p) && removed.insert(p).second) plan.remove_files.push_back(p);
    }
  }

  const SlotUuids uuids = SlotUuidsOf(in.build.root_hash);
  plan.mark_empty = {{target.root.entry, target.root.spec.uuid, "_empty"},
                     {target.verity.entry, target.verity.spec.uuid, "_empty"}};
  plan.mark_new = {{target.root.entry, uuids.root, SlotLabel(target.letter)},
                   {target.verity.entry, uuids.verity, SlotLabel(target.letter) + "-verity"}};
  plan.kernel_dir = std::string("sprout/") + target.letter;
  plan.entry_file = TrialEntryName(generation + 1, target.letter, in.tries);
  auto text = EntryText(in.build_entry, in.disk, plan.kernel_dir, in.build.root_hash);
  if (!text) return Fail("the build's loader entry: " + text.error());
  plan.entry_text = *text;
  return plan;
}

}  // namespace sprout::update
