// section_files.cc: overlays and files entries.
#include <catch2/catch.hpp>

#include "profile/profile.h"
#include "profile/profile_testing.h"

using namespace sprout;
using sprout::testing::Errors;
using sprout::testing::Files;

TEST_CASE("files entries are checked: absolute path, one source, octal mode, not under /var", "[profile]") {
  Files f;
  f.Write("base.tar", "");
  auto file = f.Write("p.yaml",
                      "name: x\nbase: base.tar\nfiles:\n"
                      "  - {path: etc/rel, content: a}\n"
                      "  - {path: /etc/both, content: a, source: base.tar}\n"
                      "  - {path: /etc/mode, content: a, mode: '0999'}\n"
                      "  - {path: /var/lib/x, content: a}\n"
                      "  - {path: /etc/none}\n");
  Diagnostics d;
  std::string out = Errors(file, d);
  CHECK(d.error_count() == 5);
  CHECK_THAT(out, Catch::Contains(":4:12: error: 'path' must be an absolute path"));
  CHECK_THAT(out, Catch::Contains(":5:5: error: a 'files' entry takes one of 'source', 'url' or 'content'"));
  CHECK_THAT(out, Catch::Contains(":6:41: error: 'mode' must be octal"));
  CHECK_THAT(out, Catch::Contains(":7:12: error: '/var/lib/x' lies under /var"));
  CHECK_THAT(out, Catch::Contains(":8:5: error: a 'files' entry needs 'source'"));
}
