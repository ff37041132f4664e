// The bundle's size bound follows etcd's quota (bundle.h, kEtcdQuotaBytes): etcd's
// default, because no etcd sprout runs sets another. This test is the rule's keeper: a
// manifest or the formation daemon's etcd that starts to pass --quota-backend-bytes
// fails it until the bound follows.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "backup/bundle.h"
#include "formationd/etcd.h"
#include "util/fs.h"

using namespace sprout;

TEST_CASE("no etcd of sprout's sets a backend quota, so a bundle's bound is etcd's default quota", "[backup]") {
  CHECK(backup::kEtcdQuotaBytes == std::uint64_t{2} << 30);  // etcd's DefaultQuotaBytes (3.4 and 3.6)
  int manifests = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(std::string(SPROUT_SOURCE_DIR) + "/staticpods")) {
    if (!e.is_regular_file() || e.path().filename() != "etcd.yaml") continue;
    auto text = ReadFile(e.path());
    REQUIRE(text);
    INFO(e.path().string());
    CHECK(text->find("quota-backend-bytes") == std::string::npos);
    ++manifests;
  }
  CHECK(manifests >= 2);  // staticpods/etcd.yaml and staticpods/1.36/etcd.yaml
  for (const auto& arg : formation::EtcdCommandLine(formation::EtcdArgs{})) {
    INFO(arg);
    CHECK(arg.find("quota-backend-bytes") == std::string::npos);
  }
}
