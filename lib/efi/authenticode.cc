#include "efi/authenticode.h"

#include <openssl/asn1.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/pkcs7.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "efi/openssl.h"
#include "efi/pe.h"
#include "util/sha256.h"

namespace sprout::efi {

namespace {

// WIN_CERTIFICATE: dwLength (4), wRevision (2), wCertificateType (2), then the DER.
constexpr std::uint32_t kWinCertHeaderSize = 8;
constexpr std::uint16_t kWinCertRevision = 0x0200;
constexpr std::uint16_t kWinCertTypePkcsSignedData = 0x0002;
// The certificate table and each WIN_CERTIFICATE in it are quadword aligned.
constexpr std::uint64_t kCertAlignment = 8;

constexpr const char* kSpcIndirectDataOid = "1.3.6.1.4.1.311.2.1.4";
constexpr const char* kSpcSpOpusInfoOid = "1.3.6.1.4.1.311.2.1.12";
constexpr const char* kContentTypeOid = "1.2.840.113549.1.9.3";
constexpr const char* kMessageDigestOid = "1.2.840.113549.1.9.4";

using ossl::Bio;
using ossl::Key;
using Cert = std::unique_ptr<X509, decltype(&X509_free)>;
using Pkcs7 = std::unique_ptr<PKCS7, decltype(&PKCS7_free)>;
using Object = std::unique_ptr<ASN1_OBJECT, decltype(&ASN1_OBJECT_free)>;
using AnyString = std::unique_ptr<ASN1_STRING, decltype(&ASN1_STRING_free)>;
using ossl::MdCtx;
using DigestInfo = std::unique_ptr<X509_SIG, decltype(&X509_SIG_free)>;

using ossl::Bytes;
std::string OpenSslError() { return ossl::ErrorText(); }

std::array<std::uint8_t, 32> Sha256Of(std::string_view s) {
  Sha256 h;
  h.Update(s);
  return h.Digest();
}

Key ReadKey(std::string_view pem) { return ossl::ReadPrivateKey(pem); }

Cert ReadCert(std::string_view pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  return {bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr, X509_free};
}

// OneLine renders a name as "C=US, O=Example, CN=Signer", UTF-8 left as it is.
std::string OneLine(const X509_NAME* name) {
  Bio bio(BIO_new(BIO_s_mem()), BIO_free);
  if (!bio || X509_NAME_print_ex(bio.get(), name, 0, XN_FLAG_ONELINE & ~XN_FLAG_SPC_EQ & ~ASN1_STRFLGS_ESC_MSB) < 0)
    return "(unprintable name)";
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return n > 0 && data != nullptr ? std::string(data, static_cast<std::size_t>(n)) : std::string();
}

std::string CertSha256(X509* cert) {
  int n = i2d_X509(cert, nullptr);
  if (n <= 0) return "";
  std::string der(static_cast<std::size_t>(n), '\0');
  auto* p = reinterpret_cast<unsigned char*>(der.data());
  i2d_X509(cert, &p);
  return Sha256Hex(der);
}

// SigningPair is a parsed private key and its certificate.
struct SigningPair {
  Key key;
  Cert cert;
};

// LoadPair parses and checks a signing pair; the errors start with context.
Result<SigningPair> LoadPair(std::string_view key_pem, std::string_view cert_pem, const std::string& context) {
  Key key = ReadKey(key_pem);
  if (!key) {
    return Fail(context + ": the key is not an unencrypted PEM private key (" + OpenSslError() +
                "); decrypt it with `openssl pkey -in KEY -out PLAIN.key`");
  }
  Cert cert = ReadCert(cert_pem);
  if (!cert) return Fail(context + ": the certificate is not PEM X.509 (" + OpenSslError() + ")");
  if (!EVP_PKEY_is_a(key.get(), "RSA")) {
    return Fail(context + ": the key is " + EVP_PKEY_get0_type_name(key.get()) +
                ", and UEFI firmware checks RSA signatures; make an RSA key, as with `openssl req -x509 -newkey "
                "rsa:2048 -nodes -keyout db.key -out db.pem -subj /CN=NAME`");
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return Fail(context + ": the key does not match the certificate (" + OneLine(X509_get_subject_name(cert.get())) +
                "); pass the key the certificate was made for");
  }
  return SigningPair{std::move(key), std::move(cert)};
}

// Der encodes one DER element: tag, definite length, content.
std::string Der(std::uint8_t tag, std::string_view content) {
  std::string out(1, static_cast<char>(tag));
  std::size_t n = content.size();
  if (n < 0x80) {
    out += static_cast<char>(n);
  } else {
    std::string len;
    for (; n != 0; n >>= 8) len.insert(len.begin(), static_cast<char>(n & 0xff));
    out += static_cast<char>(0x80 | len.size());
    out += len;
  }
  out += content;
  return out;
}

// IndirectDataContent is the content of an SpcIndirectDataContent (the bytes inside its
// outer SEQUENCE) for a PE image's SHA-256 Authenticode digest:
//   SpcIndirectDataContent ::= SEQUENCE {
//     data SpcAttributeTypeAndOptionalValue ::= SEQUENCE {
//       type SPC_PE_IMAGE_DATAOBJ (1.3.6.1.4.1.311.2.1.15),
//       value SpcPeImageData ::= SEQUENCE { flags BIT STRING, file [0] SpcLink } },
//     messageDigest DigestInfo ::= SEQUENCE { AlgorithmIdentifier, OCTET STRING } }
// The file link is the "<<<Obsolete>>>" BMPString that Windows' signtool writes and
// other signers copy; firmware does not read it.
std::string IndirectDataContent(const std::array<std::uint8_t, 32>& digest) {
  const std::string pe_image_data_oid("\x2b\x06\x01\x04\x01\x82\x37\x02\x01\x0f", 10);
  const std::string sha256_oid("\x60\x86\x48\x01\x65\x03\x04\x02\x01", 9);
  std::string obsolete;
  for (char c : std::string_view("<<<Obsolete>>>")) {
    obsolete += '\0';
    obsolete += c;  // BMPString: UCS-2, big-endian
  }
  const std::string flags = Der(0x03, std::string(1, '\0'));  // BIT STRING, no bits
  // file [0] EXPLICIT SpcLink; SpcLink's file [2] EXPLICIT SpcString; its unicode [0] IMPLICIT.
  const std::string file = Der(0xa0, Der(0xa2, Der(0x80, obsolete)));
  const std::string data = Der(0x30, Der(0x06, pe_image_data_oid) + Der(0x30, flags + file));
  const std::string algorithm = Der(0x30, Der(0x06, sha256_oid) + Der(0x05, ""));
  const std::string digest_info =
      Der(0x30, algorithm + Der(0x04, std::string(reinterpret_cast<const char*>(digest.data()), digest.size())));
  return data + digest_info;
}

// DerHeader reads the header of the DER element at *p, which must have the universal
// tag and a definite length within end; it leaves *p at the content and returns the
// content length, or -1.
long DerHeader(const unsigned char** p, const unsigned char* end, int tag) {
  long len = 0;
  int got_tag = 0, got_class = 0;
  int r = ASN1_get_object(p, &len, &got_tag, &got_class, end - *p);
  if ((r & 0x80) != 0 || r == 0x21 || got_tag != tag || got_class != V_ASN1_UNIVERSAL) return -1;
  return len;
}

// Signature is the PKCS#7 SignedData of an image's first WIN_CERTIFICATE, with what its
// SpcIndirectDataContent says.
struct Signature {
  Pkcs7 p7{nullptr, PKCS7_free};
  std::string content;                    // the SpcIndirectDataContent without its outer header
  std::array<std::uint8_t, 32> digest{};  // the Authenticode digest it signs
};

// ReadSignature reads the first WIN_CERTIFICATE of a signed image. A table can hold more
// than one (dual signing); the first is the one sprout writes and reads.
Result<Signature> ReadSignature(std::string_view image, const PeImage& pe, const std::string& what) {
  auto bad = [&](const std::string& why) { return Fail(what + " has an unreadable signature: " + why); };
  std::string_view table = image.substr(pe.cert_table_offset, pe.cert_table_size);
  if (table.size() < kWinCertHeaderSize) return bad("its certificate table is shorter than one WIN_CERTIFICATE");
  std::uint32_t length = Le32(table, 0);
  if (length < kWinCertHeaderSize || length > table.size())
    return bad("its WIN_CERTIFICATE length " + std::to_string(length) + " does not fit the certificate table");
  if (Le16(table, 4) != kWinCertRevision || Le16(table, 6) != kWinCertTypePkcsSignedData)
    return bad("its WIN_CERTIFICATE is not revision 0x0200, PKCS_SIGNED_DATA");
  std::string_view der = table.substr(kWinCertHeaderSize, length - kWinCertHeaderSize);
  const unsigned char* p = Bytes(der);
  Signature sig;
  sig.p7.reset(d2i_PKCS7(nullptr, &p, static_cast<long>(der.size())));
  if (!sig.p7) return bad("not PKCS#7 DER (" + OpenSslError() + ")");
  if (!PKCS7_type_is_signed(sig.p7.get()) || sig.p7->d.sign == nullptr || sig.p7->d.sign->contents == nullptr)
    return bad("its PKCS#7 is not SignedData");
  PKCS7* inner = sig.p7->d.sign->contents;
  char oid[64];
  OBJ_obj2txt(oid, sizeof oid, inner->type, 1);
  if (std::strcmp(oid, kSpcIndirectDataOid) != 0 || inner->d.other == nullptr ||
      inner->d.other->type != V_ASN1_SEQUENCE) {
    return bad(std::string("its content is ") + oid + ", not SpcIndirectDataContent (" + kSpcIndirectDataOid + ")");
  }
  const ASN1_STRING* idc = inner->d.other->value.sequence;
  const unsigned char* q = ASN1_STRING_get0_data(idc);
  const unsigned char* end = q + ASN1_STRING_length(idc);
  long n = DerHeader(&q, end, V_ASN1_SEQUENCE);
  if (n < 0 || q + n != end) return bad("its SpcIndirectDataContent is not one DER SEQUENCE");
  sig.content.assign(reinterpret_cast<const char*>(q), static_cast<std::size_t>(n));
  // Skip the SpcAttributeTypeAndOptionalValue; the DigestInfo follows.
  long skip = DerHeader(&q, end, V_ASN1_SEQUENCE);
  if (skip < 0) return bad("its SpcIndirectDataContent has no data");
  q += skip;
  DigestInfo info(d2i_X509_SIG(nullptr, &q, end - q), X509_SIG_free);
  if (!info) return bad("its SpcIndirectDataContent has no DigestInfo (" + OpenSslError() + ")");
  const X509_ALGOR* alg = nullptr;
  const ASN1_OCTET_STRING* digest = nullptr;
  X509_SIG_get0(info.get(), &alg, &digest);
  if (OBJ_obj2nid(alg->algorithm) != NID_sha256 || ASN1_STRING_length(digest) != 32) {
    OBJ_obj2txt(oid, sizeof oid, alg->algorithm, 0);
    return bad(std::string("its Authenticode digest is ") + oid + ", and sprout checks SHA-256 ones only");
  }
  std::memcpy(sig.digest.data(), ASN1_STRING_get0_data(digest), sig.digest.size());
  return sig;
}

// OnlySigner is the signature's one SignerInfo; Authenticode allows exactly one.
Result<PKCS7_SIGNER_INFO*> OnlySigner(const Signature& sig, const std::string& what) {
  STACK_OF(PKCS7_SIGNER_INFO)* infos = PKCS7_get_signer_info(sig.p7.get());
  if (infos == nullptr || sk_PKCS7_SIGNER_INFO_num(infos) != 1)
    return Fail(what + " has an unreadable signature: it does not have exactly one SignerInfo");
  return sk_PKCS7_SIGNER_INFO_value(infos, 0);
}

// SignerCert is the certificate of the signature's signer, from its certificates set.
X509* SignerCert(const Signature& sig, PKCS7_SIGNER_INFO* si) {
  STACK_OF(X509)* certs = sig.p7->d.sign->cert;
  for (int i = 0; i < sk_X509_num(certs); ++i) {
    X509* c = sk_X509_value(certs, i);
    if (X509_NAME_cmp(X509_get_issuer_name(c), si->issuer_and_serial->issuer) == 0 &&
        ASN1_INTEGER_cmp(X509_get0_serialNumber(c), si->issuer_and_serial->serial) == 0)
      return c;
  }
  return nullptr;
}

// AddSignedAttribute adds an attribute of one value to si's signed attributes: an
// ASN1_OBJECT* (V_ASN1_OBJECT, len -1), an OCTET STRING's bytes, or a SEQUENCE's whole
// DER.
bool AddSignedAttribute(PKCS7_SIGNER_INFO* si, const char* oid, int type, const void* value, int len) {
  Object obj(OBJ_txt2obj(oid, 1), ASN1_OBJECT_free);
  return obj && X509at_add1_attr_by_OBJ(&si->auth_attr, obj.get(), type, static_cast<const unsigned char*>(value),
                                        len) != nullptr;
}

}  // namespace

Result<std::array<std::uint8_t, 32>> AuthenticodeDigest(std::string_view image, const std::string& what) {
  auto pe = ParsePe(image, what);
  if (!pe) return Fail(pe.error());
  auto bad = [&](const std::string& why) { return Fail(what + " cannot be hashed for Authenticode: " + why); };
  std::uint64_t headers_end = pe->size_of_headers;
  std::uint64_t skipped_end = pe->cert_dir_offset != 0 ? pe->cert_dir_offset + 8 : pe->checksum_offset + 4;
  if (headers_end < skipped_end || headers_end > image.size())
    return bad("its SizeOfHeaders does not cover the optional header or runs past the end of the file");
  std::uint64_t table_size = pe->cert_table_size;
  if (table_size != 0 && std::uint64_t{pe->cert_table_offset} + table_size != image.size())
    return bad("its certificate table is not at the end of the file");

  Sha256 h;
  auto hash = [&](std::uint64_t from, std::uint64_t to) {
    if (to > from) h.Update(image.substr(from, to - from));
  };
  hash(0, pe->checksum_offset);
  if (pe->cert_dir_offset != 0) {
    hash(pe->checksum_offset + 4, pe->cert_dir_offset);
    hash(pe->cert_dir_offset + 8, headers_end);
  } else {
    hash(pe->checksum_offset + 4, headers_end);
  }
  std::vector<const PeSection*> sections;
  for (const auto& s : pe->sections)
    if (s.raw_size != 0) sections.push_back(&s);
  std::stable_sort(sections.begin(), sections.end(),
                   [](const PeSection* a, const PeSection* b) { return a->raw_offset < b->raw_offset; });
  std::uint64_t hashed = headers_end;
  for (const PeSection* s : sections) {
    hash(s->raw_offset, std::uint64_t{s->raw_offset} + s->raw_size);
    hashed += s->raw_size;
  }
  // What follows is hashed from offset SUM_OF_BYTES_HASHED (headers plus raw section
  // sizes), not from the end of the last section: that is how the Authenticode spec,
  // EDK2's image verification and sbsign all count it, and they differ only for an image
  // with gaps between its sections.
  hash(hashed, image.size() - table_size);
  return h.Digest();
}

Result<std::string> SignPe(std::string_view image, std::string_view key_pem, std::string_view cert_pem,
                           const std::string& what) {
  auto pe = ParsePe(image, what);
  if (!pe) return Fail(pe.error());
  if (pe->cert_table_offset != 0 || pe->cert_table_size != 0)
    return Fail(what + " is signed already; sign the unsigned image (sprout does not add a second signature)");
  if (pe->cert_dir_offset == 0)
    return Fail(what + " cannot be signed: its optional header has no certificate table entry (NumberOfRvaAndSizes " +
                std::to_string(pe->number_of_rva_and_sizes) + ")");
  auto pair = LoadPair(key_pem, cert_pem, "cannot sign " + what);
  if (!pair) return Fail(pair.error());
  Key& key = pair->key;
  Cert& cert = pair->cert;

  // The table is appended 8-byte aligned; the padding comes first so the digest covers it.
  std::string out(image);
  out.resize(AlignUp(out.size(), kCertAlignment), '\0');
  auto digest = AuthenticodeDigest(out, what);
  if (!digest) return Fail(digest.error());
  const std::string content = IndirectDataContent(*digest);
  const std::string idc = Der(0x30, content);

  auto failed = [&](const char* step) { return Fail("cannot sign " + what + ": " + step + ": " + OpenSslError()); };
  Pkcs7 p7(PKCS7_new(), PKCS7_free);
  if (!p7 || PKCS7_set_type(p7.get(), NID_pkcs7_signed) != 1) return failed("making the PKCS#7 SignedData");
  PKCS7_SIGNER_INFO* si = PKCS7_add_signature(p7.get(), cert.get(), key.get(), EVP_sha256());
  if (si == nullptr || PKCS7_add_certificate(p7.get(), cert.get()) != 1) return failed("adding the signer");

  // The content: an SpcIndirectDataContent, carried as an ANY of its own content type.
  Pkcs7 inner(PKCS7_new(), PKCS7_free);
  AnyString seq(ASN1_STRING_type_new(V_ASN1_SEQUENCE), ASN1_STRING_free);
  if (!inner || !seq || ASN1_STRING_set(seq.get(), idc.data(), static_cast<int>(idc.size())) != 1)
    return failed("making the content");
  inner->type = OBJ_txt2obj(kSpcIndirectDataOid, 1);
  if (inner->type == nullptr) return failed("making the content");
  inner->d.other = ASN1_TYPE_new();
  if (inner->d.other == nullptr) return failed("making the content");
  ASN1_TYPE_set(inner->d.other, V_ASN1_SEQUENCE, seq.release());
  // PKCS7_set_content takes ownership of the content when it succeeds.
  if (PKCS7_set_content(p7.get(), inner.get()) != 1) return failed("setting the content");
  (void)inner.release();

  // The signed attributes, without signingTime, so the bytes depend only on key and image.
  const auto md = Sha256Of(content);
  Object indirect(OBJ_txt2obj(kSpcIndirectDataOid, 1), ASN1_OBJECT_free);
  const char empty_sequence[] = {0x30, 0x00};
  if (!indirect || !AddSignedAttribute(si, kContentTypeOid, V_ASN1_OBJECT, indirect.get(), -1) ||
      !AddSignedAttribute(si, kMessageDigestOid, V_ASN1_OCTET_STRING, md.data(), static_cast<int>(md.size())) ||
      !AddSignedAttribute(si, kSpcSpOpusInfoOid, V_ASN1_SEQUENCE, empty_sequence, sizeof empty_sequence)) {
    return failed("adding the signed attributes");
  }
  // PKCS7_SIGNER_INFO_sign signs the attributes alone; PKCS7_dataFinal would add a
  // signingTime.
  if (PKCS7_SIGNER_INFO_sign(si) != 1) return failed("signing");

  int der_size = i2d_PKCS7(p7.get(), nullptr);
  if (der_size <= 0) return failed("encoding the PKCS#7");
  std::uint64_t entry_size = AlignUp(kWinCertHeaderSize + static_cast<std::uint64_t>(der_size), kCertAlignment);
  if (out.size() + entry_size > UINT32_MAX) return Fail("cannot sign " + what + ": the signed image would pass 4 GiB");
  std::size_t table_offset = out.size();
  out.resize(table_offset + entry_size, '\0');
  PutLe32(out, table_offset, static_cast<std::uint32_t>(entry_size));
  PutLe16(out, table_offset + 4, kWinCertRevision);
  PutLe16(out, table_offset + 6, kWinCertTypePkcsSignedData);
  auto* p = reinterpret_cast<unsigned char*>(out.data() + table_offset + kWinCertHeaderSize);
  if (i2d_PKCS7(p7.get(), &p) != der_size) return failed("encoding the PKCS#7");

  PutLe32(out, pe->cert_dir_offset, static_cast<std::uint32_t>(table_offset));
  PutLe32(out, pe->cert_dir_offset + 4, static_cast<std::uint32_t>(entry_size));
  PutLe32(out, pe->checksum_offset, PeChecksum(out, pe->checksum_offset));
  return out;
}

Result<std::string> CheckSigningPair(std::string_view key_pem, std::string_view cert_pem, const std::string& what) {
  auto pair = LoadPair(key_pem, cert_pem, what);
  if (!pair) return Fail(pair.error());
  return OneLine(X509_get_subject_name(pair->cert.get()));
}

Result<PeSignature> ReadPeSignature(std::string_view image, const std::string& what) {
  auto pe = ParsePe(image, what);
  if (!pe) return Fail(pe.error());
  PeSignature out;
  if (pe->cert_table_size == 0) return out;
  auto sig = ReadSignature(image, *pe, what);
  if (!sig) return Fail(sig.error());
  auto si = OnlySigner(*sig, what);
  if (!si) return Fail(si.error());
  X509* cert = SignerCert(*sig, *si);
  if (cert == nullptr) return Fail(what + " has an unreadable signature: it does not carry its signer's certificate");
  auto digest = AuthenticodeDigest(image, what);
  if (!digest) return Fail(digest.error());
  out.signed_ = true;
  out.subject = OneLine(X509_get_subject_name(cert));
  out.issuer = OneLine(X509_get_issuer_name(cert));
  out.cert_sha256 = CertSha256(cert);
  out.digest_matches = *digest == sig->digest;
  return out;
}

Status VerifyPeSignature(std::string_view image, std::string_view cert_pem, const std::string& what) {
  auto pe = ParsePe(image, what);
  if (!pe) return Fail(pe.error());
  if (pe->cert_table_size == 0) return Fail(what + " is not signed");
  Cert cert = ReadCert(cert_pem);
  if (!cert) return Fail("cannot check " + what + ": the certificate is not PEM X.509 (" + OpenSslError() + ")");
  auto sig = ReadSignature(image, *pe, what);
  if (!sig) return Fail(sig.error());
  auto si_or = OnlySigner(*sig, what);
  if (!si_or) return Fail(si_or.error());
  PKCS7_SIGNER_INFO* si = *si_or;
  const std::string expected = OneLine(X509_get_subject_name(cert.get()));

  // The signer, by issuer and serial, must be cert_pem itself: sprout checks a signature
  // against the certificate it enrolls in db, not a chain to it.
  if (X509_NAME_cmp(si->issuer_and_serial->issuer, X509_get_issuer_name(cert.get())) != 0 ||
      ASN1_INTEGER_cmp(si->issuer_and_serial->serial, X509_get0_serialNumber(cert.get())) != 0) {
    X509* signer = SignerCert(*sig, si);
    return Fail(what + " is signed by another certificate (" +
                (signer != nullptr ? OneLine(X509_get_subject_name(signer)) : OneLine(si->issuer_and_serial->issuer)) +
                "), not by " + expected);
  }
  if (OBJ_obj2nid(si->digest_alg->algorithm) != NID_sha256)
    return Fail(what + "'s signature does not use SHA-256, and sprout checks SHA-256 ones only");
  if (sk_X509_ATTRIBUTE_num(si->auth_attr) <= 0)
    return Fail(what + "'s signature has no signed attributes, which Authenticode requires");

  // The signed attributes name the content and carry its digest.
  ASN1_TYPE* type = PKCS7_get_signed_attribute(si, NID_pkcs9_contentType);
  char oid[64] = "";
  if (type != nullptr && type->type == V_ASN1_OBJECT) OBJ_obj2txt(oid, sizeof oid, type->value.object, 1);
  if (std::strcmp(oid, kSpcIndirectDataOid) != 0)
    return Fail(what + "'s signature does not sign an SpcIndirectDataContent (its contentType attribute is wrong)");
  ASN1_OCTET_STRING* signed_md = PKCS7_digest_from_attributes(si->auth_attr);
  const auto md = Sha256Of(sig->content);
  if (signed_md == nullptr || ASN1_STRING_length(signed_md) != static_cast<int>(md.size()) ||
      std::memcmp(ASN1_STRING_get0_data(signed_md), md.data(), md.size()) != 0)
    return Fail(what + "'s signature does not match its content: the messageDigest attribute is wrong");

  // The RSA signature over the attributes, as they were encoded.
  unsigned char* attrs = nullptr;
  int attrs_len =
      ASN1_item_i2d(reinterpret_cast<ASN1_VALUE*>(si->auth_attr), &attrs, ASN1_ITEM_rptr(PKCS7_ATTR_VERIFY));
  std::unique_ptr<unsigned char, void (*)(unsigned char*)> attrs_owner(attrs,
                                                                       [](unsigned char* q) { OPENSSL_free(q); });
  MdCtx ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (attrs_len <= 0 || !ctx ||
      EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, X509_get0_pubkey(cert.get())) != 1) {
    return Fail("cannot check " + what + ": " + OpenSslError());
  }
  if (EVP_DigestVerify(ctx.get(), ASN1_STRING_get0_data(si->enc_digest),
                       static_cast<std::size_t>(ASN1_STRING_length(si->enc_digest)), attrs,
                       static_cast<std::size_t>(attrs_len)) != 1) {
    ERR_clear_error();
    return Fail(what + "'s signature does not verify with " + expected + "'s key");
  }

  auto digest = AuthenticodeDigest(image, what);
  if (!digest) return Fail(digest.error());
  if (*digest != sig->digest)
    return Fail(what + " has changed since it was signed: its Authenticode digest is not the signed one");
  return Ok{};
}

}  // namespace sprout::efi
