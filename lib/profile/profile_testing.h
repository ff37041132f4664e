// Test helpers shared by lib/profile's tests: profile files in a scratch folder, and a
// profile's rendered errors.
#pragma once

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "profile/profile.h"
#include "util/fs.h"

namespace sprout::testing {

// Files writes profile files into a fresh directory and removes them afterwards.
struct Files {
  TempDir dir{std::filesystem::temp_directory_path(), "profile-test"};
  std::filesystem::path Write(const std::string& name, const std::string& text) {
    std::filesystem::path p = dir.path() / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p;
  }
};

// Errors loads file, checks that it is refused, and returns the errors as printed.
inline std::string Errors(const std::filesystem::path& file, Diagnostics& d) {
  auto p = LoadProfile(file, d);
  CHECK_FALSE(p.has_value());
  return d.Render();
}

}  // namespace sprout::testing
