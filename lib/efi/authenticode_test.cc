#include "efi/authenticode.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <memory>

#include "efi/pe.h"
#include "efi/testing_pe.h"
#include "pki/pki.h"
#include "util/fs.h"
#include "util/process.h"
#include "util/sha256.h"

using namespace sprout;
using namespace sprout::efi;

namespace {

// Signer is an RSA key and its self-signed certificate, both PEM, and the certificate's
// SHA-256 (DER).
struct Signer {
  std::string key_pem, cert_pem, cert_sha256;
};

std::string BioText(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<std::size_t>(n));
}

Signer MakeSigner(const std::string& common_name) {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_RSA_gen(2048), EVP_PKEY_free);
  std::unique_ptr<X509, decltype(&X509_free)> cert(X509_new(), X509_free);
  REQUIRE(key);
  REQUIRE(cert);
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 0x5eed);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -86400);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 86400L * 365);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(common_name.c_str()), -1,
                             -1, 0);
  X509_set_issuer_name(cert.get(), name);
  X509_set_pubkey(cert.get(), key.get());
  REQUIRE(X509_sign(cert.get(), key.get(), EVP_sha256()) > 0);
  std::unique_ptr<BIO, decltype(&BIO_free)> k(BIO_new(BIO_s_mem()), BIO_free), c(BIO_new(BIO_s_mem()), BIO_free);
  REQUIRE(PEM_write_bio_PrivateKey(k.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) == 1);
  REQUIRE(PEM_write_bio_X509(c.get(), cert.get()) == 1);
  int n = i2d_X509(cert.get(), nullptr);
  std::string der(static_cast<std::size_t>(n), '\0');
  auto* p = reinterpret_cast<unsigned char*>(der.data());
  i2d_X509(cert.get(), &p);
  return Signer{BioText(k.get()), BioText(c.get()), Sha256Hex(der)};
}

// The signers are made once: RSA key generation is the slow part of these tests.
const Signer& DbSigner() {
  static const Signer s = MakeSigner("sprout test db");
  return s;
}
const Signer& OtherSigner() {
  static const Signer s = MakeSigner("someone else");
  return s;
}

// TestImage is a synthetic two-section image with 13 bytes after its sections, so that
// signing pads it and the trailing data is hashed.
std::string TestImage() { return testing::MakeTestPe() + "trailing data"; }

// GappedImage is a three-section image whose last section's raw data starts 0x200 bytes
// after the one before it ends: the gap holds bytes no section covers.
std::string GappedImage() {
  std::string b = testing::MakeTestPe(0x8664, 3);  // sections at 0x400, 0x600, 0x800
  b.insert(0x800, 0x200, 'G');
  PutLe32(b, testing::kTestPeSectionTableOffset + 2 * 40 + 20, 0xa00);
  return b;
}

std::string MustSign(std::string_view image, const Signer& s = DbSigner()) {
  auto signed_image = SignPe(image, s.key_pem, s.cert_pem, "test.efi");
  REQUIRE(signed_image);
  return *signed_image;
}

// RealEfiImage is a real systemd EFI binary (Debian package systemd-boot-efi), or empty.
std::string RealEfiImage() {
  auto image = ReadFile("/usr/lib/systemd/boot/efi/systemd-bootx64.efi");
  return image ? *image : std::string();
}

}  // namespace

TEST_CASE("AuthenticodeDigest covers the sections and trailing data but not the CheckSum", "[efi]") {
  const std::string image = TestImage();
  auto digest = AuthenticodeDigest(image, "test.efi");
  REQUIRE(digest);

  std::string checksum_changed = image;
  checksum_changed[testing::kTestPeChecksumOffset] ^= 0x5a;
  auto same = AuthenticodeDigest(checksum_changed, "test.efi");
  REQUIRE(same);
  CHECK(*same == *digest);

  std::string section_changed = image;
  section_changed[0x400 + 7] ^= 1;  // in .text
  auto other = AuthenticodeDigest(section_changed, "test.efi");
  REQUIRE(other);
  CHECK(*other != *digest);

  std::string trailer_changed = image;
  trailer_changed.back() ^= 1;
  auto other_trailer = AuthenticodeDigest(trailer_changed, "test.efi");
  REQUIRE(other_trailer);
  CHECK(*other_trailer != *digest);
}

TEST_CASE("AuthenticodeDigest hashes what follows the sections from SUM_OF_BYTES_HASHED, as EDK2 does", "[efi]") {
  // The spec, EDK2 and sbsign hash the data after the sections from the offset that is
  // the headers' size plus the sections' raw sizes; with a gap between sections that is
  // not where the last section ends, and the gap itself is not hashed.
  const std::string image = GappedImage();
  const std::uint32_t checksum = testing::kTestPeChecksumOffset, cert_dir = testing::kTestPeCertDirOffset;
  Sha256 h;
  h.Update(image.substr(0, checksum));
  h.Update(image.substr(checksum + 4, cert_dir - checksum - 4));
  h.Update(image.substr(cert_dir + 8, 0x400 - cert_dir - 8));
  h.Update(image.substr(0x400, 0x400));  // .text, .data
  h.Update(image.substr(0xa00, 0x200));  // .sec2
  h.Update(image.substr(0xa00, 0x200));  // from 0x400 + 3 * 0x200 to the end of the file
  auto digest = AuthenticodeDigest(image, "gapped.efi");
  REQUIRE(digest);
  CHECK(*digest == h.Digest());
}

TEST_CASE("Signing one image twice with one key gives identical bytes", "[efi]") {
  const std::string image = TestImage();
  std::string first = MustSign(image);
  std::string second = MustSign(image);
  CHECK(first == second);
  CHECK(first != MustSign(image, OtherSigner()));
}

TEST_CASE("A signed image carries one aligned WIN_CERTIFICATE at its end and a correct CheckSum", "[efi]") {
  const std::string image = TestImage();
  std::string signed_image = MustSign(image);
  auto pe = ParsePe(signed_image, "signed.efi");
  REQUIRE(pe);
  const std::size_t padded = AlignUp(image.size(), 8);
  CHECK(signed_image.substr(0, image.size()).substr(0x400) == image.substr(0x400));  // sections untouched
  CHECK(signed_image.substr(image.size(), padded - image.size()) == std::string(padded - image.size(), '\0'));
  CHECK(pe->cert_table_offset == padded);
  CHECK(std::uint64_t{pe->cert_table_offset} + pe->cert_table_size == signed_image.size());
  CHECK(pe->cert_table_size % 8 == 0);
  CHECK(Le32(signed_image, pe->cert_table_offset) == pe->cert_table_size);
  CHECK(Le16(signed_image, pe->cert_table_offset + 4) == 0x0200);
  CHECK(Le16(signed_image, pe->cert_table_offset + 6) == 0x0002);
  CHECK(Le32(signed_image, pe->checksum_offset) == PeChecksum(signed_image, pe->checksum_offset));
}

TEST_CASE("ReadPeSignature shows the signer and that the signed digest is the image's", "[efi]") {
  const std::string image = TestImage();
  auto unsigned_sig = ReadPeSignature(image, "test.efi");
  REQUIRE(unsigned_sig);
  CHECK_FALSE(unsigned_sig->signed_);

  auto sig = ReadPeSignature(MustSign(image), "signed.efi");
  REQUIRE(sig);
  CHECK(sig->signed_);
  CHECK(sig->subject == "CN=sprout test db");
  CHECK(sig->issuer == "CN=sprout test db");
  CHECK(sig->cert_sha256 == DbSigner().cert_sha256);
  CHECK(sig->digest_matches);
}

TEST_CASE("VerifyPeSignature passes with the signing certificate and fails with another", "[efi]") {
  std::string signed_image = MustSign(TestImage());
  auto ok = VerifyPeSignature(signed_image, DbSigner().cert_pem, "signed.efi");
  INFO((ok.ok() ? std::string() : ok.error()));
  CHECK(ok);
  auto other = VerifyPeSignature(signed_image, OtherSigner().cert_pem, "signed.efi");
  REQUIRE_FALSE(other);
  CHECK(other.error() == "signed.efi is signed by another certificate (CN=sprout test db), not by CN=someone else");
  auto none = VerifyPeSignature(TestImage(), DbSigner().cert_pem, "test.efi");
  REQUIRE_FALSE(none);
  CHECK(none.error() == "test.efi is not signed");
}

TEST_CASE("A byte changed in a section after signing breaks the signature", "[efi]") {
  std::string signed_image = MustSign(TestImage());
  signed_image[0x600 + 3] ^= 0x20;  // in .data
  auto sig = ReadPeSignature(signed_image, "tampered.efi");
  REQUIRE(sig);
  CHECK(sig->signed_);
  CHECK_FALSE(sig->digest_matches);
  auto verified = VerifyPeSignature(signed_image, DbSigner().cert_pem, "tampered.efi");
  REQUIRE_FALSE(verified);
  CHECK(verified.error() ==
        "tampered.efi has changed since it was signed: its Authenticode digest is not the signed one");
}

TEST_CASE("A changed CheckSum leaves the signature valid, as firmware ignores it", "[efi]") {
  std::string signed_image = MustSign(TestImage());
  signed_image[testing::kTestPeChecksumOffset + 1] ^= 0x11;
  CHECK(VerifyPeSignature(signed_image, DbSigner().cert_pem, "signed.efi"));
}

TEST_CASE("SignPe refuses a signed image, a key that does not match, and a key that is not RSA", "[efi]") {
  const std::string image = TestImage();
  auto twice = SignPe(MustSign(image), DbSigner().key_pem, DbSigner().cert_pem, "signed.efi");
  REQUIRE_FALSE(twice);
  CHECK(twice.error() ==
        "signed.efi is signed already; sign the unsigned image (sprout does not add a second signature)");

  auto mismatch = SignPe(image, OtherSigner().key_pem, DbSigner().cert_pem, "test.efi");
  REQUIRE_FALSE(mismatch);
  CHECK(mismatch.error() ==
        "cannot sign test.efi: the key does not match the certificate (CN=sprout test db); pass the key the "
        "certificate was made for");

  auto ec = pki::MakeCA("ec signer");
  REQUIRE(ec);
  auto not_rsa = SignPe(image, ec->key_pem, ec->cert_pem, "test.efi");
  REQUIRE_FALSE(not_rsa);
  CHECK(not_rsa.error().starts_with("cannot sign test.efi: the key is EC, and UEFI firmware checks RSA signatures"));

  auto garbage = SignPe(image, "not a key", DbSigner().cert_pem, "test.efi");
  REQUIRE_FALSE(garbage);
  CHECK(garbage.error().starts_with("cannot sign test.efi: the key is not an unencrypted PEM private key"));
}

TEST_CASE("A real systemd-boot image signs and verifies", "[efi]") {
  const std::string image = RealEfiImage();
  if (image.empty()) {
    WARN("skipped: /usr/lib/systemd/boot/efi/systemd-bootx64.efi is absent (Debian package systemd-boot-efi)");
    return;
  }
  std::string signed_image = MustSign(image);
  CHECK(signed_image == MustSign(image));
  auto sig = ReadPeSignature(signed_image, "systemd-bootx64.efi");
  REQUIRE(sig);
  CHECK(sig->digest_matches);
  CHECK(VerifyPeSignature(signed_image, DbSigner().cert_pem, "systemd-bootx64.efi"));
}

TEST_CASE("sbverify (sbsigntool) accepts sprout's signature with the signing certificate", "[efi][sbverify]") {
  if (FindProgram("sbverify").empty()) {
    WARN("skipped: sbverify is absent (Debian package sbsigntool)");
    return;
  }
  TempDir dir(std::filesystem::temp_directory_path(), "authenticode-test");
  REQUIRE(WriteFileAtomic(dir.path() / "db.pem", DbSigner().cert_pem));
  REQUIRE(WriteFileAtomic(dir.path() / "other.pem", OtherSigner().cert_pem));
  std::vector<std::pair<std::string, std::string>> images = {{"synthetic", TestImage()}, {"gapped", GappedImage()}};
  if (std::string real = RealEfiImage(); !real.empty()) images.emplace_back("systemd-boot", real);
  for (const auto& [name, image] : images) {
    INFO(name);
    const auto file = dir.path() / (name + ".signed.efi");
    REQUIRE(WriteFileAtomic(file, MustSign(image)));
    auto ok = Run({{"sbverify", "--cert", (dir.path() / "db.pem").string(), file.string()}});
    REQUIRE(ok);
    INFO(ok->output);
    CHECK(ok->exit_code == 0);
    CHECK(ok->output.find("Signature verification OK") != std::string::npos);
    auto other = Run({{"sbverify", "--cert", (dir.path() / "other.pem").string(), file.string()}});
    REQUIRE(other);
    CHECK(other->exit_code != 0);
  }
}

TEST_CASE("sbsign (sbsigntool) signs the Authenticode digest sprout computes", "[efi][sbverify]") {
  if (FindProgram("sbsign").empty()) {
    WARN("skipped: sbsign is absent (Debian package sbsigntool)");
    return;
  }
  TempDir dir(std::filesystem::temp_directory_path(), "authenticode-test");
  REQUIRE(WriteFileAtomic(dir.path() / "db.key", DbSigner().key_pem, std::filesystem::perms(0600)));
  REQUIRE(WriteFileAtomic(dir.path() / "db.pem", DbSigner().cert_pem));
  std::vector<std::pair<std::string, std::string>> images = {{"synthetic", TestImage()}, {"gapped", GappedImage()}};
  if (std::string real = RealEfiImage(); !real.empty()) images.emplace_back("systemd-boot", real);
  for (const auto& [name, image] : images) {
    INFO(name);
    const auto in = dir.path() / (name + ".efi");
    const auto out = dir.path() / (name + ".sbsigned.efi");
    REQUIRE(WriteFileAtomic(in, image));
    auto signed_by_sbsign = RunChecked({{"sbsign", "--key", (dir.path() / "db.key").string(), "--cert",
                                         (dir.path() / "db.pem").string(), "--output", out.string(), in.string()}});
    INFO((signed_by_sbsign ? *signed_by_sbsign : signed_by_sbsign.error()));
    REQUIRE(signed_by_sbsign);
    auto bytes = ReadFile(out);
    REQUIRE(bytes);
    auto sig = ReadPeSignature(*bytes, out.string());
    REQUIRE(sig);
    CHECK(sig->signed_);
    CHECK(sig->subject == "CN=sprout test db");
    CHECK(sig->digest_matches);
    CHECK(VerifyPeSignature(*bytes, DbSigner().cert_pem, out.string()));
    // sbsign pads as sprout does: the table starts at the same offset, and between the
    // certificate directory entry and the table the images are the same.
    std::string ours = MustSign(image);
    auto pe = ParsePe(ours, "ours");
    REQUIRE(pe);
    REQUIRE(bytes->size() > pe->cert_table_offset);
    CHECK(Le32(*bytes, pe->cert_dir_offset) == pe->cert_table_offset);
    const std::size_t from = pe->cert_dir_offset + 8;
    CHECK(bytes->substr(from, pe->cert_table_offset - from) == ours.substr(from, pe->cert_table_offset - from));
  }
}

TEST_CASE("An image signed with Debian's OVMF snakeoil key passes sbverify with its certificate", "[efi][sbverify]") {
  // The key pair OVMF_VARS_4M.snakeoil.fd enrolls (Debian package ovmf); its key is
  // encrypted with the passphrase "snakeoil".
  auto key_file = ReadFile("/usr/share/ovmf/PkKek-1-snakeoil.key");
  auto cert_file = ReadFile("/usr/share/ovmf/PkKek-1-snakeoil.pem");
  if (!key_file || !cert_file || FindProgram("sbverify").empty()) {
    WARN("skipped: /usr/share/ovmf/PkKek-1-snakeoil.{key,pem} (package ovmf) or sbverify (sbsigntool) is absent");
    return;
  }
  auto encrypted = SignPe(TestImage(), *key_file, *cert_file, "test.efi");
  REQUIRE_FALSE(encrypted);
  CHECK(encrypted.error().starts_with("cannot sign test.efi: the key is not an unencrypted PEM private key"));

  std::unique_ptr<BIO, decltype(&BIO_free)> in(BIO_new_mem_buf(key_file->data(), static_cast<int>(key_file->size())),
                                               BIO_free);
  char passphrase[] = "snakeoil";
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(in.get(), nullptr, nullptr, passphrase), EVP_PKEY_free);
  REQUIRE(key);
  std::unique_ptr<BIO, decltype(&BIO_free)> out(BIO_new(BIO_s_mem()), BIO_free);
  REQUIRE(PEM_write_bio_PrivateKey(out.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) == 1);

  auto signed_image = SignPe(TestImage(), BioText(out.get()), *cert_file, "test.efi");
  REQUIRE(signed_image);
  auto sig = ReadPeSignature(*signed_image, "test.efi");
  REQUIRE(sig);
  CHECK(sig->subject == "C=US, ST=Colorado, L=Fort Collins, O=SnakeOil");
  TempDir dir(std::filesystem::temp_directory_path(), "authenticode-test");
  REQUIRE(WriteFileAtomic(dir.path() / "snakeoil.signed.efi", *signed_image));
  auto verified = Run(
      {{"sbverify", "--cert", "/usr/share/ovmf/PkKek-1-snakeoil.pem", (dir.path() / "snakeoil.signed.efi").string()}});
  REQUIRE(verified);
  INFO(verified->output);
  CHECK(verified->exit_code == 0);
}
