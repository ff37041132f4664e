// The cluster parts of a build: fetched files, static-pod templates, the Shoot's record.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "image/arch.h"
#include "image/base.h"
#include "image/compile_log.h"
#include "image/rootfs.h"
#include "oci/pull.h"
#include "profile/profile.h"
#include "staticpod/kubelet.h"
#include "staticpod/staticpod.h"
#include "util/result.h"

namespace sprout {

// FetchProfileFiles fetches every `url` file of the profile (and the kubelet binary, when
// it is not compiled by a recipe) into the cache, checks every sha256 (also of `source`
// files that give one), and points the entries at the verified copies.
Status FetchProfileFiles(Profile& p, const std::filesystem::path& cache_dir);

// CompileKubelet runs the kubelet's recipe for the image's arch (RECIPE/host.sh CACHE,
// with SPROUT_ARCH, and SPROUT_OFFLINE=1 for `--offline`: the recipe then uses no network,
// images/stack/compile.sh only its module cache; it prints the folder of the host
// binaries, and a warm cache answers at once) and points k at its kubelet (which must be
// a program of arch) and kube-proxy.
// The recipe's stderr goes to a log that watch hears as progress (CompilePhase) about
// twice a second; a failure quotes the log's last lines and keeps it. Returns what the
// log said: a cache hit or miss, the components compiled and their times.
Result<CompileLog> CompileKubelet(KubeletSettings& k, Arch arch, const std::filesystem::path& cache_dir, bool offline,
                                  const PhaseFn& watch);

// StackOf reads the versions file of the kubelet recipe's folder (k.folder, set by
// CompileKubelet; docs/stack.md): the Kubernetes and containerd versions the kubelet's
// and containerd's configuration are written for. No folder or no file: Stack{} (1.20).
Result<Stack> StackOf(const KubeletSettings& k);

// SampleInput stands in for a node at build time, so every template is rendered and
// checked before an image exists (and `sprout cis` judges what it renders).
StaticPodInput SampleInput(const Profile& p);

// StaticPodTemplates are the static-pod templates an image gets, by file name: sprout's
// own in data_dir/staticpods, replaced or extended by the profile's staticPods folders,
// less its withoutStaticPods. Each problem is added to errors.
std::map<std::string, std::filesystem::path> StaticPodTemplates(const Profile& p, const std::filesystem::path& data_dir,
                                                                std::vector<std::string>& errors);

// AddClusterFiles adds the static-pod templates (sprout's, then the profile's overrides
// and additions, each checked by rendering it with sample values), the Shoot's
// cluster.json, the /etc/kubernetes link into the state partition and, for the kubelet
// pod host, the kubelet binary, configuration and unit. The kubelet's files are written
// for stack, or when it is not given for StackOf(p.kubelet) (the compiled recipe's).
Status AddClusterFiles(const Profile& p, const std::filesystem::path& data_dir, std::vector<RootEntry>& add,
                       const std::optional<Stack>& stack = std::nullopt);

// ComponentImages maps each preloaded image to the component of the same name (the last
// path element of its repository: localhost/sprout/etcd:3.4 -> etcd), as
// "repository@sha256:<manifest digest>", the form podman resolves without any pull.
std::map<std::string, std::string> ComponentImages(const std::vector<oci::PreloadedImage>& images);

// AddClusterRecord writes /usr/share/sprout/cluster.json: the Shoot's fields (when the
// profile names one), the pod host and the component images, for sprout-firstboot; and
// for the kubelet pod host containerd's configuration, whose sandbox is the preloaded
// pause image (an error when the profile preloads none).
Status AddClusterRecord(const Profile& p, const std::vector<oci::PreloadedImage>& images, std::vector<RootEntry>& add);

}  // namespace sprout
