// Golden files for the unit tests: text the code renders, kept under tests/golden/ so a
// change to it shows in review. (`sprout cis` renders its own: docs/cis.md.)
#pragma once

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "util/fs.h"

namespace sprout::testing {

// CheckGolden compares text with tests/golden/RELATIVE; with SPROUT_UPDATE_GOLDEN=1 in
// the environment it rewrites the file instead (then review the diff).
inline void CheckGolden(const std::string& relative, const std::string& text) {
  const std::filesystem::path golden = std::filesystem::path(SPROUT_SOURCE_DIR) / "tests" / "golden" / relative;
  if (std::getenv("SPROUT_UPDATE_GOLDEN") != nullptr) {
    std::filesystem::create_directories(golden.parent_path());
    REQUIRE(WriteFileAtomic(golden, text).ok());
  }
  auto want = ReadFile(golden);
  INFO("golden file " << golden << " (SPROUT_UPDATE_GOLDEN=1 rewrites it)");
  REQUIRE(want.ok());
  CHECK(text == *want);
}

}  // namespace sprout::testing
