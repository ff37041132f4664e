#include "image/media.h"

#include <catch2/catch.hpp>

#include "util/fs.h"
#include "util/sign.h"

using namespace sprout;

TEST_CASE("LiveCmdline drops partition references and names the medium") {
  std::vector<std::string> disk{"root=/dev/mapper/root",
                                "ro",
                                "sprout.roothash=abc",
                                "sprout.verity.data=PARTUUID=1",
                                "sprout.verity.hash=PARTUUID=2",
                                "sprout.state=PARTUUID=3",
                                "sprout.config=PARTUUID=4",
                                "console=ttyS0,115200",
                                "quiet"};
  auto live = LiveCmdline(disk, kLiveIso);
  CHECK(live == std::vector<std::string>{"root=/dev/mapper/root", "ro", "sprout.roothash=abc", "sprout.live=iso",
                                         "fstab=no", "console=ttyS0,115200", "quiet"});
}

TEST_CASE("LiveCmdline drops the state's encryption words: a live medium has no state partition to encrypt") {
  std::vector<std::string> disk{"ro",
                                "sprout.roothash=abc",
                                "sprout.state=PARTUUID=3",
                                "sprout.config=PARTUUID=4",
                                "sprout.state.encryption=tpm2",
                                "sprout.state.without-tpm=refuse",
                                "quiet"};
  CHECK(LiveCmdline(disk, kLiveInitrd) ==
        std::vector<std::string>{"ro", "sprout.roothash=abc", "sprout.live=initrd", "fstab=no", "quiet"});
}

TEST_CASE("UkiLoaderEntry starts the UKI and repeats its command line, where the update code reads the root hash") {
  CHECK(UkiLoaderEntry("sprout n", "sprout/sprout.efi", {"ro", "sprout.roothash=ab"}) ==
        "title sprout n\nefi /sprout/sprout.efi\noptions ro sprout.roothash=ab\n");
}

TEST_CASE("IsoVolumeId is short, upper case and from the seed") {
  CHECK(IsoVolumeId("0123456789abcdef0123") == "SPROUT_0123456789ABCDEF");
  CHECK(IsoVolumeId("0123456789abcdef0123").size() <= 32);
}

TEST_CASE("IpxeScript loads kernel and initrd by relative name") {
  auto s = IpxeScript("sprout x", "vmlinuz", "initrd.img", {"ro", "sprout.live=initrd"});
  CHECK(s.starts_with("#!ipxe\n"));
  CHECK(s.find("\nkernel vmlinuz initrd=initrd.img ro sprout.live=initrd\n") != std::string::npos);
  CHECK(s.find("\ninitrd initrd.img\nboot\n") != std::string::npos);
}

TEST_CASE("CpioNewcHeader is 4-byte aligned newc") {
  auto h = CpioNewcHeader("sprout/roothash", 0100644, 65, 3, 1700000000);
  CHECK(h.substr(0, 6) == "070701");
  CHECK(h.size() % 4 == 0);
  CHECK(h.substr(6, 8) == "00000003");   // inode
  CHECK(h.substr(14, 8) == "000081A4");  // mode
  CHECK(h.substr(54, 8) == "00000041");  // file size 65
  CHECK(h.substr(94, 8) == "00000010");  // name size with NUL
  CHECK(h.substr(110, 15) == "sprout/roothash");
  CHECK(CpioPadding(65) == 3);
  CHECK(CpioPadding(64) == 0);
  CHECK(CpioTrailer().find("TRAILER!!!") == 110);
}

TEST_CASE("ParseSha256Sums reads sha256sum output and refuses paths outside") {
  std::string a(64, 'a');
  auto ok = ParseSha256Sums(a + "  x.raw\n" + a + " *pxe/initrd.img\n");
  REQUIRE(ok);
  REQUIRE(ok->size() == 2);
  CHECK((*ok)[1].file == "pxe/initrd.img");
  CHECK_FALSE(ParseSha256Sums(a + "  ../etc/passwd\n"));
  CHECK_FALSE(ParseSha256Sums(a + "  /etc/passwd\n"));
  CHECK_FALSE(ParseSha256Sums(std::string(64, 'G') + "  x\n"));
  CHECK_FALSE(ParseSha256Sums("abc  x\n"));
  CHECK_FALSE(ParseSha256Sums(""));
}

TEST_CASE("IsWorkDirName matches only build work directories") {
  CHECK(IsWorkDirName(".sprout-build-Ab12Cd"));
  CHECK_FALSE(IsWorkDirName("default.raw"));
  CHECK_FALSE(IsWorkDirName(".sprout-buil"));
}

TEST_CASE("Ed25519 keys sign and verify; any change to message or signature fails") {
  TempDir dir(std::filesystem::temp_directory_path(), "sprout-sign-test");
  REQUIRE(GenerateEd25519(dir.path() / "k.key", dir.path() / "k.pub"));
  const auto mode = std::filesystem::status(dir.path() / "k.key").permissions() & std::filesystem::perms::all;
  CHECK(mode == (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));
  CHECK_FALSE(GenerateEd25519(dir.path() / "k.key", dir.path() / "k2.pub"));  // never overwrites
  auto priv = ReadFile(dir.path() / "k.key");
  auto pub = ReadFile(dir.path() / "k.pub");
  REQUIRE(priv);
  REQUIRE(pub);
  auto sig = SignEd25519(*priv, "manifest");
  REQUIRE(sig);
  CHECK(sig->size() == 64);
  CHECK(VerifyEd25519(*pub, "manifest", *sig));
  CHECK_FALSE(VerifyEd25519(*pub, "manifesT", *sig));
  std::string bad = *sig;
  bad[10] = static_cast<char>(bad[10] ^ 1);
  CHECK_FALSE(VerifyEd25519(*pub, "manifest", bad));
  CHECK_FALSE(SignEd25519(*pub, "manifest"));  // a public key cannot sign
  // The public key a signed build carries into its root is keygen's .pub, byte for byte.
  auto derived = PublicKeyOf(*priv);
  REQUIRE(derived);
  CHECK(*derived == *pub);
  CHECK_FALSE(PublicKeyOf(*pub));
}
