#include "image/disk.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace sprout {

namespace {

Status PwriteAll(int fd, const std::uint8_t* data, std::size_t size, std::uint64_t offset, const std::string& what) {
  while (size > 0) {
    ssize_t n = ::pwrite(fd, data, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Fail("cannot write " + what + ": " + std::strerror(errno));
    data += n;
    size -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
  return Ok{};
}

}  // namespace

Status WriteRawDisk(const GptLayout& layout, const std::vector<std::filesystem::path>& contents,
                    const std::filesystem::path& out) {
  int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Fail("cannot create " + out.string() + ": " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  if (::ftruncate(fd, static_cast<off_t>(layout.disk_size)) != 0) {
    return Fail("cannot size " + out.string() + ": " + std::strerror(errno));
  }
  GptBytes tables = RenderGpt(layout);
  if (auto s = PwriteAll(fd, tables.head.data(), tables.head.size(), 0, out.string()); !s) return s;
  if (auto s = PwriteAll(fd, tables.tail.data(), tables.tail.size(), tables.tail_offset, out.string()); !s) return s;

  std::vector<std::uint8_t> buf(1 << 20);
  for (std::size_t i = 0; i < contents.size() && i < layout.partitions.size(); ++i) {
    if (contents[i].empty()) continue;
    const auto& part = layout.partitions[i];
    int in = ::open(contents[i].c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) return Fail("cannot read " + contents[i].string() + ": " + std::strerror(errno));
    std::uint64_t pos = 0;
    Status status = Ok{};
    for (;;) {
      ssize_t n = ::read(in, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        status = Fail("cannot read " + contents[i].string() + ": " + std::strerror(errno));
        break;
      }
      if (n == 0) break;
      if (pos + static_cast<std::uint64_t>(n) > part.size()) {
        status = Fail(contents[i].string() + " (" + std::to_string(pos + static_cast<std::uint64_t>(n)) +
                      "+ bytes) does not fit its partition '" + part.spec.label + "' of " +
                      std::to_string(part.size()) + " bytes");
        break;
      }
      // Skip 4 KiB blocks of zeros so the image stays sparse.
      for (std::size_t off = 0; off < static_cast<std::size_t>(n); off += 4096) {
        std::size_t len = std::min<std::size_t>(4096, static_cast<std::size_t>(n) - off);
        const std::uint8_t* block = buf.data() + off;
        bool zero = std::all_of(block, block + len, [](std::uint8_t b) { return b == 0; });
        if (zero) continue;
        status = PwriteAll(fd, block, len, part.offset() + pos + off, out.string());
        if (!status) break;
      }
      if (!status) break;
      pos += static_cast<std::uint64_t>(n);
    }
    ::close(in);
    if (!status) return status;
  }
  if (::fsync(fd) != 0) return Fail("cannot flush " + out.string() + ": " + std::strerror(errno));
  return Ok{};
}

}  // namespace sprout
