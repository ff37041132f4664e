#include "image/disk_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace sprout {

namespace {

std::uint64_t EndOf(int fd) {
  const off_t end = ::lseek(fd, 0, SEEK_END);
  return end < 0 ? 0 : static_cast<std::uint64_t>(end);
}

std::string Range(std::uint64_t offset, std::uint64_t size) {
  return std::to_string(size) + " bytes at offset " + std::to_string(offset);
}

}  // namespace

Result<DiskFile> DiskFile::Open(const std::filesystem::path& path, bool writable) {
  const int fd = ::open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) {
    return Fail("cannot open " + path.string() + (writable ? " for writing: " : ": ") + std::strerror(errno));
  }
  return DiskFile(path.string(), fd, EndOf(fd));
}

Result<DiskFile> DiskFile::Create(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Fail("cannot create " + path.string() + ": " + std::strerror(errno));
  return DiskFile(path.string(), fd, 0);
}

DiskFile::DiskFile(DiskFile&& other) noexcept : path_(std::move(other.path_)), fd_(other.fd_), size_(other.size_) {
  other.fd_ = -1;
}

DiskFile::~DiskFile() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::vector<std::uint8_t>> DiskFile::ReadUpTo(std::uint64_t offset, std::size_t size) const {
  std::vector<std::uint8_t> out(size);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd_, out.data() + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Fail("cannot read " + Range(offset, size) + " of " + path_ + ": " + std::strerror(errno));
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  out.resize(done);
  return out;
}

Result<std::vector<std::uint8_t>> DiskFile::Read(std::uint64_t offset, std::size_t size) const {
  auto got = ReadUpTo(offset, size);
  if (got && got->size() != size) {
    return Fail("cannot read " + Range(offset, size) + " of " + path_ + ": it ends after " +
                std::to_string(offset + got->size()) + " bytes");
  }
  return got;
}

Status DiskFile::Write(std::uint64_t offset, const std::uint8_t* data, std::size_t size) {
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return Fail("cannot write " + Range(offset, size) + " of " + path_ + ": " +
                  (n < 0 ? std::strerror(errno) : "no room"));
    }
    done += static_cast<std::size_t>(n);
  }
  size_ = std::max<std::uint64_t>(size_, offset + size);
  return Ok{};
}

Status DiskFile::Sync() {
  if (::fsync(fd_) != 0) return Fail("cannot sync " + path_ + ": " + std::strerror(errno));
  return Ok{};
}

Result<GptLayout> DiskFile::Gpt() const {
  auto head = ReadUpTo(0, 34 * kSectorSize);
  if (!head) return Fail(head.error());
  auto gpt = ParseGpt(*head, size_);
  if (!gpt) return Fail(path_ + ": " + gpt.error());
  return gpt;
}

Status CopyRange(const DiskFile& src, std::uint64_t from, DiskFile& dst, std::uint64_t to, std::uint64_t size) {
  constexpr std::uint64_t kChunk = 4 << 20;
  for (std::uint64_t done = 0; done < size;) {
    const auto n = static_cast<std::size_t>(std::min(kChunk, size - done));
    auto chunk = src.Read(from + done, n);
    if (!chunk) return Fail(chunk.error());
    if (auto s = dst.Write(to + done, *chunk); !s) return s;
    done += n;
  }
  return dst.Sync();
}

const Partition* FindPartitionByType(const std::vector<Partition>& partitions, const Guid& type) {
  const Partition* found = nullptr;
  for (const auto& p : partitions) {
    if (p.spec.type == type) found = &p;
  }
  return found;
}

const Partition* FindPartitionByLabel(const std::vector<Partition>& partitions, std::string_view label) {
  const Partition* found = nullptr;
  for (const auto& p : partitions) {
    if (p.spec.label == label) found = &p;
  }
  return found;
}

namespace {

Status Inside(const DiskFile& disk, const Partition& p, std::uint64_t offset, std::uint64_t size) {
  if (offset > p.size() || size > p.size() - offset) {
    return Fail(disk.path() + ": " + Range(offset, size) + " leave partition '" + p.spec.label + "' (" +
                std::to_string(p.size()) + " bytes)");
  }
  return Ok{};
}

}  // namespace

Result<std::vector<std::uint8_t>> ReadPartition(const DiskFile& disk, const Partition& p, std::uint64_t offset,
                                                std::size_t size) {
  if (auto s = Inside(disk, p, offset, size); !s) return Fail(s.error());
  return disk.Read(p.offset() + offset, size);
}

Status WritePartition(DiskFile& disk, const Partition& p, std::uint64_t offset, const std::vector<std::uint8_t>& data) {
  if (auto s = Inside(disk, p, offset, data.size()); !s) return s;
  return disk.Write(p.offset() + offset, data);
}

}  // namespace sprout
