#include "update/checks.h"

#include <catch2/catch.hpp>
#include <filesystem>

#include "util/fs.h"
#include "util/sign.h"

using namespace sprout;
using namespace sprout::update;

namespace {

struct Keys {
  TempDir dir{std::filesystem::temp_directory_path(), "sprout-trust-test"};
  std::string priv, pub, other_priv, other_pub;
  Keys() {
    REQUIRE(GenerateEd25519(dir.path() / "k.key", dir.path() / "k.pub"));
    REQUIRE(GenerateEd25519(dir.path() / "o.key", dir.path() / "o.pub"));
    priv = ReadFile(dir.path() / "k.key").value();
    pub = ReadFile(dir.path() / "k.pub").value();
    other_priv = ReadFile(dir.path() / "o.key").value();
    other_pub = ReadFile(dir.path() / "o.pub").value();
  }
};

TrustInputs Trusting(const std::optional<std::string>& key, const std::string& manifest,
                     const std::optional<std::string>& sig) {
  TrustInputs in;
  in.trusted_key = key;
  in.trusted_key_name = "/etc/sprout/update.pub";
  in.manifest = manifest;
  in.signature = sig;
  in.source = "http://198.18.0.1:8081/";
  return in;
}

}  // namespace

TEST_CASE("trust: a node with a trust root takes only builds signed by it", "[update][trust]") {
  Keys k;
  const std::string manifest = "{\"rootHash\":\"b\"}\n";
  auto good = Trusting(k.pub, manifest, SignEd25519(k.priv, manifest).value());
  auto v = CheckTrust(good);
  REQUIRE(v);
  CHECK(v->verified);
  CHECK(v->note == "signature of manifest.json checked with /etc/sprout/update.pub");

  auto unsigned_build = Trusting(k.pub, manifest, std::nullopt);
  auto r = CheckTrust(unsigned_build);
  REQUIRE_FALSE(r);
  CHECK(r.error().find("is not signed (no manifest.json.sig)") != std::string::npos);
  unsigned_build.insecure_unsigned = true;  // the flag never overrides a trust root
  CHECK_FALSE(CheckTrust(unsigned_build));

  auto wrong = Trusting(k.pub, manifest, SignEd25519(k.other_priv, manifest).value());
  r = CheckTrust(wrong);
  REQUIRE_FALSE(r);
  CHECK(r.error().find("signature does not match") != std::string::npos);
  wrong.insecure_unsigned = true;
  CHECK_FALSE(CheckTrust(wrong));

  auto changed = Trusting(k.pub, manifest + " ", SignEd25519(k.priv, manifest).value());
  CHECK_FALSE(CheckTrust(changed));
}

TEST_CASE("trust: a node without a trust root refuses every build unless --insecure-unsigned", "[update][trust]") {
  Keys k;
  const std::string manifest = "{}";
  for (const auto& sig :
       {std::optional<std::string>(), std::optional<std::string>(SignEd25519(k.priv, manifest).value())}) {
    auto in = Trusting(std::nullopt, manifest, sig);
    auto r = CheckTrust(in);
    REQUIRE_FALSE(r);
    CHECK(r.error().find("this node has no update trust root (/etc/sprout/update.pub)") != std::string::npos);
    CHECK(r.error().find("--insecure-unsigned") != std::string::npos);
    in.insecure_unsigned = true;
    auto v = CheckTrust(in);
    REQUIRE(v);
    CHECK_FALSE(v->verified);
    CHECK(v->note.starts_with("WARNING: --insecure-unsigned: "));
  }
}

TEST_CASE("room: the download must leave the etcd floor free", "[update]") {
  const std::uint64_t mib = 1 << 20;
  CHECK(CheckRoom(1000 * mib, 300 * mib, kEtcdFloor, "/var/lib/sprout"));
  CHECK(CheckRoom(556 * mib, 300 * mib, kEtcdFloor, "/var/lib/sprout"));  // exactly the floor left
  auto r = CheckRoom(555 * mib, 300 * mib, kEtcdFloor, "/var/lib/sprout");
  REQUIRE_FALSE(r);
  CHECK(r.error() ==
        "not enough room in /var/lib/sprout: the build needs 300.0 MiB and 256.0 MiB must stay free for etcd, but "
        "only 555.0 MiB is free; free space there, or set another floor with --min-free BYTES (docs/updates.md)");
  CHECK_FALSE(CheckRoom(100 * mib, 300 * mib, 0, "/var"));  // less free than the build itself
}

TEST_CASE("gate: a boot that cannot be read is not committed, unless it cannot be a trial", "[update]") {
  const std::string disk = "root=/dev/mapper/root sprout.roothash=abc sprout.verity.data=PARTUUID=x";
  auto v = UnreadableBoot(disk, std::nullopt, "cannot mount the ESP");
  CHECK_FALSE(v.pass);
  CHECK(v.message.starts_with("cannot mount the ESP; this boot cannot be judged, so it is not committed"));
  CHECK_FALSE(UnreadableBoot(disk, true, "x").pass);  // systemd-boot says: a counted entry
  CHECK(UnreadableBoot(disk, false, "x").pass);       // systemd-boot says: no counter, committed
  CHECK(UnreadableBoot("root=/dev/mapper/root sprout.roothash=abc sprout.live=iso fstab=no", std::nullopt, "x").pass);
  CHECK_FALSE(UnreadableBoot("", std::nullopt, "cannot read /proc/cmdline").pass);
}

TEST_CASE("state encryption: an update keeps the node's encryption word; without-tpm may not go from plain to refuse",
          "[update][state]") {
  using Words = std::vector<std::string>;
  const Words plain = {"ro", "sprout.roothash=abc", "sprout.state=PARTUUID=s", "panic=10"};
  const Words refuse = {"ro", "sprout.state=PARTUUID=s", "sprout.state.encryption=tpm2",
                        "sprout.state.without-tpm=refuse"};
  const Words allow_plain = {"ro", "sprout.state=PARTUUID=s", "sprout.state.encryption=tpm2",
                             "sprout.state.without-tpm=plain"};
  const Words tpm2_only = {"ro", "sprout.state.encryption=tpm2"};  // no without-tpm: the initrd refuses

  SECTION("the same words on both sides pass") {
    CHECK(CheckStateEncryption(plain, plain));
    CHECK(CheckStateEncryption(refuse, refuse));
    CHECK(CheckStateEncryption(allow_plain, allow_plain));
    CHECK(CheckStateEncryption(refuse, tpm2_only));
    CHECK(CheckStateEncryption(tpm2_only, refuse));
  }
  SECTION("a plain node is not updated to an image that encrypts") {
    for (const auto& next : {refuse, allow_plain, tpm2_only}) {
      auto r = CheckStateEncryption(plain, next);
      REQUIRE_FALSE(r);
      CHECK(r.error().starts_with(
          "the new image encrypts the state partition (sprout.state.encryption=tpm2) and this node's state is plain "
          "ext4 (no sprout.state.encryption= on its command line); an update cannot convert a node's state: "
          "reinstall the node from the new image, or build the new image with the node's setting "
          "(disk.stateEncryption: none)"));
    }
  }
  SECTION("an encrypting node is not updated to an image that does not encrypt") {
    for (const auto& node : {refuse, allow_plain, tpm2_only}) {
      auto r = CheckStateEncryption(node, plain);
      REQUIRE_FALSE(r);
      CHECK(r.error() ==
            "the new image does not encrypt the state partition (no sprout.state.encryption= on its command line) "
            "and this node's image encrypts its state (sprout.state.encryption=tpm2); an update cannot convert a "
            "node's state: reinstall the node from the new image, or build the new image with the node's setting "
            "(disk.stateEncryption: tpm2)");
    }
  }
  SECTION("another encryption (a later sprout's) is a change too") {
    auto r = CheckStateEncryption(refuse, {"sprout.state.encryption=fido2"});
    REQUIRE_FALSE(r);
    CHECK(
        r.error().starts_with("the new image encrypts the state partition (sprout.state.encryption=fido2) and "
                              "this node's image encrypts its state (sprout.state.encryption=tpm2)"));
  }
  SECTION("without-tpm: refuse to plain passes, plain to refuse (or to no word) is refused") {
    CHECK(CheckStateEncryption(refuse, allow_plain));
    CHECK(CheckStateEncryption(tpm2_only, allow_plain));
    auto r = CheckStateEncryption(allow_plain, refuse);
    REQUIRE_FALSE(r);
    CHECK(r.error() ==
          "the new image refuses a plain state partition (sprout.state.without-tpm=refuse) and this node's image "
          "lets it stay plain without a TPM (sprout.state.without-tpm=plain), so this node's state may be plain "
          "ext4, which the new image's initrd would refuse to boot; an update cannot convert a node's state: "
          "reinstall the node from the new image, or build the new image with the node's setting "
          "(disk.withoutTpm: plain)");
    auto none = CheckStateEncryption(allow_plain, tpm2_only);
    REQUIRE_FALSE(none);
    CHECK_THAT(none.error(), Catch::Contains("(no sprout.state.without-tpm=, which means refuse)"));
  }
  SECTION("without encryption a stray without-tpm word means nothing") {
    CHECK(CheckStateEncryption({"sprout.state.without-tpm=plain"}, plain));
  }
}
