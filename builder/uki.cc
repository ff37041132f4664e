// `sprout uki`: a unified kernel image from systemd's EFI stub, a kernel, an initrd, a
// command line and os-release, signed for Secure Boot when given a key; `sprout keygen
// --secure-boot`: the key and certificate; `sprout inspect FILE.efi`: an EFI file's
// sections, signature and signed PCR policy (docs/secure-boot.md).
#include "efi/uki.h"

#include <iostream>
#include <nlohmann/json.hpp>

#include "builder/commands.h"
#include "efi/authenticode.h"
#include "efi/pcr_policy.h"
#include "efi/pe.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "util/sign.h"
#include "util/text.h"

namespace sprout::cli {

namespace fs = std::filesystem;

namespace {

int Failed(const std::string& message) {
  std::cerr << "sprout: " << message << "\n";
  return 1;
}

// Read reads a file the command was given; flag names it in the error.
Result<std::string> Read(const fs::path& path, const std::string& flag) {
  auto text = ReadFile(path);
  if (!text) return Fail(flag + " " + path.string() + ": " + text.error());
  return text;
}

const char* MachineName(std::uint16_t machine) {
  switch (machine) {
    case 0x8664:
      return "x86-64";
    case 0xaa64:
      return "arm64";
    default:
      return "other";
  }
}

// SignWith signs image with the key and certificate in the files --key and --cert name.
Result<std::string> SignWith(std::string_view image, const fs::path& key_file, const fs::path& cert_file,
                             const std::string& what) {
  auto key = Read(key_file, "--key");
  if (!key) return Fail(key.error());
  auto cert = Read(cert_file, "--cert");
  if (!cert) return Fail(cert.error());
  return efi::SignPe(image, *key, *cert, what);
}

// Printable is text from a file sprout does not trust, safe to print on a terminal: bytes
// outside printable ASCII become '?'.
std::string Printable(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    if (c < 0x20 || c > 0x7e) c = '?';
  return out;
}

// OsReleaseName is PRETTY_NAME from os-release text, or "".
std::string OsReleaseName(const std::string& osrel) {
  for (const auto& line : Split(osrel, '\n')) {
    std::string_view l = Trim(line);
    if (!l.starts_with("PRETTY_NAME=")) continue;
    std::string v(l.substr(12));
    if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'')) v = v.substr(1, v.size() - 2);
    return v;
  }
  return "";
}

}  // namespace

int Uki(const UkiOptions& o) {
  efi::UkiParts parts;
  auto stub = Read(o.stub, "--stub");
  if (!stub) return Failed(stub.error());
  auto kernel = Read(o.kernel, "--kernel");
  if (!kernel) return Failed(kernel.error());
  parts.kernel = std::move(*kernel);
  if (!o.initrd.empty()) {
    auto initrd = Read(o.initrd, "--initrd");
    if (!initrd) return Failed(initrd.error());
    parts.initrd = std::move(*initrd);
  }
  if (!o.os_release.empty()) {
    auto osrel = Read(o.os_release, "--os-release");
    if (!osrel) return Failed(osrel.error());
    parts.osrel = std::move(*osrel);
  }
  parts.cmdline = o.cmdline;
  if (o.key.empty() != o.cert.empty())
    return Failed(
        "--key and --cert go together: give both to sign the image, or neither (make a pair with "
        "`sprout keygen --secure-boot -o PREFIX`)");
  std::string key, cert;
  if (!o.key.empty()) {
    auto k = Read(o.key, "--key");
    if (!k) return Failed(k.error());
    auto c = Read(o.cert, "--cert");
    if (!c) return Failed(c.error());
    key = std::move(*k);
    cert = std::move(*c);
    // As in a Secure Boot build (builder/boot_signing.cc): the PCR policy signed with the
    // same key, so both paths make the same UKI from the same inputs.
    if (auto s = efi::AddPcrPolicy(parts, key); !s) return Failed("--key " + o.key.string() + ": " + s.error());
  }
  auto uki = efi::BuildUki(*stub, parts);
  if (!uki) return Failed(uki.error());
  std::string out = std::move(*uki);
  if (!key.empty()) {
    auto signed_image = efi::SignPe(out, key, cert, o.output.string());
    if (!signed_image) return Failed(signed_image.error());
    out = std::move(*signed_image);
  }
  if (auto s = WriteFileAtomic(o.output, out); !s) return Failed(s.error());
  std::cout << o.output.string() << ": unified kernel image, " << HumanSize(out.size()) << ", sha256 " << Sha256Hex(out)
            << "\n";
  if (o.key.empty()) {
    std::cout << "not signed: Secure Boot firmware will refuse it (sign with --key and --cert)\n";
  } else {
    auto sig = efi::ReadPeSignature(out, o.output.string());
    if (sig && sig->signed_) std::cout << "signed by:  " << sig->subject << "\n";
    auto policy = efi::CheckPcrPolicy(out);
    if (policy && policy->ok())
      std::cout << "pcr policy: PCR 11 " << policy->pcr11 << ", signed by the same key (sha256 "
                << policy->key_fingerprint << ")\n";
  }
  return 0;
}

int SignEfi(const fs::path& input, const fs::path& output, const fs::path& key_file, const fs::path& cert_file) {
  auto image = Read(input, "the image");
  if (!image) return Failed(image.error());
  auto signed_image = SignWith(*image, key_file, cert_file, input.string());
  if (!signed_image) return Failed(signed_image.error());
  if (auto s = WriteFileAtomic(output, *signed_image); !s) return Failed(s.error());
  auto sig = efi::ReadPeSignature(*signed_image, output.string());
  std::cout << output.string() << ": " << input.string() << " signed"
            << (sig && sig->signed_ ? " by " + sig->subject : std::string()) << ", sha256 " << Sha256Hex(*signed_image)
            << "\n";
  return 0;
}

int KeygenSecureBoot(const fs::path& prefix, const std::string& common_name) {
  fs::path key = prefix.string() + ".key";
  fs::path cert = prefix.string() + ".crt";
  if (auto s = GenerateSecureBootKey(key, cert, common_name); !s) return Failed(s.error());
  std::cout << "private key: " << key.string() << " (RSA 2048, mode 0600; keep it secret)\n"
            << "certificate: " << cert.string() << " (CN=" << common_name << ", self-signed)\n"
            << "sign with:   sprout uki ... --key " << key.string() << " --cert " << cert.string() << "\n"
            << "enroll:      the certificate goes into the firmware's db (docs/secure-boot.md)\n";
  return 0;
}

int InspectEfi(const fs::path& file, bool json) {
  auto bytes = ReadFile(file);
  if (!bytes) return Failed("cannot read " + file.string() + ": " + bytes.error());
  auto pe = efi::ParsePe(*bytes, file.string());
  if (!pe) return Failed(pe.error());
  nlohmann::ordered_json out;
  out["file"] = file.string();
  out["machine"] = MachineName(pe->machine);
  out["size"] = bytes->size();
  out["sections"] = nlohmann::json::array();
  for (const auto& s : pe->sections)
    out["sections"].push_back({{"name", Printable(s.name)}, {"size", s.virtual_size}, {"address", s.virtual_address}});
  const bool uki = efi::FindSection(*pe, ".linux") != nullptr;
  out["uki"] = uki;
  if (uki) {
    auto cmdline = efi::UkiSection(*bytes, ".cmdline");
    out["cmdline"] = cmdline ? Printable(Trim(*cmdline)) : "";
    auto osrel = efi::UkiSection(*bytes, ".osrel");
    out["osRelease"] = osrel ? Printable(OsReleaseName(*osrel)) : "";
  }
  efi::PcrPolicyCheck policy;
  if (uki) {
    auto checked = efi::CheckPcrPolicy(*bytes);
    if (!checked) return Failed(checked.error());
    policy = std::move(*checked);
    // The reasons quote the file's own strings (its JSON's digests).
    policy.problem = Printable(policy.problem);
    if (policy.present) {
      out["pcrPolicy"] = {{"pcr11", policy.pcr11},
                          {"keyFingerprint", policy.key_fingerprint},
                          {"signedPolicy", Printable(policy.signed_policy)},
                          {"policyMatches", policy.policy_matches},
                          {"signatureVerifies", policy.signature_verifies},
                          {"problem", policy.problem}};
    }
  }
  const bool policy_bad = policy.present && !policy.ok();
  auto sig = efi::ReadPeSignature(*bytes, file.string());
  if (!sig) return Failed(sig.error());
  out["signed"] = sig->signed_;
  if (sig->signed_) {
    sig->subject = Printable(sig->subject);
    sig->issuer = Printable(sig->issuer);
    out["signer"] = {{"subject", sig->subject},
                     {"issuer", sig->issuer},
                     {"certificateSha256", sig->cert_sha256},
                     {"digestMatches", sig->digest_matches}};
  }
  const bool digest_bad = sig->signed_ && !sig->digest_matches;
  if (json) {
    std::cout << out.dump(2) << "\n";
    return digest_bad || policy_bad ? 1 : 0;
  }
  std::cout << file.string() << ": EFI application (PE32+, " << out["machine"].get<std::string>() << "), "
            << HumanSize(bytes->size()) << (uki ? ", a unified kernel image" : "") << "\n";
  std::cout << "sections:  ";
  for (const auto& s : pe->sections) std::cout << " " << Printable(s.name) << " (" << HumanSize(s.virtual_size) << ")";
  std::cout << "\n";
  if (uki) {
    std::cout << "cmdline:    " << out["cmdline"].get<std::string>() << "\n";
    std::cout << "os-release: " << out["osRelease"].get<std::string>() << "\n";
    if (!policy.present) {
      std::cout << "pcr policy: none (no .pcrsig: a state sealed to a signing key does not unlock under it)\n";
    } else if (policy.ok()) {
      std::cout << "pcr policy: PCR 11 " << policy.pcr11 << ", key sha256 " << policy.key_fingerprint
                << ": signed for this file's PCR 11, and the signature verifies with .pcrpkey\n";
    } else {
      std::cout << "pcr policy: PCR 11 " << (policy.pcr11.empty() ? "unknown" : policy.pcr11) << ", key sha256 "
                << (policy.key_fingerprint.empty() ? "unknown" : policy.key_fingerprint)
                << ": DOES NOT MATCH this file: " << policy.problem << "\n";
    }
  }
  if (!sig->signed_) {
    std::cout << "signature:  none (Secure Boot firmware refuses it)\n";
    return policy_bad ? 1 : 0;
  }
  std::cout << "signed by:  " << sig->subject << "\n"
            << "issuer:     " << sig->issuer << "\n"
            << "cert sha256: " << sig->cert_sha256 << "\n"
            << "digest:     "
            << (sig->digest_matches ? "the signed Authenticode digest is this file's"
                                    : "DOES NOT MATCH this file: it changed after signing")
            << "\n";
  return digest_bad || policy_bad ? 1 : 0;
}

}  // namespace sprout::cli
