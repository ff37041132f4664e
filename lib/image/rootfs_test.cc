#include "image/rootfs.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "image/fsimages.h"
#include "util/fs.h"
#include "util/process.h"
#include "util/sha256.h"

using namespace sprout;

namespace {

struct TarEntry {
  std::string path;
  int type;
  unsigned mode;
  long uid;
  long mtime;
  std::string data;
};

std::vector<TarEntry> ReadTar(const fs::path& file) {
  std::vector<TarEntry> out;
  struct archive* a = archive_read_new();
  archive_read_support_format_all(a);
  archive_read_support_filter_all(a);
  REQUIRE(archive_read_open_filename(a, file.c_str(), 65536) == ARCHIVE_OK);
  struct archive_entry* e;
  while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
    TarEntry t{archive_entry_pathname(e),
               static_cast<int>(archive_entry_filetype(e)),
               archive_entry_perm(e),
               static_cast<long>(archive_entry_uid(e)),
               static_cast<long>(archive_entry_mtime(e)),
               {}};
    char buf[4096];
    la_ssize_t n;
    while ((n = archive_read_data(a, buf, sizeof buf)) > 0) t.data.append(buf, static_cast<std::size_t>(n));
    if (t.path.size() > 1 && t.path.back() == '/') t.path.pop_back();  // tar marks directories with '/'
    out.push_back(t);
  }
  archive_read_free(a);
  return out;
}

// MakeBase builds a small base tree and returns it; the tarball form is made with GNU tar.
fs::path MakeBase(const fs::path& dir) {
  fs::path root = dir / "base";
  fs::create_directories(root / "etc");
  fs::create_directories(root / "var/lib/dpkg");
  fs::create_directories(root / "boot");
  std::ofstream(root / "etc/os-release") << "ID=debian\n";
  std::ofstream(root / "etc/motd") << "from base\n";
  std::ofstream(root / "var/lib/dpkg/status") << "Package: x\n";
  std::ofstream(root / "boot/vmlinuz-6.1.0-1-amd64") << "kernel";
  fs::create_symlink("../run", root / "var/run");
  return root;
}

Result<std::string> Assemble(const RootSpec& spec, const fs::path& out) {
  int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Fail("open");
  auto r = WriteRootTar(spec, fd);
  ::close(fd);
  if (!r) return Fail(r.error());
  return Sha256File(out);
}

}  // namespace

TEST_CASE("Root assembly gives the same bytes for the same inputs, whatever the build directory", "[rootfs]") {
  TempDir t1(fs::temp_directory_path(), "rootfs-a"), t2(fs::temp_directory_path(), "rootfs-b");
  std::string first, second;
  for (auto* t : {&t1, &t2}) {
    fs::path base = MakeBase(t->path());
    // Different host mtimes on the two trees must not leak into the output.
    fs::last_write_time(base / "etc/motd", fs::file_time_type::clock::now() - std::chrono::hours(t == &t1 ? 1 : 50));
    fs::path tarball = t->path() / "base.tar";
    auto made = RunChecked({{"tar", "-C", base.string(), "--sort=name", "-cf", tarball.string(), "."}});
    REQUIRE(made.ok());
    fs::create_directories(t->path() / "overlay/etc");
    std::ofstream(t->path() / "overlay/etc/motd") << "from overlay\n";
    RootSpec spec;
    spec.base = tarball;
    spec.mtime = 1700000000;
    REQUIRE(AddTree(t->path() / "overlay", "", spec.additions).ok());
    spec.additions.push_back({RootEntry::Kind::kFile, "usr/lib/sprout/tool", "#!/bin/sh\n", {}, 0755});
    auto digest = Assemble(spec, t->path() / "root.tar");
    REQUIRE(digest.ok());
    (t == &t1 ? first : second) = *digest;
  }
  CHECK(first == second);

  // A different time stamp gives a different stream: the comparison above can fail.
  fs::path base = MakeBase(t1.path() / "again");
  RootSpec spec;
  spec.base = base;
  spec.mtime = 1700000001;
  auto other = Assemble(spec, t1.path() / "other.tar");
  REQUIRE(other.ok());
  CHECK(*other != first);
}

TEST_CASE("Root assembly moves /var to the factory copy, applies additions and makes parents", "[rootfs]") {
  TempDir t(fs::temp_directory_path(), "rootfs-c");
  fs::path base = MakeBase(t.path());
  RootSpec spec;
  spec.base = base;
  spec.mtime = 1234;
  spec.capture_prefixes = {"boot/vmlinuz-"};
  spec.additions.push_back({RootEntry::Kind::kFile, "etc/motd", "replaced\n", {}, 0644});
  spec.additions.push_back({RootEntry::Kind::kFile, "usr/lib/sprout/sprout-firstboot", "ELF", {}, 0755});
  spec.additions.push_back({RootEntry::Kind::kSymlink, "etc/systemd/system/x.service", "/dev/null", {}, 0777});
  fs::path out = t.path() / "root.tar";
  int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  auto summary = WriteRootTar(spec, fd);
  ::close(fd);
  REQUIRE(summary.ok());
  CHECK(summary->captured.at("boot/vmlinuz-6.1.0-1-amd64") == "kernel");

  auto entries = ReadTar(out);
  std::map<std::string, TarEntry> by;
  std::vector<std::string> order;
  for (const auto& e : entries) {
    CHECK(by.count(e.path) == 0);  // no path twice
    by[e.path] = e;
    order.push_back(e.path);
    CHECK(e.mtime == 1234);
  }
  CHECK(by.count("var") == 1);
  CHECK(by["var"].type == AE_IFDIR);
  CHECK(by.count("var/lib/dpkg/status") == 0);
  CHECK(by["usr/share/factory/var/lib/dpkg/status"].data == "Package: x\n");
  CHECK(by["usr/share/factory/var/run"].type == AE_IFLNK);
  CHECK(by["etc/motd"].data == "replaced\n");
  CHECK(by["usr/lib/sprout/sprout-firstboot"].mode == 0755);
  CHECK(by["usr/lib/sprout/sprout-firstboot"].uid == 0);
  CHECK(by["etc/systemd/system/x.service"].type == AE_IFLNK);
  // Parents of additions exist and come before their children.
  for (const char* parent : {"usr", "usr/lib", "usr/lib/sprout", "etc/systemd", "etc/systemd/system"}) {
    INFO(parent);
    REQUIRE(by.count(parent) == 1);
    CHECK(by[parent].type == AE_IFDIR);
    auto pos = std::find(order.begin(), order.end(), parent);
    auto child = std::find_if(order.begin(), order.end(),
                              [&](const std::string& p) { return p.starts_with(std::string(parent) + "/"); });
    CHECK(pos < child);
  }
}

TEST_CASE("An initrd extension is a newc cpio the kernel can unpack", "[rootfs]") {
  auto cpio = MakeCpio({{RootEntry::Kind::kDir, "sprout", "", {}, 0755},
                        {RootEntry::Kind::kFile, "sprout/local-bottom", "#!/bin/sh\n", {}, 0755}},
                       42);
  REQUIRE(cpio.ok());
  CHECK(cpio->starts_with("070701"));  // newc magic
  CHECK(cpio->find("TRAILER!!!") != std::string::npos);
  CHECK(cpio->size() % 4 == 0);
  auto again = MakeCpio({{RootEntry::Kind::kFile, "sprout/local-bottom", "#!/bin/sh\n", {}, 0755},
                         {RootEntry::Kind::kDir, "sprout", "", {}, 0755}},
                        42);
  REQUIRE(again.ok());
  CHECK(*again == *cpio);  // entry order does not matter
}
