#include "builder/images.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <map>
#include <set>

#include "builder/commands.h"
#include "oci/manifest.h"
#include "util/diag.h"
#include "util/text.h"

namespace sprout::cli {

namespace fs = std::filesystem;

std::vector<oci::ImageSpec> SpecsOf(const Profile& profile) {
  std::vector<oci::ImageSpec> specs;
  // An image without a platform of its own is taken for the profile's architecture.
  const std::string arch_platform = std::string("linux/") + ArchName(profile.arch);
  for (const auto& i : profile.images) {
    specs.push_back({i.ref, i.source, i.credentials, i.platform.empty() ? arch_platform : i.platform});
  }
  return specs;
}

int Pull(const PullCliOptions& options) {
  Diagnostics diags;
  auto profile = LoadProfile(options.profile, diags);
  if (!diags.all().empty()) std::cerr << diags.Render(::isatty(2) != 0);
  if (!profile) return 1;
  if (options.arch) profile->arch = *options.arch;
  if (profile->images.empty()) {
    std::cout << options.profile.string() << " lists no images; nothing to pull\n";
    return 0;
  }
  oci::PullOptions po;
  po.cache_dir = options.cache_dir;
  po.offline = options.offline;
  po.ca_bundle = options.ca_bundle;
  po.parallel = options.parallel;
  po.tty = ::isatty(2) != 0;
  auto images = oci::PullImages(SpecsOf(*profile), po);
  if (!images) {
    std::cerr << "sprout: " << images.error() << "\n";
    return 1;
  }
  if (!options.layout.empty()) {
    if (auto s = oci::WriteLayout(*images, oci::Cache(options.cache_dir), options.layout); !s) {
      std::cerr << "sprout: " << s.error() << "\n";
      return 1;
    }
  }
  for (const auto& i : *images) {
    std::cout << i.reference << " " << i.digest;
    if (i.manifest_digest != i.digest) std::cout << " (" << i.platform << ": " << i.manifest_digest << ")";
    std::cout << " " << HumanSize(i.size) << "\n";
  }
  return 0;
}

Result<std::vector<oci::PreloadedImage>> PreloadImages(const Profile& profile, const fs::path& cache_dir, bool offline,
                                                       const fs::path& ca_bundle, std::vector<RootEntry>& add) {
  if (profile.images.empty()) return std::vector<oci::PreloadedImage>{};
  oci::PullOptions po;
  po.cache_dir = cache_dir;
  po.offline = offline;
  po.ca_bundle = ca_bundle;
  po.tty = ::isatty(2) != 0;
  auto images = oci::PullImages(SpecsOf(profile), po);
  if (!images) return Fail(images.error());
  oci::Cache cache(cache_dir);
  const std::string dir = kImagesDir;
  add.push_back({RootEntry::Kind::kDir, dir, "", {}, 0755});
  add.push_back({RootEntry::Kind::kDir, dir + "/blobs", "", {}, 0755});
  add.push_back({RootEntry::Kind::kDir, dir + "/blobs/sha256", "", {}, 0755});
  // Every blob once, whichever images share it.
  std::set<std::string> seen;
  std::map<std::string, std::vector<std::string>> blobs_of;  // reference -> its blobs, for the worker's part
  for (const auto& img : *images) {
    auto blobs = oci::ImageBlobs(cache, img.manifest_digest);
    if (!blobs) return Fail(blobs.error());
    blobs_of[img.reference] = *blobs;
    for (const auto& d : *blobs) {
      if (seen.insert(d).second) {
        add.push_back({RootEntry::Kind::kFile, dir + "/blobs/sha256/" + d.substr(7), "", cache.BlobPath(d), 0644});
      }
    }
  }
  auto index = oci::LayoutIndex(*images, cache);
  if (!index) return Fail(index.error());
  add.push_back({RootEntry::Kind::kFile, dir + "/oci-layout", R"({"imageLayoutVersion":"1.0.0"})", {}, 0644});
  add.push_back({RootEntry::Kind::kFile, dir + "/index.json", *index, {}, 0644});
  // A worker imports the images it can run only (docs/images.md): their index and the
  // blobs they name, beside the layout; the import script reads its role at boot.
  if (profile.pod_host == PodHost::kKubelet) {
    const auto worker = oci::WorkerImages(*images);
    if (!worker.empty() && worker.size() < images->size()) {
      auto worker_index = oci::LayoutIndex(worker, cache);
      if (!worker_index) return Fail(worker_index.error());
      std::set<std::string> names;
      for (const auto& img : worker) {
        for (const auto& d : blobs_of[img.reference]) names.insert("blobs/sha256/" + d.substr(7));
      }
      std::string list;
      for (const auto& n : names) list += n + "\n";
      const std::string wdir = std::string(kWorkerImagesDir);
      add.push_back({RootEntry::Kind::kDir, wdir, "", {}, 0755});
      add.push_back({RootEntry::Kind::kFile, wdir + "/index.json", *worker_index, {}, 0644});
      add.push_back({RootEntry::Kind::kFile, wdir + "/blobs", list, {}, 0644});
    }
  }
  // The node imports them into podman's storage at boot (docs/images.md).
  fs::path data = DataDir() / "images" / "preload";
  add.push_back(
      {RootEntry::Kind::kFile, "usr/lib/sprout/sprout-import-images", "", data / "sprout-import-images", 0755});
  add.push_back({RootEntry::Kind::kFile, "usr/lib/systemd/system/sprout-images.service", "",
                 data / "sprout-images.service", 0644});
  add.push_back({RootEntry::Kind::kSymlink,
                 "etc/systemd/system/multi-user.target.wants/sprout-images.service",
                 "/usr/lib/systemd/system/sprout-images.service",
                 {},
                 0777});
  return images;
}

}  // namespace sprout::cli
