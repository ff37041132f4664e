#include "image/arch.h"

#include <unistd.h>

#include <cctype>
#include <fstream>

#include "image/guid.h"
#include "util/fs.h"
#include "util/process.h"
#include "util/text.h"

namespace sprout {

namespace {

// Partition types from the UAPI Group's Discoverable Partitions Specification.
constexpr ArchTraits kAmd64{dps::kRootX86_64,       dps::kRootVerityX86_64,
                            "EFI/BOOT/BOOTX64.EFI", "systemd-bootx64.efi",
                            "linuxx64.efi.stub",    "linux-image-amd64",
                            "ttyS0,115200",         62,
                            "qemu-x86_64",          "x86_64"};
constexpr ArchTraits kArm64{dps::kRootArm64,         dps::kRootVerityArm64,
                            "EFI/BOOT/BOOTAA64.EFI", "systemd-bootaa64.efi",
                            "linuxaa64.efi.stub",    "linux-image-arm64",
                            "ttyAMA0,115200",        183,
                            "qemu-aarch64",          "aarch64"};

}  // namespace

const ArchTraits& TraitsOf(Arch arch) { return arch == Arch::kArm64 ? kArm64 : kAmd64; }

Arch HostArch() {
#if defined(__aarch64__)
  return Arch::kArm64;
#else
  return Arch::kAmd64;
#endif
}

std::optional<Arch> ElfArch(std::string_view head) {
  // e_ident: magic, class 2 (64-bit), data 1 (little-endian); e_machine at offset 18.
  constexpr std::string_view kElfMagic = "\177ELF";
  if (head.size() < 20 || head.substr(0, 4) != kElfMagic || head[4] != 2 || head[5] != 1) {
    return std::nullopt;
  }
  const auto machine =
      static_cast<std::uint16_t>(static_cast<unsigned char>(head[18]) | static_cast<unsigned char>(head[19]) << 8);
  for (Arch a : {Arch::kAmd64, Arch::kArm64}) {
    if (TraitsOf(a).elf_machine == machine) return a;
  }
  return std::nullopt;
}

std::optional<Arch> ElfArchOfFile(const std::filesystem::path& program) {
  std::ifstream in(program, std::ios::binary);
  std::string head(64, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  return ElfArch(head);
}

std::string PartitionTypeName(std::string_view type) {
  std::string t(type);
  for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (t == dps::kEsp) return "esp";
  if (t == dps::kVar) return "var";
  if (t == dps::kLinuxGeneric) return "linux-generic";
  for (Arch a : {Arch::kAmd64, Arch::kArm64}) {
    if (t == TraitsOf(a).root_type) return std::string("root ") + ArchName(a);
    if (t == TraitsOf(a).root_verity_type) return std::string("root-verity ") + ArchName(a);
  }
  return "";
}

Status CheckFormats(Arch arch, const std::vector<Format>& formats) {
  if (arch == Arch::kAmd64) return Ok{};
  std::string refused;
  for (Format f : formats) {
    if (f == Format::kIso || f == Format::kPxe) refused += std::string(refused.empty() ? "" : ", ") + FormatName(f);
  }
  if (refused.empty()) return Ok{};
  return Fail(std::string("an ") + ArchName(arch) + " image cannot be made as " + refused +
              " yet (neither is boot-tested on arm64; docs/arm64.md); ask for raw or qcow2, such as "
              "--format raw,qcow2");
}

std::optional<Arch> ImageArchOf(const std::vector<std::string_view>& partition_types) {
  for (std::string_view type : partition_types) {
    const std::string name = PartitionTypeName(type);
    for (Arch a : {Arch::kAmd64, Arch::kArm64}) {
      if (name == std::string("root ") + ArchName(a)) return a;
    }
  }
  return std::nullopt;
}

BinfmtCheck CheckBinfmt(Arch target, Arch host, const BinfmtState& state) {
  if (target == host) return {};
  const ArchTraits& t = TraitsOf(target);
  const std::string why = std::string("building an ") + ArchName(target) + " base on this " + TraitsOf(host).gnu_name +
                          " host runs its package scripts under qemu-user through binfmt_misc, but ";
  if (!state.mounted) {
    return {BinfmtVerdict::kMissing, why + "binfmt_misc is not mounted; mount it as root: `mount -t binfmt_misc " +
                                         "binfmt_misc " + kBinfmtDir + "`"};
  }
  if (!state.arch_test) {
    return {BinfmtVerdict::kMissing,
            why + "arch-test is not installed (mmdebstrap needs it to check that it can run " + ArchName(target) +
                " programs); install it: `apt-get install arch-test qemu-user-static` (scripts/install-deps does)"};
  }
  if (!state.entry.empty()) {
    if (state.entry.starts_with("enabled")) return {};
    return {BinfmtVerdict::kMissing, why + "the " + t.qemu_binfmt +
                                         " handler is disabled; enable it as root: `echo 1 > " + kBinfmtDir + "/" +
                                         t.qemu_binfmt + "`"};
  }
  if (!state.rule_file) {
    return {BinfmtVerdict::kMissing, why + "qemu-user-static is not installed; install it: `apt-get install " +
                                         "qemu-user-static` (scripts/install-deps does)"};
  }
  if (state.privileged) return {BinfmtVerdict::kRegister, ""};
  return {BinfmtVerdict::kMissing,
          why + t.qemu_binfmt + " is not registered with binfmt_misc; register it as root: " + "`cat " + kBinfmtRules +
              "/" + t.qemu_binfmt + ".conf > " + kBinfmtDir + "/register` (or run `sprout base` as root, which does)"};
}

BinfmtState ReadBinfmt(Arch arch) {
  const std::string name = TraitsOf(arch).qemu_binfmt;
  BinfmtState s;
  std::error_code ec;
  s.mounted = std::filesystem::exists(std::string(kBinfmtDir) + "/status", ec);
  if (auto entry = ReadFile(std::string(kBinfmtDir) + "/" + name)) s.entry = *entry;
  s.rule_file = std::filesystem::is_regular_file(std::string(kBinfmtRules) + "/" + name + ".conf", ec);
  s.privileged = ::geteuid() == 0;
  s.arch_test = !FindProgram("arch-test").empty();
  return s;
}

Status RegisterBinfmt(Arch arch) {
  const std::string rule_path = std::string(kBinfmtRules) + "/" + TraitsOf(arch).qemu_binfmt + ".conf";
  auto rule = ReadFile(rule_path);
  if (!rule) return Fail(rule.error());
  std::string line;
  for (const auto& l : Split(*rule, '\n')) {
    if (!l.empty() && l[0] == ':') line = l;
  }
  if (line.empty()) return Fail(rule_path + " holds no binfmt_misc rule");
  std::ofstream reg(std::string(kBinfmtDir) + "/register");
  reg << line;
  reg.flush();
  if (!reg) {
    return Fail("cannot register " + rule_path + " with binfmt_misc (" + kBinfmtDir +
                "/register refused it); is binfmt_misc mounted, and are we root?");
  }
  return Ok{};
}

}  // namespace sprout
