#include "util/file_lock.h"

#include <catch2/catch.hpp>

#include "util/fs.h"

using namespace sprout;

TEST_CASE("FileLock: one holder at a time; the other waits, says so, and gives up at its bound", "[fs]") {
  TempDir t(fs::temp_directory_path(), "file-lock-test");
  const auto path = t.path() / "lock";
  auto first = FileLock::Acquire(path, std::chrono::milliseconds(0));
  REQUIRE(first.ok());
  int told = 0;
  auto second = FileLock::Acquire(path, std::chrono::milliseconds(300), [&told] { ++told; });
  REQUIRE_FALSE(second.ok());
  CHECK(told == 1);
  CHECK(second.error().find("another process has held " + path.string()) != std::string::npos);
  {
    FileLock moved = std::move(*first);  // the lock goes with the object, and is dropped when it dies
  }
  auto third = FileLock::Acquire(path, std::chrono::milliseconds(0), [&told] { ++told; });
  CHECK(third.ok());
  CHECK(told == 1);
}
