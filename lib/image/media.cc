#include "image/media.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "util/text.h"

namespace sprout {

std::vector<std::string> LiveCmdline(const std::vector<std::string>& disk_cmdline, std::string_view medium) {
  std::vector<std::string> out;
  for (const auto& word : disk_cmdline) {
    // A live medium has no state partition, so nothing of the state's (its encryption
    // either: a machine without a TPM must still boot the medium).
    if (word.starts_with("sprout.verity.") || word.starts_with("sprout.state=") || word.starts_with("sprout.state.") ||
        word.starts_with("sprout.config=")) {
      continue;
    }
    out.push_back(word);
    // The medium goes right after the root hash, before the console and profile words.
    if (word.starts_with("sprout.roothash=")) {
      out.push_back("sprout.live=" + std::string(medium));
      out.emplace_back("fstab=no");
    }
  }
  return out;
}

std::string LoaderEntry(const std::string& title, const std::vector<std::string>& cmdline) {
  return "title " + title +
         "\n"
         "linux /sprout/vmlinuz\n"
         "initrd /sprout/initrd.img\n"
         "options " +
         Join(cmdline, " ") + "\n";
}

std::string UkiLoaderEntry(const std::string& title, const std::string& uki_path,
                           const std::vector<std::string>& cmdline) {
  return "title " + title + "\nefi /" + uki_path + "\noptions " + Join(cmdline, " ") + "\n";
}

std::string IsoVolumeId(const std::string& seed) {
  std::string id = "SPROUT_";
  for (std::size_t i = 0; i < 16 && i < seed.size(); ++i) {
    id += static_cast<char>(std::toupper(static_cast<unsigned char>(seed[i])));
  }
  return id;
}

std::string IpxeScript(const std::string& title, const std::string& kernel, const std::string& initrd,
                       const std::vector<std::string>& cmdline) {
  // initrd= names the initrd for the kernel's EFI stub; BIOS boots ignore it.
  return "#!ipxe\n"
         "# " +
         title +
         ": the root file system and its verity hash tree are inside the initrd.\n"
         "# File names are relative to this script's URL (TFTP or HTTP).\n"
         "kernel " +
         kernel + " initrd=" + initrd + " " + Join(cmdline, " ") +
         "\n"
         "initrd " +
         initrd +
         "\n"
         "boot\n";
}

std::string CpioNewcHeader(const std::string& name, std::uint32_t mode, std::uint64_t size, std::uint32_t ino,
                           std::int64_t mtime) {
  char fields[6 + 13 * 8 + 1];
  const std::uint32_t nlink = (mode & 0170000) == 0040000 ? 2 : 1;
  std::snprintf(fields, sizeof fields, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X", ino, mode, 0u, 0u,
                nlink, static_cast<std::uint32_t>(mtime), static_cast<std::uint32_t>(size), 0u, 0u, 0u, 0u,
                static_cast<std::uint32_t>(name.size() + 1), 0u);
  std::string out(fields, 110);
  out += name;
  out += '\0';
  out.append((4 - out.size() % 4) % 4, '\0');
  return out;
}

std::size_t CpioPadding(std::uint64_t size) { return static_cast<std::size_t>((4 - size % 4) % 4); }

std::string CpioTrailer() { return CpioNewcHeader("TRAILER!!!", 0, 0, 0, 0); }

Result<std::vector<SumLine>> ParseSha256Sums(std::string_view text) {
  std::vector<SumLine> out;
  int number = 0;
  for (const auto& line : Split(text, '\n')) {
    ++number;
    if (line.empty()) continue;
    auto where = "sha256sums line " + std::to_string(number);
    // "HEX  NAME" (text mode) or "HEX *NAME" (binary mode), as sha256sum writes them.
    if (line.size() < 67 || line[64] != ' ' || (line[65] != ' ' && line[65] != '*')) {
      return Fail(where + " is not '<sha256>  <file>'");
    }
    SumLine s{line.substr(0, 64), line.substr(66)};
    if (!std::all_of(s.sha256.begin(), s.sha256.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); })) {
      return Fail(where + ": '" + s.sha256 + "' is not 64 lower-case hex digits");
    }
    if (s.file.starts_with('/') || s.file == ".." || s.file.starts_with("../") ||
        s.file.find("/../") != std::string::npos || s.file.ends_with("/..")) {
      return Fail(where + ": '" + s.file + "' must be a path inside the output directory");
    }
    out.push_back(std::move(s));
  }
  if (out.empty()) return Fail("sha256sums lists no files");
  return out;
}

bool IsWorkDirName(std::string_view name) { return name.starts_with(".sprout-build-"); }

}  // namespace sprout
