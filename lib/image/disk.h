// Writing a raw GPT disk image from a layout and one image file per partition.
#pragma once

#include <filesystem>
#include <vector>

#include "image/gpt.h"
#include "util/result.h"

namespace sprout {

// WriteRawDisk creates out as a sparse file of the layout's size, writes both GPT
// copies and copies contents[i] into partition i (an empty path leaves it zeroed).
// Blocks of zeros are skipped, so the file stays sparse.
Status WriteRawDisk(const GptLayout& layout, const std::vector<std::filesystem::path>& contents,
                    const std::filesystem::path& out);

}  // namespace sprout
