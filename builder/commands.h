// The sprout subcommands; main.cc parses arguments and dispatches here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "profile/profile.h"

namespace sprout::cli {

// BuildOptions are the settings of `sprout build`.
struct BuildOptions {
  std::filesystem::path profile;
  std::filesystem::path out_dir;
  std::filesystem::path cache_dir;
  bool build_base = false;          // run the base recipe if its tarball is not cached
  int jobs = 0;                     // compressor threads; 0 = all cores
  std::vector<Format> formats;      // overrides the profile's formats when not empty
  bool offline = false;             // container images must come from the cache (docs/images.md)
  std::filesystem::path ca_bundle;  // extra CA bundle for registries
  std::filesystem::path sign_key;   // Ed25519 private key (PEM) to sign manifest.json with
  // RSA key and certificate (PEM) to sign the boot files for Secure Boot (docs/secure-boot.md)
  std::filesystem::path secure_boot_key, secure_boot_cert;
  std::optional<Arch> arch;            // --arch: overrides the profile's arch
  std::optional<std::int64_t> serial;  // --serial: overrides the profile's update.serial
};

// Validate checks a profile and prints every problem; --print shows the resolved profile.
int Validate(const std::filesystem::path& profile, bool print);

// Cis prints the CIS Benchmark report (Markdown, docs/cis.md) of the files the profile's
// image and a control-plane node of it would have, as the build renders them; a profile
// with errors gets them all, and 1.
int Cis(const std::filesystem::path& profile);

// Build makes the profile's images in out_dir.
int Build(const BuildOptions& options);

// Base builds (or finds) the cached base of a profile or recipe directory, for arch
// (default: the profile's, or amd64 for a recipe directory).
int Base(const std::filesystem::path& profile_or_recipe, const std::filesystem::path& cache_dir, bool force,
         std::optional<Arch> arch = std::nullopt);

// BootOptions are the settings of `sprout boot`.
struct BootOptions {
  std::filesystem::path image;
  bool snapshot = false;
  std::string memory = "2048";
  int cpus = 2;
  bool kvm = false;                // use KVM instead of software emulation
  std::vector<std::string> extra;  // appended to the QEMU command line
};

// PersonalizeOptions are the settings `sprout personalize` writes into an image.
struct PersonalizeOptions {
  std::filesystem::path image;
  std::optional<std::filesystem::path> secret_file, ssh_key_file;
  std::optional<std::filesystem::path> new_secret_file;  // --new-cluster-secret: made here, must not exist
  std::optional<std::string> hostname, role, address, gateway;
  std::optional<std::string> backup_dir, restore_from;  // docs/backup.md
  std::optional<std::string> ca_cert_hash;              // a worker's pin of the cluster CA
  std::vector<std::string> peers;
  bool print = false;  // show the current settings (secret redacted) and change nothing
  bool clear = false;  // drop the current settings first
};

// Personalize writes per-node settings into the image's config area.
int Personalize(const PersonalizeOptions& options);

// PrintWorkerSecret prints the worker secret of the cluster secret in secret_file: what a
// worker is given (sprout.worker-secret) instead of the cluster secret.
int PrintWorkerSecret(const std::filesystem::path& secret_file);

// PrintCaCertHash prints the pin of the Kubernetes CA a founder with the cluster secret
// in secret_file makes (pki::ClusterCaCertHash): a worker's ca-cert-hash.
int PrintCaCertHash(const std::filesystem::path& secret_file);

// Boot starts QEMU on a raw image with UEFI firmware and a serial console.
int Boot(const BootOptions& options);

// Keygen writes an Ed25519 key pair PREFIX.key and PREFIX.pub for --sign.
int Keygen(const std::filesystem::path& prefix);

// Verify checks an output directory: every file against the manifest and sha256sums,
// and the manifest's signature when a public key is given.
int Verify(const std::filesystem::path& dir, const std::filesystem::path& public_key);

// Inspect reports the partitions, root hash, profile and images of an image, from the
// image alone.
int Inspect(const std::filesystem::path& image, bool json);

// UkiOptions are the settings of `sprout uki`.
struct UkiOptions {
  std::filesystem::path stub, kernel, initrd, os_release, output;
  std::string cmdline;
  std::filesystem::path key, cert;  // both or neither: sign for Secure Boot
};

// Uki writes a unified kernel image (docs/secure-boot.md), signed when given a key.
int Uki(const UkiOptions& options);

// SignEfi signs an EFI image (a boot loader such as systemd-boot, or a UKI) for Secure
// Boot and writes it to output.
int SignEfi(const std::filesystem::path& input, const std::filesystem::path& output, const std::filesystem::path& key,
            const std::filesystem::path& cert);

// KeygenSecureBoot writes PREFIX.key (RSA) and PREFIX.crt (self-signed) for Secure Boot.
int KeygenSecureBoot(const std::filesystem::path& prefix, const std::string& common_name);

// InspectEfi reports an EFI file's sections and signature; 1 when its signature does
// not match it.
int InspectEfi(const std::filesystem::path& file, bool json);

// DataDir is where sprout's overlays, units and initrd stages live.
std::filesystem::path DataDir();

}  // namespace sprout::cli
