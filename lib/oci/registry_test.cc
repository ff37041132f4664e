#include "oci/registry.h"

#include <catch2/catch.hpp>
#include <string>

#include "oci/cache.h"
#include "util/fs.h"

using namespace sprout;
using namespace sprout::oci;

TEST_CASE("a blob download whose partial file cannot be opened names the file and the reason", "[oci]") {
  TempDir t(fs::temp_directory_path(), "sprout-oci-fetch");
  Cache cache(t.path() / "cache");
  Descriptor blob;
  blob.digest = "sha256:" + std::string(64, 'd');
  blob.size = 10;
  // A non-empty directory where the partial file goes: fopen fails (EISDIR) even as
  // root, and the download gives up before it reaches the network.
  fs::create_directories(cache.PartialPath(blob.digest) / "in-the-way");

  ClientOptions o;
  o.attempts = 1;
  o.backoff_ms = 1;
  RegistryClient client("127.0.0.1:1", "sprout/app", o);  // nothing listens there
  auto s = client.FetchBlobs({blob}, cache);
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.error(), Catch::Contains("cannot download blob " + blob.digest + " of 127.0.0.1:1/sprout/app"));
  CHECK_THAT(s.error(), Catch::Contains("cannot open " + cache.PartialPath(blob.digest).string() +
                                        " for writing: Is a directory"));
  CHECK_FALSE(cache.Has(blob.digest, blob.size));
}
