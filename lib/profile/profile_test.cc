#include "profile/profile.h"

#include <catch2/catch.hpp>

#include "profile/profile_testing.h"

using namespace sprout;
using sprout::testing::Errors;
using sprout::testing::Files;

TEST_CASE("The default profile is valid", "[profile]") {
  Diagnostics d;
  auto p = LoadProfile(fs::path(SPROUT_SOURCE_DIR) / "profiles/default.yaml", d);
  INFO(d.Render());
  REQUIRE(p);
  CHECK(p->name == "default");
  CHECK(p->role == Role::kControlPlane);
  CHECK(p->base.filename() == "base");
  CHECK(p->esp_size == 128ull << 20);
}

TEST_CASE("A profile with three mistakes gets three errors, each with line, column and hint", "[profile]") {
  Files f;
  f.Write("base.tar", "");
  auto file = f.Write("bad.yaml",
                      "name: edge\n"
                      "base: base.tar\n"
                      "formts: [raw]\n"
                      "role: master\n"
                      "disk:\n"
                      "  espSize: lots\n");
  Diagnostics d;
  std::string out = Errors(file, d);
  CHECK(d.error_count() == 3);
  std::string shown = file.string();
  shown = fs::path(shown).lexically_relative(fs::current_path()).string();
  if (shown.starts_with("..")) shown = file.string();
  CHECK(out == shown +
                   ":3:1: error: unknown key 'formts' in the profile\n"
                   "  formts: [raw]\n"
                   "  ^\n"
                   "  hint: did you mean 'formats'?\n" +
                   shown +
                   ":4:7: error: 'role' must be 'control-plane' or 'worker'; got 'master'\n"
                   "  role: master\n"
                   "        ^\n"
                   "  hint: control-plane nodes run etcd and the API server; workers run only workloads\n" +
                   shown +
                   ":6:12: error: 'disk.espSize' must be a size; got 'lots'\n"
                   "    espSize: lots\n"
                   "             ^\n"
                   "  hint: write a number with a unit, such as 64MiB or 2GiB\n");
}

TEST_CASE("Unknown nested keys suggest the nearest known key", "[profile]") {
  Files f;
  f.Write("base.tar", "");
  auto file = f.Write("p.yaml", "name: x\nbase: base.tar\ndisk:\n  stateSzie: 1GiB\nkernel:\n  cmdlin: [quiet]\n");
  Diagnostics d;
  std::string out = Errors(file, d);
  CHECK(d.error_count() == 2);
  CHECK_THAT(out, Catch::Contains(":4:3: error: unknown key 'stateSzie' in 'disk'"));
  CHECK_THAT(out, Catch::Contains("hint: did you mean 'stateSize'?"));
  CHECK_THAT(out, Catch::Contains(":6:3: error: unknown key 'cmdlin' in 'kernel'"));
  CHECK_THAT(out, Catch::Contains("hint: did you mean 'cmdline'?"));
}

TEST_CASE("extends merges maps, appends lists and replaces files by path", "[profile]") {
  Files f;
  f.Write("base.tar", "");
  f.Write("ov1/etc/a", "a");
  f.Write("ov2/etc/b", "b");
  f.Write("parent.yaml",
          "name: parent\n"
          "base: base.tar\n"
          "role: worker\n"
          "kernel: {cmdline: [quiet]}\n"
          "disk: {espSize: 64MiB, stateSize: 512MiB}\n"
          "overlays: [ov1]\n"
          "files:\n"
          "  - {path: /etc/x, content: parent}\n"
          "  - {path: /etc/y, content: kept}\n");
  auto child = f.Write("sub/child.yaml",
                       "extends: ../parent.yaml\n"
                       "name: child\n"
                       "kernel: {cmdline: [loglevel=3]}\n"
                       "disk: {stateSize: 1GiB}\n"
                       "overlays: [../ov2]\n"
                       "files:\n"
                       "  - {path: /etc/x, content: child, mode: '0600'}\n");
  Diagnostics d;
  auto p = LoadProfile(child, d);
  INFO(d.Render());
  REQUIRE(p);
  CHECK(p->name == "child");
  CHECK(p->role == Role::kWorker);  // inherited
  CHECK(p->cmdline == std::vector<std::string>{"quiet", "loglevel=3"});
  CHECK(p->esp_size == 64ull << 20);   // inherited inside the merged map
  CHECK(p->state_size == 1ull << 30);  // overridden
  REQUIRE(p->overlays.size() == 2);
  CHECK(p->overlays[0].filename() == "ov1");
  CHECK(p->overlays[1].filename() == "ov2");
  REQUIRE(p->files.size() == 2);
  CHECK(p->files[0].path == "/etc/x");
  CHECK(*p->files[0].content == "child");
  CHECK(p->files[0].mode == 0600);
  CHECK(*p->files[1].content == "kept");
  CHECK(p->chain.size() == 2);
}

TEST_CASE("extends cycles and missing parents are errors at the extends line", "[profile]") {
  Files f;
  f.Write("a.yaml", "extends: b.yaml\nname: a\n");
  auto b = f.Write("b.yaml", "extends: a.yaml\nname: b\n");
  Diagnostics d;
  std::string out = Errors(b, d);
  CHECK_THAT(out, Catch::Contains(":1:10: error: 'extends' makes a cycle"));

  auto c = f.Write("c.yaml", "extends: nowhere.yaml\nname: c\n");
  Diagnostics d2;
  out = Errors(c, d2);
  CHECK_THAT(out, Catch::Contains(":1:10: error: the profile to extend"));
  CHECK_THAT(out, Catch::Contains("does not exist"));
}

TEST_CASE("Errors in a parent and in the child are all reported in one run", "[profile]") {
  Files f;
  f.Write("parent.yaml", "name: Bad_Name\nbase: missing-dir\n");
  auto child = f.Write("child.yaml", "extends: parent.yaml\nformats: [iso9660]\n");
  Diagnostics d;
  std::string out = Errors(child, d);
  CHECK(d.error_count() == 3);
  CHECK_THAT(out, Catch::Contains("parent.yaml:1:7: error: 'name' must be"));
  CHECK_THAT(out, Catch::Contains("parent.yaml:2:7: error: base 'missing-dir' does not exist"));
  CHECK_THAT(out, Catch::Contains("child.yaml:2:11: error: unknown format 'iso9660'"));
}

TEST_CASE("Bad YAML is reported with its position", "[profile]") {
  Files f;
  auto file = f.Write("broken.yaml", "name: x\nbase: [unclosed\n");
  Diagnostics d;
  std::string out = Errors(file, d);
  CHECK(d.error_count() == 1);
  CHECK_THAT(out, Catch::Contains("error: this is not valid YAML"));
  CHECK_THAT(out, Catch::Contains("broken.yaml:3:1: error: this is not valid YAML"));
}

TEST_CASE("RecordedPath names a path relative to the profile's folder, never absolutely", "[profile]") {
  CHECK(RecordedPath("/src/sprout/profiles/overlay", "/src/sprout/profiles") == "overlay");
  CHECK(RecordedPath("/src/sprout/images/base", "/src/sprout/profiles") == "../images/base");
  CHECK(RecordedPath("/src/sprout/profiles/./a/../b", "/src/sprout/profiles") == "b");
  CHECK(RecordedPath("/src/sprout/profiles", "/src/sprout/profiles") == ".");
  CHECK(RecordedPath("/other/tree/file", "/src/sprout/profiles") == "../../../other/tree/file");
  CHECK(RecordedPath("", "/src/sprout/profiles").empty());
  // A checkout moved elsewhere records the same text.
  CHECK(RecordedPath("/tmp/x/clone/images/etcd", "/tmp/x/clone/profiles") ==
        RecordedPath("/work/sprout/images/etcd", "/work/sprout/profiles"));
}

TEST_CASE("The recorded profile is the same from any working directory and through a symlink", "[profile]") {
  Files f;
  f.Write("tree/profiles/p.yaml",
          "name: p\nbase: ../images/base\noverlays: [overlay]\nshoot: shoot.yaml\n"
          "files:\n  - {path: /etc/motd, source: overlay/motd}\n"
          "images:\n  - {ref: localhost/sprout/etcd:3.4, source: 'recipe:../images/etcd'}\n");
  f.Write("tree/profiles/shoot.yaml", std::string(R"(apiVersion: core.gardener.cloud/v1beta1
kind: Shoot
metadata: {name: edge, namespace: garden}
spec:
  kubernetes: {version: "1.20.2"}
  networking: {pods: 10.244.0.0/16, services: 10.96.0.0/12, nodes: 198.18.0.0/24}
  provider:
    workers:
      - {name: cp, controlPlane: {}, minimum: 1, maximum: 1}
)"));
  f.Write("tree/profiles/overlay/motd", "hi\n");
  fs::create_directories(f.dir.path() / "tree/images/base");
  fs::create_directories(f.dir.path() / "tree/images/etcd");
  fs::create_directories(f.dir.path() / "elsewhere");
  fs::create_symlink(f.dir.path() / "tree/profiles/p.yaml", f.dir.path() / "elsewhere/link.yaml");

  const fs::path before = fs::current_path();
  auto load = [&](const fs::path& cwd, const fs::path& profile) {
    fs::current_path(cwd);
    Diagnostics d;
    auto p = LoadProfile(profile, d);
    fs::current_path(before);
    INFO(d.Render());
    REQUIRE(p);
    return ProfileToJson(*p);
  };
  const std::string reference = load(f.dir.path() / "tree", "profiles/p.yaml");
  CHECK(reference.find(f.dir.path().string()) == std::string::npos);
  CHECK(reference.find("\"base\": \"../images/base\"") != std::string::npos);
  CHECK(reference.find("\"source\": \"recipe:../images/etcd\"") != std::string::npos);
  CHECK(reference.find("\"shoot\": \"shoot.yaml\"") != std::string::npos);
  CHECK(load(f.dir.path() / "tree/profiles", "p.yaml") == reference);
  CHECK(load(f.dir.path() / "elsewhere", f.dir.path() / "tree/profiles/p.yaml") == reference);
  CHECK(load(f.dir.path() / "elsewhere", "link.yaml") == reference);
  CHECK(load("/", f.dir.path() / "elsewhere/link.yaml") == reference);
}
