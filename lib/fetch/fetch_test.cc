#include "fetch/fetch.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "util/fs.h"
#include "util/sha256.h"

using namespace sprout;

TEST_CASE("redirects never leave https and never reach file:", "[fetch]") {
  CHECK(RedirectProtocols("https://198.18.0.1/b/") == "https");
  CHECK(RedirectProtocols("http://198.18.0.1/b/") == "http,https");
  CHECK(RedirectProtocols("file:///srv/b/manifest.json").empty());
  CHECK(RedirectProtocols("ftp://x/").empty());
}

TEST_CASE("CopyTo: sparse in 4 KiB blocks, hashed, bounded", "[fetch]") {
  TempDir dir(std::filesystem::temp_directory_path(), "sprout-fetch-test");
  // Two data blocks, three zero blocks, then a short non-zero tail: 3 blocks of data.
  std::string content(5 * kSparseBlock + 100, '\0');
  content[10] = 'a';
  content[kSparseBlock + 4095] = 'b';
  content[5 * kSparseBlock + 99] = 'c';
  REQUIRE(WriteFileAtomic(dir.path() / "src", content));
  auto map = SparseMap(dir.path() / "src");
  REQUIRE(map);
  const std::uint64_t* data = &map->data_bytes;
  CHECK(*data == 3 * kSparseBlock);

  DownloadOptions sparse;
  sparse.sparse = true;
  auto got = CopyTo(dir.path() / "src", dir.path() / "dst", sparse);
  REQUIRE(got);
  CHECK(got->bytes == content.size());
  CHECK(got->data_bytes == *data);
  CHECK(got->sha256 == Sha256Hex(content));
  CHECK(ReadFile(dir.path() / "dst").value() == content);

  DownloadOptions short_limit = sparse;
  short_limit.max_bytes = content.size() - 1;
  auto longer = CopyTo(dir.path() / "src", dir.path() / "dst", short_limit);
  REQUIRE_FALSE(longer);
  CHECK(longer.error().find("longer than the " + std::to_string(content.size() - 1) + " bytes") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.path() / "dst"));

  DownloadOptions data_limit = sparse;
  data_limit.max_data_bytes = 2 * kSparseBlock;
  auto more_data = CopyTo(dir.path() / "src", dir.path() / "dst", data_limit);
  REQUIRE_FALSE(more_data);
  CHECK_THAT(more_data.error(), Catch::Matchers::Contains("more than the 8192 bytes of data"));

  auto missing = CopyTo(dir.path() / "none", dir.path() / "dst", sparse);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().ends_with("(not found)"));
}

TEST_CASE("BuildSparseMap: runs of data blocks, joined across short gaps, ending at the size", "[fetch]") {
  CHECK(BuildSparseMap({}, 100000, 0).empty());
  // Blocks 0-1, 3, then 10: without joining, three runs.
  CHECK(BuildSparseMap({0, 1, 3, 10}, 11 * kSparseBlock, 0) ==
        std::vector<DataExtent>{
            {0, 2 * kSparseBlock}, {3 * kSparseBlock, kSparseBlock}, {10 * kSparseBlock, kSparseBlock}});
  // A gap of one block is joined with a one-block allowance; six blocks are not.
  CHECK(BuildSparseMap({0, 1, 3, 10}, 11 * kSparseBlock, kSparseBlock) ==
        std::vector<DataExtent>{{0, 4 * kSparseBlock}, {10 * kSparseBlock, kSparseBlock}});
  // The last block is short: its extent ends at the size.
  CHECK(BuildSparseMap({2}, 2 * kSparseBlock + 100, 0) == std::vector<DataExtent>{{2 * kSparseBlock, 100}});
}

TEST_CASE("CheckExtents: ascending, apart, aligned, within the size", "[fetch]") {
  const std::uint64_t size = 10 * kSparseBlock + 100;
  CHECK(CheckExtents({}, size, "m"));
  CHECK(CheckExtents({{0, kSparseBlock}, {2 * kSparseBlock, 8 * kSparseBlock + 100}}, size, "m"));
  auto refused = [&](const std::vector<DataExtent>& e, const std::string& why) {
    auto s = CheckExtents(e, size, "m.json");
    REQUIRE_FALSE(s);
    CHECK_THAT(s.error(), Catch::Matchers::StartsWith("m.json: extent ") && Catch::Matchers::Contains(why));
  };
  refused({{0, 0}}, "is empty");
  refused({{kSparseBlock, kSparseBlock}, {0, kSparseBlock}}, "does not come after the one before it");
  refused({{0, 2 * kSparseBlock}, {kSparseBlock, kSparseBlock}}, "does not come after");
  refused({{0, kSparseBlock}, {kSparseBlock, kSparseBlock}}, "does not come after");  // touching: one run
  refused({{9 * kSparseBlock, 2 * kSparseBlock}}, "ends past the file's");
  refused({{~std::uint64_t{0} - 10, 20}}, "ends past the file's");
  refused({{100, kSparseBlock}}, "is not aligned");
  refused({{0, 100}}, "is not aligned");
}

TEST_CASE("SparseMap: a sparse file's data blocks and extents, holes skipped", "[fetch]") {
  TempDir dir(std::filesystem::temp_directory_path(), "sprout-fetch-test");
  // 64 MiB: data at 0, a zero block written at 4 KiB (data on disk, zeros in content),
  // data at 5 MiB + 10 (inside a block), and a short non-zero tail; the rest holes.
  const std::uint64_t size = (64 << 20) + 100;
  const auto file = dir.path() / "disk";
  {
    std::string first(kSparseBlock * 2, '\0');
    first[0] = 'a';
    REQUIRE(WriteFileAtomic(file, first));
    std::filesystem::resize_file(file, size);
    FILE* f = std::fopen(file.c_str(), "r+b");
    REQUIRE(f != nullptr);
    std::fseek(f, (5 << 20) + 10, SEEK_SET);
    std::fputc('b', f);
    std::fseek(f, static_cast<long>(size - 1), SEEK_SET);
    std::fputc('c', f);
    std::fclose(f);
  }
  auto map = SparseMap(file);
  REQUIRE(map);
  CHECK(map->data_bytes == 3 * kSparseBlock);
  CHECK(map->extents == std::vector<DataExtent>{{0, kSparseBlock}, {5 << 20, kSparseBlock}, {size - 100, 100}});
  CHECK(CheckExtents(map->extents, size, "disk"));
}
