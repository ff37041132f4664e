// `sprout keygen` and `sprout verify`: the Ed25519 keys that sign a build's manifest,
// and the check of an output directory against its manifest, sums and signature.
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "builder/commands.h"
#include "image/media.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "util/sign.h"

namespace sprout::cli {

namespace fs = std::filesystem;

// --- keygen

int Keygen(const fs::path& prefix) {
  fs::path priv = prefix.string() + ".key";
  fs::path pub = prefix.string() + ".pub";
  if (auto s = GenerateEd25519(priv, pub); !s) {
    std::cerr << "sprout: " << s.error() << "\n";
    return 1;
  }
  std::cout << "private key: " << priv.string() << " (mode 0600; keep it secret)\n"
            << "public key:  " << pub.string() << "\n"
            << "sign with: sprout build PROFILE -o DIR --sign " << priv.string() << "\n"
            << "check with: sprout verify DIR --key " << pub.string() << "\n";
  return 0;
}

// --- verify

int Verify(const fs::path& dir, const fs::path& public_key) {
  int problems = 0;
  auto bad = [&](const std::string& file, const std::string& why) {
    std::cout << "FAIL " << file << ": " << why << "\n";
    ++problems;
  };
  auto sums_text = ReadFile(dir / "sha256sums");
  auto manifest_text = ReadFile(dir / "manifest.json");
  if (!manifest_text) {
    bad("manifest.json", "cannot be read; is " + dir.string() + " a sprout output directory?");
    return 1;
  }
  std::map<std::string, std::string> listed;  // file -> sha256 from sha256sums
  if (!sums_text) {
    bad("sha256sums", "cannot be read");
  } else if (auto sums = ParseSha256Sums(*sums_text); !sums) {
    bad("sha256sums", sums.error());
  } else {
    for (const auto& s : *sums) listed[s.file] = s.sha256;
  }
  std::map<std::string, std::string> actual;
  auto digest_of = [&](const std::string& file) -> std::string {
    if (auto it = actual.find(file); it != actual.end()) return it->second;
    auto d = Sha256File(dir / file);
    return actual[file] = d ? *d : "";
  };

  // 1. The signature over the manifest, when a key is given.
  if (!public_key.empty()) {
    auto pub = ReadFile(public_key);
    auto sig = ReadFile(dir / "manifest.json.sig");
    if (!pub) {
      bad(public_key.string(), pub.error());
    } else if (!sig) {
      bad("manifest.json.sig", "missing; build with --sign KEY to sign the manifest");
    } else if (auto s = VerifyEd25519(*pub, *manifest_text, *sig); !s) {
      // The sums tell which of the two changed: an unchanged manifest blames the signature.
      bool manifest_as_listed = listed.count("manifest.json") && listed["manifest.json"] == Sha256Hex(*manifest_text);
      bad(manifest_as_listed ? "manifest.json.sig" : "manifest.json", s.error());
    } else {
      std::cout << "ok   manifest.json signature (" << public_key.filename().string() << ")\n";
    }
  } else if (fs::exists(dir / "manifest.json.sig")) {
    std::cout << "note manifest.json.sig not checked: give the public key with --key PUB\n";
  }

  // 2. Every output the manifest names, by size and sha256.
  nlohmann::json manifest;
  try {
    manifest = nlohmann::json::parse(*manifest_text);
  } catch (const std::exception& e) {
    bad("manifest.json", std::string("is not JSON: ") + e.what());
    return 1;
  }
  std::map<std::string, std::string> expected;  // file -> sha256 from the manifest
  if (manifest.contains("outputs") && manifest["outputs"].is_array()) {
    for (const auto& o : manifest["outputs"]) {
      if (!o.contains("file") || !o.contains("sha256")) continue;
      expected[o["file"].get<std::string>()] = o["sha256"].get<std::string>();
    }
  }
  if (manifest.contains("sbom") && manifest["sbom"].contains("sha256")) {
    expected[manifest["sbom"]["file"].get<std::string>()] = manifest["sbom"]["sha256"].get<std::string>();
  }
  if (expected.empty()) bad("manifest.json", "lists no outputs");
  for (const auto& [file, want] : expected) {
    std::string got = digest_of(file);
    if (got.empty()) {
      bad(file, "missing or unreadable");
    } else if (got != want) {
      bad(file, "sha256 " + got + " differs from the manifest's " + want);
    } else {
      std::cout << "ok   " << file << "\n";
    }
  }

  // 3. Every sha256sums line: the files the manifest vouches for must agree with it; the
  // others (the manifest and its signature) are checked against their bytes.
  for (const auto& [file, want] : listed) {
    std::string got = digest_of(file);
    if (got.empty()) {
      bad(file, "listed in sha256sums but missing");
    } else if (got != want) {
      if (expected.count(file) && expected[file] == got) {
        bad("sha256sums", "its line for " + file + " is wrong (the file matches the manifest)");
      } else if (!expected.count(file)) {
        bad(file, "sha256 " + got + " differs from sha256sums' " + want);
      }  // else: already reported in step 2
    } else if (!expected.count(file)) {
      std::cout << "ok   " << file << "\n";
    }
  }
  for (const auto& [file, want] : expected) {
    if (!listed.count(file) && sums_text) bad("sha256sums", "does not list " + file);
  }
  if (problems > 0) {
    std::cout << dir.string() << ": " << problems << (problems == 1 ? " problem" : " problems") << "\n";
    return 1;
  }
  std::cout << dir.string() << ": verified " << actual.size() << " files"
            << (public_key.empty() ? " (signature not checked)" : " and the signature") << "\n";
  return 0;
}

}  // namespace sprout::cli
