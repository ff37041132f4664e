// DataExtent: a run of bytes of a sparse file that holds data (a disk image's map, as
// manifest.json records it and an update's ranged download reads it).
#pragma once

#include <cstdint>

namespace sprout {

// DataExtent is a run of a sparse file's bytes that holds data: every byte outside the
// file's extents is zero.
struct DataExtent {
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  bool operator==(const DataExtent&) const = default;
};

}  // namespace sprout
