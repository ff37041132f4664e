#include "backup/take.h"

#include <catch2/catch.hpp>

#include "backup/bundle.h"
#include "pki/pki.h"
#include "util/fs.h"

using namespace sprout;

TEST_CASE("backup: a bundle carries the cluster's encryption key with the PKI, when the node has one", "[backup]") {
  TempDir dir(std::filesystem::temp_directory_path(), "take-test");
  const std::string secret = "a cluster secret of 32 bytes....";
  auto cas = pki::MakeClusterCAs(secret);  // as a founder makes them
  REQUIRE(cas);
  REQUIRE(pki::WritePkiFiles(dir.path() / "pki", pki::CAFiles(*cas)));
  REQUIRE(WriteFileAtomic(dir.path() / "bootstrap-token", "abcdef.0123456789abcdef\n"));
  auto files = backup::ReadPkiFiles(dir.path() / "pki", dir.path() / "bootstrap-token");
  REQUIRE(files);
  for (const auto& f : backup::kRequiredFiles) CHECK(files->count(f) == 1);
  REQUIRE(files->count(pki::kEncryptionKeyFile) == 1);
  CHECK(files->at(pki::kEncryptionKeyFile) == cas->encryption_key + "\n");

  // What a restore writes back loads as the same key (firstboot/backup.cc stages every
  // file of the bundle under pki/ and loads the CAs from there).
  TempDir stage(std::filesystem::temp_directory_path(), "take-test-restore");
  for (const auto& [name, data] : *files) {
    if (name == "bootstrap-token") continue;
    std::filesystem::create_directories((stage.path() / name).parent_path());
    REQUIRE(WriteFileAtomic(stage.path() / name, data, std::filesystem::perms(0600)));
  }
  auto restored = pki::LoadCAs(stage.path());
  REQUIRE(restored);
  CHECK(restored->encryption_key == cas->encryption_key);
  // The restored cluster keeps its Kubernetes CA, so workers pinned to it (the pin
  // derived from the cluster secret) still join it.
  CHECK(restored->kubernetes_ca.cert_pem == cas->kubernetes_ca.cert_pem);
  CHECK(pki::SpkiSha256(restored->kubernetes_ca.cert_pem).value() == pki::ClusterCaCertHash(secret).value());

  // A cluster founded before the key existed still backs up.
  std::filesystem::remove(dir.path() / "pki" / pki::kEncryptionKeyFile);
  auto old = backup::ReadPkiFiles(dir.path() / "pki", dir.path() / "bootstrap-token");
  REQUIRE(old);
  CHECK(old->count(pki::kEncryptionKeyFile) == 0);
}
