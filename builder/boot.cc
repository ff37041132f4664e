// `sprout boot`: QEMU with UEFI firmware and a serial console, with sane defaults.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <vector>

#include "builder/commands.h"
#include "image/arch.h"
#include "image/gpt.h"
#include "util/fs.h"
#include "util/process.h"
#include "util/text.h"

namespace sprout::cli {

namespace {

namespace fs = std::filesystem;

// Firmware finds the UEFI firmware's code and variable-store template: OVMF (Debian
// package ovmf) for amd64, AAVMF (qemu-efi-aarch64) for arm64.
bool Firmware(Arch arch, fs::path& code, fs::path& vars) {
  std::error_code ec;
  using Pair = std::pair<const char*, const char*>;
  const std::vector<Pair> amd64{{"/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"},
                                {"/usr/share/OVMF/OVMF_CODE.fd", "/usr/share/OVMF/OVMF_VARS.fd"}};
  const std::vector<Pair> arm64{{"/usr/share/AAVMF/AAVMF_CODE.fd", "/usr/share/AAVMF/AAVMF_VARS.fd"}};
  for (const auto& [c, v] : arch == Arch::kArm64 ? arm64 : amd64) {
    if (fs::exists(c, ec) && fs::exists(v, ec)) {
      code = c;
      vars = v;
      return true;
    }
  }
  return false;
}

// DiskArch reads the image's GPT and says which architecture its root partition is
// for (amd64 when it cannot tell, as images before arm64 support are).
Arch DiskArch(const fs::path& image) {
  std::ifstream in(image, std::ios::binary);
  std::vector<std::uint8_t> head(34 * kSectorSize);
  in.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size()));
  std::error_code ec;
  auto gpt = ParseGpt(head, fs::file_size(image, ec));
  if (!gpt) return Arch::kAmd64;
  std::vector<std::string> types;
  for (const auto& p : gpt->partitions) types.push_back(p.spec.type.ToString());
  std::vector<std::string_view> views(types.begin(), types.end());
  return ImageArchOf(views).value_or(Arch::kAmd64);
}

// Accel is the accelerator a boot runs on, and the probe's sentence on why.
struct Accel {
  bool kvm = false;
  std::string why;
};

// ChooseAccel settles the accelerator the way every QEMU of sprout's does: through
// qemu-tests/accel (lib.sh's choose_accel), which boots the image's kernel under KVM for
// a few seconds, because /dev/kvm can exist and still fail to run a guest (nested
// virtualization). --kvm asks for KVM when that boot works, else software emulation;
// without it, software emulation with no probe; SPROUT_QEMU_ACCEL (kvm, tcg or auto)
// overrides both, and kvm makes a failed probe an error.
Result<Accel> ChooseAccel(bool kvm_flag, const fs::path& image, Arch arch) {
  const char* env = std::getenv("SPROUT_QEMU_ACCEL");
  if (!kvm_flag && (env == nullptr || *env == '\0')) {
    return Accel{false, "software emulation (TCG; --kvm tries KVM)"};
  }
  const fs::path script = DataDir() / "qemu-tests" / "accel";
  std::error_code ec;
  if (!fs::is_regular_file(script, ec)) {
    return Fail("cannot find the accelerator probe " + script.string() +
                "; is SPROUT_DATA_DIR right? (or leave out --kvm and SPROUT_QEMU_ACCEL)");
  }
  TempDir tmp(fs::temp_directory_path(ec), "sprout-accel");
  const fs::path verdict = tmp.path() / "verdict";
  Command probe{{"bash", script.string(), "--want", kvm_flag ? "auto" : "tcg", "--arch", ArchName(arch),
                 fs::absolute(image, ec).string()},
                {}};
  probe.stdout_file = verdict.string();
  auto run = Run(probe);  // its output is its stderr: the line saying which and why
  if (!run) return Fail(run.error());
  std::string why(Trim(run->output));
  if (why.starts_with("accel: ")) why = why.substr(7);
  if (run->exit_code != 0) return Fail(why.empty() ? "the accelerator probe " + script.string() + " failed" : why);
  auto chosen = ReadFile(verdict);
  return Accel{chosen && Trim(*chosen) == "kvm", why};
}

}  // namespace

int Boot(const BootOptions& o) {
  std::error_code ec;
  if (!fs::is_regular_file(o.image, ec)) {
    std::cerr << "sprout: no image at " << o.image.string() << "; build one with `sprout build PROFILE -o DIR`\n";
    return 2;
  }
  const Arch arch = DiskArch(o.image);
  const bool arm = arch == Arch::kArm64;
  const std::string qemu = arm ? "qemu-system-aarch64" : "qemu-system-x86_64";
  fs::path code, vars_template;
  if (!Firmware(arch, code, vars_template)) {
    std::cerr << (arm ? "sprout: UEFI firmware for arm64 not found in /usr/share/AAVMF; install it with `apt-get "
                        "install qemu-efi-aarch64`\n"
                      : "sprout: UEFI firmware not found in /usr/share/OVMF; install it with `apt-get install ovmf`\n");
    return 2;
  }
  if (FindProgram(qemu).empty()) {
    std::cerr << "sprout: " << qemu << " not found; install it with `apt-get install "
              << (arm ? "qemu-system-arm" : "qemu-system-x86") << "`\n";
    return 2;
  }
  // UEFI variables are per machine; each boot gets a fresh copy beside nothing shared.
  TempDir tmp(fs::temp_directory_path(), "sprout-boot");
  fs::path vars = tmp.path() / vars_template.filename();
  fs::copy_file(vars_template, vars, ec);
  if (ec) {
    std::cerr << "sprout: cannot copy the UEFI variable store: " << ec.message() << "\n";
    return 2;
  }
  // /dev/kvm can exist and still fail (nested virtualization), so KVM is opt-in, and
  // probed with a real boot.
  auto accel = ChooseAccel(o.kvm, o.image, arch);
  if (!accel) {
    std::cerr << "sprout: " << accel.error() << "\n";
    return 2;
  }
  const bool kvm = accel->kvm;
  // arm64: QEMU's virt machine; in emulation a Cortex-A72 (ARMv8.0), because the "max"
  // CPU's pointer authentication is slow to emulate. amd64 in emulation: "max" without
  // AVX and AVX2, which QEMU's translator runs slowly and which Go's SHA-256 and inflate
  // would otherwise take (docs/qemu-cluster.md).
  std::vector<std::string> argv{qemu,
                                "-machine",
                                std::string(arm ? "virt" : "q35") + ",accel=" + (kvm ? "kvm" : "tcg"),
                                "-cpu",
                                kvm ? "host" : (arm ? "cortex-a72" : "max,-avx,-avx2"),
                                "-m",
                                o.memory,
                                "-smp",
                                std::to_string(o.cpus),
                                "-drive",
                                "if=pflash,format=raw,unit=0,readonly=on,file=" + code.string(),
                                "-drive",
                                "if=pflash,format=raw,unit=1,file=" + vars.string(),
                                "-drive",
                                "if=virtio,format=raw,file=" + o.image.string(),
                                "-nographic",
                                "-serial",
                                "mon:stdio",
                                "-nic",
                                "user,model=virtio-net-pci,restrict=on"};
  if (o.snapshot) argv.emplace_back("-snapshot");
  argv.insert(argv.end(), o.extra.begin(), o.extra.end());
  std::cerr << "sprout: booting " << o.image.string() << " (" << ArchName(arch) << ")"
            << " on " << accel->why << (o.snapshot ? ", writes discarded at exit" : ", writes kept in the image")
            << "\n"
            << "sprout: quit with Ctrl-A then X; the serial console follows\n";
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  // QEMU takes over the terminal; sprout waits so the temporary firmware vars are removed after.
  pid_t pid = ::fork();
  if (pid == 0) {
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace sprout::cli
