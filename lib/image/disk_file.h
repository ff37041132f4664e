// DiskFile: a disk image or block device read and written at byte offsets, for the
// tools that work on an existing disk (update apply, inspect, personalize). Reads
// and writes are whole or an error that names the file; the partition helpers find a
// partition by type or label and keep a read or write inside it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "image/gpt.h"
#include "util/result.h"

namespace sprout {

class DiskFile {
 public:
  // Open opens an existing file or device, for reading or for both.
  static Result<DiskFile> Open(const std::filesystem::path& path, bool writable);
  // Create makes (or empties) a file to write, such as a partition's extracted copy.
  static Result<DiskFile> Create(const std::filesystem::path& path);

  DiskFile(DiskFile&& other) noexcept;
  DiskFile& operator=(DiskFile&& other) = delete;
  DiskFile(const DiskFile&) = delete;
  DiskFile& operator=(const DiskFile&) = delete;
  ~DiskFile();

  const std::string& path() const { return path_; }
  // size is the file's or device's length in bytes when it was opened.
  std::uint64_t size() const { return size_; }
  // fd is the descriptor, for what this class does not do (fstat, fchmod).
  int fd() const { return fd_; }

  // Read reads exactly size bytes at offset.
  Result<std::vector<std::uint8_t>> Read(std::uint64_t offset, std::size_t size) const;
  // ReadUpTo reads at most size bytes at offset: fewer at the end of the file.
  Result<std::vector<std::uint8_t>> ReadUpTo(std::uint64_t offset, std::size_t size) const;
  // Write writes all of data at offset.
  Status Write(std::uint64_t offset, const std::uint8_t* data, std::size_t size);
  Status Write(std::uint64_t offset, const std::vector<std::uint8_t>& data) {
    return Write(offset, data.data(), data.size());
  }
  // Sync flushes the file's data and metadata to the disk.
  Status Sync();

  // Gpt reads and parses the primary partition table (the first 34 sectors).
  Result<GptLayout> Gpt() const;

 private:
  DiskFile(std::string path, int fd, std::uint64_t size) : path_(std::move(path)), fd_(fd), size_(size) {}
  std::string path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

// CopyRange copies size bytes at from in src to to in dst, then syncs dst.
Status CopyRange(const DiskFile& src, std::uint64_t from, DiskFile& dst, std::uint64_t to, std::uint64_t size);

// FindPartitionByType is the last of the partitions with the type; nullptr when there is none.
const Partition* FindPartitionByType(const std::vector<Partition>& partitions, const Guid& type);
// FindPartitionByLabel is the last of the partitions with the GPT name; nullptr when there is none.
const Partition* FindPartitionByLabel(const std::vector<Partition>& partitions, std::string_view label);

// ReadPartition reads size bytes at offset inside the partition; a range that leaves it
// is an error, not a read of its neighbour.
Result<std::vector<std::uint8_t>> ReadPartition(const DiskFile& disk, const Partition& p, std::uint64_t offset,
                                                std::size_t size);
// WritePartition writes data at offset inside the partition, and refuses a range that
// leaves it.
Status WritePartition(DiskFile& disk, const Partition& p, std::uint64_t offset, const std::vector<std::uint8_t>& data);

}  // namespace sprout
