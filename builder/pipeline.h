// The steps of `sprout build`, one function each, with plain structs in and out;
// build.cc runs them in order (lib/image/step_list.h names them). Pure decisions live
// below, in lib/image (plan, boot_files, manifest); these functions write the files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "builder/commands.h"
#include "builder/live_media.h"
#include "builder/workloads.h"
#include "image/base.h"
#include "image/boot_files.h"
#include "image/compile_log.h"
#include "image/manifest.h"
#include "image/plan.h"
#include "image/rootfs.h"
#include "image/step_list.h"
#include "oci/pull.h"
#include "profile/profile.h"
#include "util/result.h"

namespace sprout::cli {

// BuildInputs is what resolving the profile settles.
struct BuildInputs {
  Profile profile;                  // with its fetched files
  std::vector<Format> formats;      // --format, else the profile's
  std::filesystem::path firstboot;  // the sprout-firstboot binary that goes into the root
  std::string update_pub;           // with --sign: the signing key's public key, the image's update trust root
  SecureBootKeys secure_boot;       // with --secure-boot-key: the pair the boot files are signed with
  RenderedWorkloads workloads;      // the profile's workloads, rendered and checked (none: empty)
};

// BuildPlan is what every later step reads: the inputs, the base, and the decisions made
// from them before any file is written.
struct BuildPlan {
  BuildInputs in;
  BaseRef base;
  std::int64_t epoch = 0;      // SOURCE_DATE_EPOCH, else the profile's
  std::string profile_json;    // the resolved profile as recorded (with that epoch), paths relative to its folder
  BuildIdentity identity;      // its serial, update profile, role and cluster (manifest.json's "update")
  std::string inputs_json;     // the inputs by content (image/inputs.h)
  std::string seed;            // digest of inputs_json; every identifier derives from it
  DiskPlan disk;               // completed with the root hash after the verity step
  std::filesystem::path work;  // the work directory, once the workspace is open
};

// RootContents is everything that goes on top of the base, and the preloaded images.
struct RootContents {
  std::vector<RootEntry> additions;
  std::vector<oci::PreloadedImage> images;
};

// PackedRoot is the squashfs root and the files captured while packing it.
struct PackedRoot {
  std::filesystem::path image;
  std::uint64_t bytes = 0;
  std::uint64_t entries = 0;
  std::map<std::string, std::string> captured;  // image/boot_files.h: CapturedPaths
};

// VerityTree is the root's dm-verity hash tree and its root hash.
struct VerityTree {
  std::filesystem::path image;
  std::uint64_t bytes = 0;
  std::string root_hash;
};

// FsImage is a partition's file-system image.
struct FsImage {
  std::filesystem::path image;
  std::uint64_t size = 0;
};

// Esp is the raw disk's ESP, and the image metadata it carries for every medium.
struct Esp {
  FsImage fs;
  std::string metadata;  // sprout/image.json
};

// RawDisk is the GPT disk image in the work directory.
struct RawDisk {
  std::filesystem::path image;
  std::uint64_t size = 0;
};

// Medium is what one medium made from the raw disk added to the work directory.
struct Medium {
  BuildStep step;
  std::vector<std::string> files;  // relative to the work directory
  std::uint64_t shown_bytes = 0;   // the size its step reports
};

// Manifest is the list of files to publish, in order, sha256sums last.
struct Manifest {
  std::vector<std::string> files;
  std::size_t packages = 0;    // Debian packages in the SBOM
  std::size_t go_modules = 0;  // and Go modules
};

// LoadAndReport reads a profile and prints its diagnostics; nullopt after an error.
std::optional<Profile> LoadAndReport(const std::filesystem::path& path);

// ResolveProfile fetches the profile's files and finds sprout-firstboot.
Result<BuildInputs> ResolveProfile(Profile profile, const BuildOptions& options);

// CompilesKubelet says whether a build of profile p has the compile step: its kubelet
// comes from a recipe (images/kubernetes, compiled from Debian's source package).
bool CompilesKubelet(const Profile& p);

// CompileHost runs the kubelet's recipe (CompileKubelet, builder/cluster.h), with its
// phases to watch, and points the profile at the kubelet and kube-proxy it made. The
// same cached binaries serve the recipe's images in the preload step.
Result<CompileLog> CompileHost(BuildInputs& in, const BuildOptions& options, const PhaseFn& watch);

// PlanBuild fixes the epoch, the recorded profile, the inputs by content, the seed and
// the disk plan. It reads every input the profile names, to digest it.
Result<BuildPlan> PlanBuild(BuildInputs in, BaseRef base);

// RootAdditions lists everything sprout puts on top of the base but the images.
Result<std::vector<RootEntry>> RootAdditions(const BuildPlan& plan);

// Preload makes sure the profile's images are cached (pulling or building them) and
// adds them, with the cluster record that names them, to the root.
Result<RootContents> Preload(const BuildPlan& plan, const BuildOptions& options, std::vector<RootEntry> additions);

// PackRoot streams the base and the additions into tar2sqfs.
Result<PackedRoot> PackRoot(const BuildPlan& plan, std::vector<RootEntry> additions, int jobs,
                            const ProgressFn& progress);

// BuildVerity writes the root's hash tree with the plan's salt and UUID.
Result<VerityTree> BuildVerity(const BuildPlan& plan, const PackedRoot& root);

// MakeInitrd takes the boot files from the root and appends sprout's initrd stages.
Result<BootFiles> MakeInitrd(const BuildPlan& plan, const PackedRoot& root);

// MakeEsp writes the raw disk's ESP: boot files, loader entry and image metadata.
Result<Esp> MakeEsp(const BuildPlan& plan, const BootFiles& boot, const RootContents& contents);

// MakeState writes the empty ext4 state partition.
Result<FsImage> MakeState(const BuildPlan& plan);

// WriteRaw lays out the GPT and writes the raw disk from the partition images.
Result<RawDisk> WriteRaw(const BuildPlan& plan, const PackedRoot& root, const VerityTree& verity, const Esp& esp,
                         const FsImage& state);

// KeptRaw lists the raw disk among the outputs when the formats keep it.
std::vector<std::string> KeptRaw(const BuildPlan& plan);

// LiveMedia is what the ISO and the PXE bundle are made of.
MediaInputs LiveMedia(const BuildPlan& plan, const PackedRoot& root, const VerityTree& verity, const BootFiles& boot,
                      const Esp& esp);

// MakeMedium makes the medium of a media step (BuildSteps' kIso, kPxe or kQcow2).
Result<Medium> MakeMedium(BuildStep step, const MediaInputs& media, const RawDisk& raw);

// WriteManifest writes the SBOM, manifest.json (signed when options say so) and
// sha256sums over outputs, and lists everything to publish.
Result<Manifest> WriteManifest(const BuildPlan& plan, const BuildOptions& options,
                               const std::vector<std::string>& outputs, const PackedRoot& root, const BootFiles& boot,
                               const RootContents& contents);

// Summary is each step's one-line result, shown after its time.
std::string Summary(const BuildInputs& in);
std::string Summary(const RootContents& contents);
std::string Summary(const PackedRoot& root);
std::string Summary(const VerityTree& verity);
std::string Summary(const Esp& esp);
std::string Summary(const FsImage& image);
std::string Summary(const RawDisk& raw);
std::string Summary(const Medium& medium);
std::string Summary(const Manifest& manifest);

}  // namespace sprout::cli

namespace sprout {

// Summary of the base, the compile and the boot files, found by the steps' argument lookup.
std::string Summary(const BaseRef& base);
std::string Summary(const CompileLog& log);
std::string Summary(const BootFiles& boot);

}  // namespace sprout
