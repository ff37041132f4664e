#include "firstboot/tpm.h"

#include <fcntl.h>
#include <syslog.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "image/plan.h"
#include "tpm/lockout.h"
#include "update/entries.h"
#include "util/fs.h"
#include "util/result.h"

namespace sprout::firstboot {
namespace {

// The device the initrd's systemd-cryptsetup unsealed with: the kernel's resource
// manager, else the raw device.
constexpr std::array<const char*, 2> kTpmDevices = {"/dev/tpmrm0", "/dev/tpm0"};
constexpr const char* kUnlockedState = "/dev/mapper/sprout-state";

std::string VarSource() {
  std::ifstream mounts("/proc/self/mounts");
  for (std::string line; std::getline(mounts, line);) {
    std::istringstream fields(line);
    std::string source, target;
    if (fields >> source >> target && target == "/var") return source;
  }
  return "";
}

StateOnCmdline StateWords() {
  auto cmdline = ReadFile("/proc/cmdline");
  return ReadStateWords(update::CmdlineWords(cmdline ? *cmdline : std::string()));
}

// UnlockedByTpm: the image asks for the state sealed to the TPM, and /var is on the
// device the initrd unlocked with it.
bool UnlockedByTpm() { return StateWords().encryption == "tpm2" && VarSource() == kUnlockedState; }

// Transact sends one command to the TPM and returns its answer.
Result<tpm::Bytes> Transact(const tpm::Bytes& command) {
  std::string tried;
  for (const char* path : kTpmDevices) {
    const int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      tried += std::string(tried.empty() ? "" : ", ") + path + ": " + std::strerror(errno);
      continue;
    }
    tpm::Bytes answer(4096);
    // The kernel takes a whole command in one write, or none of it.
    const bool sent = write(fd, command.data(), command.size()) == static_cast<ssize_t>(command.size());
    const ssize_t n = sent ? read(fd, answer.data(), answer.size()) : -1;
    const int err = errno;
    close(fd);
    if (n < 0) return Fail(std::string("talking to ") + path + " failed: " + std::strerror(err));
    answer.resize(static_cast<std::size_t>(n));
    return answer;
  }
  return Fail("no TPM device (" + tried + ")");
}

Result<tpm::DaState> ReadDa() {
  auto answer = Transact(tpm::ReadDaCommand());
  if (!answer) return Fail(answer.error());
  return tpm::ParseDaResponse(*answer);
}

}  // namespace

std::string StateLine() { return StateStatusLine(StateWords(), VarSource()); }

std::string TpmLine() {
  if (!UnlockedByTpm()) return "";
  auto da = ReadDa();
  return da ? tpm::DescribeDa(*da) : "cannot read the lockout counter: " + da.error();
}

void ResetTpmLockout(const std::function<void(int, const std::string&)>& log) {
  if (!UnlockedByTpm()) return;
  auto da = ReadDa();
  if (!da) {
    log(LOG_WARNING, "TPM: cannot read its dictionary-attack counter: " + da.error());
    return;
  }
  const std::string was = tpm::DescribeDa(*da);
  if (da->counter == 0 && !da->in_lockout) {
    log(LOG_INFO, "TPM: " + was + "; nothing to reset");
    return;
  }
  // A wrong lockout authorization would lock the lockout hierarchy itself: try only
  // with the empty one, and only when the TPM says it is empty.
  if (da->lockout_auth_set) {
    log(LOG_WARNING, "TPM: " + was +
                         "; not reset, since its lockout authorization is set (by its owner). At the limit the "
                         "state stays locked until the TPM forgives a count; reset it with that authorization: "
                         "tpm2_dictionarylockout --clear-lockout --auth=...");
    return;
  }
  auto answer = Transact(tpm::ResetCommand());
  Status reset = answer ? tpm::CheckResponse(*answer) : Status(Fail(answer.error()));
  if (!reset) {
    log(LOG_WARNING, "TPM: " + was + "; resetting it failed: " + reset.error());
    return;
  }
  auto now = ReadDa();
  log(LOG_INFO, "TPM: " + was + " (unclean shutdowns count against it); reset, now " +
                    (now ? tpm::DescribeDa(*now) : "unread: " + now.error()));
}

}  // namespace sprout::firstboot
