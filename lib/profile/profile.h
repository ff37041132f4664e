// Profiles: the YAML description of an image, its `extends:` chain, and validation.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "shoot/shoot.h"
#include "util/diag.h"
#include "util/result.h"

namespace sprout {

// Role says which overlay and which first-boot behaviour a node gets.
enum class Role { kControlPlane, kWorker };

// RoleName is the profile spelling of a role ("control-plane", "worker").
const char* RoleName(Role role);

// Format is one kind of output image.
enum class Format { kRaw, kIso, kPxe, kQcow2 };

// FormatName is the profile spelling of a format.
const char* FormatName(Format format);

// ParseFormatName is the inverse of FormatName; nullopt for an unknown name.
std::optional<Format> ParseFormatName(const std::string& name);

// Arch is the CPU architecture an image is built for, in Debian's spelling.
enum class Arch { kAmd64, kArm64 };

// ArchName is the profile spelling of an architecture ("amd64", "arm64").
const char* ArchName(Arch arch);

// ParseArchName is the inverse of ArchName; nullopt for an unknown name.
std::optional<Arch> ParseArchName(const std::string& name);

// ArchHint is the hint for a name ParseArchName does not know: the Debian name of a
// kernel or GNU spelling ("x86_64", "aarch64"), else the list of names.
std::string ArchHint(const std::string& name);

// ProfileFile is one file to place into the root: from a source file, a URL (fetched,
// checked and cached at build time) or inline content.
struct ProfileFile {
  std::string path;                    // absolute path inside the image
  std::filesystem::path source;        // absolute path on the build host, if from a file
  std::string url;                     // http(s) or file URL, if fetched
  std::string sha256;                  // expected digest: required with url, optional with source
  std::optional<std::string> content;  // inline content, if given
  std::uint32_t mode = 0644;
  Location where;  // the profile entry that declared it
};

// StateEncryption says whether the initrd encrypts the state partition (/var) at first
// boot: kTpm2 formats it as LUKS2 with its key sealed to the node's TPM 2.0
// (docs/secure-boot.md).
enum class StateEncryption { kNone, kTpm2 };

// StateEncryptionName is the profile spelling ("none", "tpm2"), also the value of the
// kernel command line's sprout.state.encryption=.
const char* StateEncryptionName(StateEncryption encryption);

// WithoutTpm says what a node whose state is to be encrypted does when it has no TPM:
// refuse to start (the initrd stops and says why), or run with plain ext4 state and a
// loud warning.
enum class WithoutTpm { kRefuse, kPlain };

// WithoutTpmName is the profile spelling ("refuse", "plain"), also the value of the
// kernel command line's sprout.state.without-tpm=.
const char* WithoutTpmName(WithoutTpm without_tpm);

// PodHost is what runs the static pods on a node (docs/shoot.md).
enum class PodHost { kPodman, kKubelet };

// KubeletSettings says where the kubelet binary comes from and how to configure it.
struct KubeletSettings {
  ProfileFile binary;            // installed as /usr/bin/kubelet (url or source, with sha256)
  std::filesystem::path recipe;  // or built: RECIPE/host.sh CACHE prints the folder holding it
  std::filesystem::path proxy;   // kube-proxy, when the recipe's folder holds one (set by the build)
  std::filesystem::path folder;  // the folder the recipe printed (set by the build): its `versions`
                                 // file and `root/` tree, when it has them (docs/stack.md)
  std::string config_yaml;       // KubeletConfiguration fields that override sprout's defaults
  bool present = false;
};

// ProfileImage is one container image to preload (`images:`; docs/images.md). Credentials
// are never inline: `credentials` names a docker-style config.json.
struct ProfileImage {
  std::string ref;                    // registry/repository[:tag][@sha256:...]
  std::string source;                 // "" (the registry) or recipe:DIR, oci:DIR, oci-archive:TAR, docker-archive:TAR
  std::filesystem::path credentials;  // absolute, or empty
  std::string platform;               // "" = linux/ and the profile's arch
  Location where;
};

// ProfileWorkload is one `workloads:` entry (docs/workloads.md): plain manifests, or a
// Helm chart rendered at build time, baked into the root for the cluster to apply.
struct ProfileWorkload {
  enum class Type { kManifests, kChart };
  std::string name;  // a DNS label, unique in the profile
  Type type = Type::kManifests;
  std::string source;                            // the chart or the manifests as the profile wrote them
  std::vector<std::filesystem::path> manifests;  // kManifests: files and folders, absolute
  std::filesystem::path chart;                   // kChart: a packaged .tgz or a chart folder, absolute
  std::string release;                           // kChart: the release name; default: name
  std::string ns = "default";                    // the namespace of namespaced objects that name none
  std::vector<std::filesystem::path> values;     // kChart: values files, absolute, in order
  std::string set_json;                          // kChart: `set:`, the inline values as JSON; "" none
  Location where;                                // the entry
};

// BackupProfile is the profile's `backup:` block (docs/backup.md): the node's default
// sink, schedule and retention, baked into the cluster record. Per-node settings
// (sprout.backup-dir) and flags override it; a generic image bakes no share credentials.
struct BackupProfile {
  std::string dir;            // a folder on the node, or nfs://HOST/PATH; "" none
  std::int64_t interval = 0;  // seconds between scheduled snapshots; 0 none
  int keep = 0;               // good bundles kept; 0: sprout-firstboot's default
  bool present = false;
};

// Profile is a fully resolved profile: every `extends:` merged, every path absolute.
struct Profile {
  std::filesystem::path file;                // the profile that was asked for (absolute, symlinks resolved)
  std::vector<std::filesystem::path> chain;  // that file and its ancestors, root first
  std::string name;
  std::string description;
  std::filesystem::path base;  // base OS: recipe directory, tarball, or directory
  Location base_where;
  Role role = Role::kControlPlane;
  Arch arch = Arch::kAmd64;  // `arch:`; `--arch` overrides it
  Location arch_where;
  std::vector<Format> formats{Format::kRaw};
  std::vector<std::string> cmdline;             // extra kernel command-line words
  std::vector<std::filesystem::path> overlays;  // extra overlays, after common and role
  std::vector<ProfileFile> files;
  std::uint64_t esp_size = 64ull << 20;
  std::uint64_t state_size = 256ull << 20;
  std::uint64_t root_size = 0;                                // 0 = just large enough for the root file system
  StateEncryption state_encryption = StateEncryption::kNone;  // `disk.stateEncryption`
  WithoutTpm without_tpm = WithoutTpm::kRefuse;               // `disk.withoutTpm`, with kTpm2 only
  std::int64_t source_date_epoch = 1700000000;
  std::string hostname;                            // baked default hostname; empty = generated at first boot
  std::filesystem::path shoot_file;                // the Gardener Shoot, if the profile names one
  std::optional<Shoot> shoot;                      // parsed from shoot_file
  std::vector<std::filesystem::path> static_pods;  // folders of manifests that override or add templates
  std::vector<std::string> without_static_pods;    // template names left out of the image (no .yaml)
  PodHost pod_host = PodHost::kPodman;
  KubeletSettings kubelet;
  std::vector<ProfileImage> images;        // container images to preload, in order
  std::vector<ProfileWorkload> workloads;  // manifests and charts the cluster applies, in order
  BackupProfile backup;                    // a child's `backup:` block replaces its parent's
  // certificates.validity: the lifetime of the leaf certificates the nodes issue
  // themselves (renewed two thirds into it); 0: one year (pki::kDefaultLeafValiditySeconds).
  std::int64_t cert_validity_seconds = 0;
  // update.serial: this build's serial, which an updating node compares with the running
  // build's (docs/updates.md); nullopt: the build's epoch (SOURCE_DATE_EPOCH, else
  // source_date_epoch). `sprout build --serial N` sets it.
  std::optional<std::int64_t> update_serial;
  // update.profile: the profile whose nodes this build updates (a variant of a profile
  // names it); "": name.
  std::string update_profile;
};

// LoadProfile reads path and everything it extends, reports every problem it finds in
// diags (it does not stop at the first), and returns the merged profile if there were
// no errors.
std::optional<Profile> LoadProfile(const std::filesystem::path& path, Diagnostics& diags);

// RecordedPath is how a record names path: relative to dir (the profile's own folder),
// climbing out of it with ".." where needed, so the record says where an input sits
// relative to the profile and never where the checkout sits on the host.
std::string RecordedPath(const std::filesystem::path& path, const std::filesystem::path& dir);

// ProfileToJson renders the resolved profile, every path relative to the profile's own
// folder (RecordedPath), for the image's record and `sprout validate --print`.
std::string ProfileToJson(const Profile& profile);

}  // namespace sprout
