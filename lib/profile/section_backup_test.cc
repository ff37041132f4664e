// section_backup.cc: the backup block.
#include <catch2/catch.hpp>

#include "profile/profile.h"
#include "profile/profile_testing.h"

using namespace sprout;
using sprout::testing::Errors;
using sprout::testing::Files;

TEST_CASE("backup: dir, interval and keep, with located errors; a child's block replaces its parent's", "[profile]") {
  Files f;
  f.Write("base.tar", "");
  f.Write("parent.yaml", "name: x\nbase: base.tar\nbackup:\n  dir: /var/lib/sprout/backups\n  keep: 3\n");
  auto child =
      f.Write("child.yaml", "extends: parent.yaml\nbackup:\n  dir: nfs://198.18.0.5/backups\n  interval: 1h\n");
  Diagnostics d;
  auto p = LoadProfile(child, d);
  INFO(d.Render());
  REQUIRE(p);
  CHECK(p->backup.present);
  CHECK(p->backup.dir == "nfs://198.18.0.5/backups");
  CHECK(p->backup.interval == 3600);
  CHECK(p->backup.keep == 0);  // replaced with the block: sprout-firstboot's default
  CHECK_THAT(ProfileToJson(*p), Catch::Contains(R"("backup": {)"));

  auto bad = f.Write("bad.yaml",
                     "name: x\nbase: base.tar\nbackup:\n  dir: nfs://nas/backups?uid=0\n  interval: often\n"
                     "  keep: 0\n  every: 1h\n");
  Diagnostics e;
  std::string out = Errors(bad, e);
  CHECK(e.error_count() == 4);
  CHECK_THAT(out, Catch::Contains(":7:3: error: unknown key 'every' in 'backup'"));
  CHECK_THAT(out, Catch::Contains(":4:8: error: 'backup.dir' must be an absolute folder on the node or "
                                  "nfs://HOST/PATH with nothing after the path; got 'nfs://nas/backups?uid=0'"));
  CHECK_THAT(out, Catch::Contains("a share's uid/gid go in each node's sprout.backup-dir, not in the image"));
  CHECK_THAT(out, Catch::Contains(":5:13: error: 'backup.interval' must be a duration of at least 1 s; got 'often'"));
  CHECK_THAT(out, Catch::Contains(":6:9: error: 'backup.keep' must be a whole number of bundles, at least 1; got '0'"));

  auto no_dir = f.Write("nodir.yaml", "name: x\nbase: base.tar\nbackup:\n  interval: 600\n");
  Diagnostics g;
  auto q = LoadProfile(no_dir, g);
  INFO(g.Render());
  REQUIRE(q);  // the sink may come per node (sprout.backup-dir)
  CHECK(q->backup.interval == 600);
}
