#include "fetch/fetch.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

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
  auto data = SparseDataBytes(dir.path() / "src");
  REQUIRE(data);
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
