// `sprout boot`: QEMU with UEFI firmware and a serial console, with sane defaults.
#include <sys/wait.h>
#include <unistd.h>

#include <iostream>

#include "builder/commands.h"
#include "util/fs.h"
#include "util/process.h"

namespace sprout::cli {

namespace {

namespace fs = std::filesystem;

// Firmware finds OVMF's code and variable-store template (Debian package ovmf).
bool Firmware(fs::path& code, fs::path& vars) {
  std::error_code ec;
  for (const auto& [c, v] : {std::pair{"/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"},
                             std::pair{"/usr/share/OVMF/OVMF_CODE.fd", "/usr/share/OVMF/OVMF_VARS.fd"}}) {
    if (fs::exists(c, ec) && fs::exists(v, ec)) {
      code = c;
      vars = v;
      return true;
    }
  }
  return false;
}

}  // namespace

int Boot(const BootOptions& o) {
  std::error_code ec;
  if (!fs::is_regular_file(o.image, ec)) {
    std::cerr << "sprout: no image at " << o.image.string() << "; build one with `sprout build PROFILE -o DIR`\n";
    return 2;
  }
  fs::path code, vars_template;
  if (!Firmware(code, vars_template)) {
    std::cerr << "sprout: UEFI firmware not found in /usr/share/OVMF; install it with `apt-get install ovmf`\n";
    return 2;
  }
  if (FindProgram("qemu-system-x86_64").empty()) {
    std::cerr << "sprout: qemu-system-x86_64 not found; install it with `apt-get install qemu-system-x86`\n";
    return 2;
  }
  // UEFI variables are per machine; each boot gets a fresh copy beside nothing shared.
  TempDir tmp(fs::temp_directory_path(), "sprout-boot");
  fs::path vars = tmp.path() / "OVMF_VARS.fd";
  fs::copy_file(vars_template, vars, ec);
  if (ec) {
    std::cerr << "sprout: cannot copy the UEFI variable store: " << ec.message() << "\n";
    return 2;
  }
  // /dev/kvm can exist and still fail (nested virtualization), so KVM is opt-in.
  bool kvm = o.kvm;
  if (kvm && ::access("/dev/kvm", R_OK | W_OK) != 0) {
    std::cerr << "sprout: --kvm given but /dev/kvm is not usable; leave it out to use software emulation\n";
    return 2;
  }
  std::vector<std::string> argv{"qemu-system-x86_64",
                                "-machine",
                                std::string("q35,accel=") + (kvm ? "kvm" : "tcg"),
                                "-cpu",
                                kvm ? "host" : "max",
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
  std::cerr << "sprout: booting " << o.image.string() << (kvm ? " with KVM" : " in software emulation (no KVM)")
            << (o.snapshot ? ", writes discarded at exit" : ", writes kept in the image") << "\n"
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
