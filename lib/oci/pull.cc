#include "oci/pull.h"

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>

#include "oci/auth.h"
#include "oci/import.h"
#include "oci/reference.h"
#include "oci/registry.h"
#include "util/fs.h"
#include "util/process.h"
#include "util/sha256.h"
#include "util/text.h"

namespace sprout::oci {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Bars draws one progress line per image and a total line; thread-safe.
class Bars {
 public:
  Bars(bool tty, std::vector<std::string> names) : tty_(tty), names_(std::move(names)) {
    done_.assign(names_.size(), 0);
    total_.assign(names_.size(), 0);
    start_ = Clock::now();
    begun_.assign(names_.size(), start_);
  }
  void SetTotal(std::size_t i, std::uint64_t total) {
    std::lock_guard<std::mutex> l(mu_);
    total_[i] = total;
  }
  // Begin starts image i's clock, for its rate.
  void Begin(std::size_t i) {
    std::lock_guard<std::mutex> l(mu_);
    begun_[i] = Clock::now();
  }
  // Blob reports bytes so far of one blob of image i.
  void Blob(std::size_t i, const std::string& digest, std::uint64_t bytes) {
    std::lock_guard<std::mutex> l(mu_);
    auto& prev = blob_[{i, digest}];
    if (bytes > prev) done_[i] += bytes - prev;
    prev = std::max(prev, bytes);
    Draw(false);
  }
  // Complete marks image i as all there (from the cache or a local source).
  void Complete(std::size_t i) {
    std::lock_guard<std::mutex> l(mu_);
    done_[i] = total_[i];
    Draw(false);
  }
  void Finish() {
    std::lock_guard<std::mutex> l(mu_);
    Draw(true);
  }

 private:
  using Clock = std::chrono::steady_clock;
  std::string Line(const std::string& name, std::uint64_t done, std::uint64_t total, double secs) const {
    constexpr int kWidth = 24;
    int filled = total ? static_cast<int>(std::min<std::uint64_t>(done, total) * kWidth / total) : 0;
    char buf[256];
    std::snprintf(buf, sizeof buf, "  %-36.36s [%s%s] %10s / %-10s %10s/s", name.c_str(),
                  std::string(static_cast<std::size_t>(filled), '#').c_str(),
                  std::string(static_cast<std::size_t>(kWidth - filled), '.').c_str(), HumanSize(done).c_str(),
                  HumanSize(total).c_str(), HumanSize(static_cast<std::uint64_t>(secs > 0 ? done / secs : 0)).c_str());
    return buf;
  }
  void Draw(bool last) {
    if (!tty_) return;
    auto now = Clock::now();
    if (!last && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    double secs = std::chrono::duration<double>(now - start_).count();
    std::string out;
    if (drawn_) out += "\033[" + std::to_string(names_.size() + 1) + "A";
    std::uint64_t d = 0, t = 0;
    for (std::size_t i = 0; i < names_.size(); ++i) {
      // Each image's rate counts from when its download began.
      double own = std::chrono::duration<double>(now - begun_[i]).count();
      out += "\r\033[K" + Line(names_[i], done_[i], total_[i], own) + "\n";
      d += done_[i];
      t += total_[i];
    }
    out += "\r\033[K" + Line("total", d, t, secs) + "\n";
    std::fputs(out.c_str(), stderr);
    std::fflush(stderr);
    drawn_ = true;
  }
  bool tty_;
  std::vector<std::string> names_;
  std::vector<std::uint64_t> done_, total_;
  std::map<std::pair<std::size_t, std::string>, std::uint64_t> blob_;
  std::mutex mu_;
  Clock::time_point start_, last_draw_{};
  std::vector<Clock::time_point> begun_;
  bool drawn_ = false;
};

// Complete resolves a manifest digest already in the cache down to the platform
// manifest, and says whether every blob is there.
struct Resolved {
  std::string manifest_digest;
  Parsed manifest;
  bool complete = false;
  std::uint64_t size = 0;
};

Result<Resolved> Resolve(const Cache& cache, const std::string& digest, const Platform& platform) {
  Resolved r;
  std::string d = digest;
  std::int64_t size = kUnknownSize;  // the tag's manifest is hashed; an index gives its entries' sizes
  for (int depth = 0; depth < 2; ++depth) {
    if (!cache.Has(d, size)) return r;
    auto bytes = cache.Read(d);
    if (!bytes) return Fail(bytes.error());
    auto m = ParseManifest(*bytes);
    if (!m) return Fail("cached manifest " + d + ": " + m.error());
    if (m->is_index) {
      auto pick = SelectPlatform(*m, platform);
      if (!pick) return Fail(pick.error());
      d = pick->digest;
      size = pick->size;
      continue;
    }
    r.manifest_digest = d;
    r.manifest = *m;
    r.size = bytes->size();
    r.complete = cache.Has(m->config.digest, m->config.size);
    r.size += static_cast<std::uint64_t>(m->config.size);
    for (const auto& l : m->layers) {
      r.complete = r.complete && cache.Has(l.digest, l.size);
      r.size += static_cast<std::uint64_t>(l.size);
    }
    return r;
  }
  return Fail("manifest " + digest + " is an index of indexes, which sprout does not follow");
}

}  // namespace

Result<std::string> RecipeKey(const fs::path& dir) {
  auto files = RegularFilesUnder(dir);
  if (!files) return Fail("cannot read the image recipe " + dir.string() + ": " + files.error());
  // The recipes' shared helpers (images/lib: common.sh, mkimage.py), which they source.
  const fs::path shared = dir.parent_path() / "lib";
  std::error_code ec;
  if (dir.filename() != "lib" && fs::is_directory(shared, ec)) {
    auto more = RegularFilesUnder(shared);
    if (!more) return Fail("cannot read the recipes' shared folder " + shared.string() + ": " + more.error());
    files->insert(files->end(), more->begin(), more->end());
  }
  Sha256 h;
  for (const auto& f : *files) {
    auto text = ReadFile(f);
    if (!text) return Fail(text.error());
    h.Update(f.lexically_relative(dir).string());
    h.Update("\n", 1);
    h.Update(Sha256Hex(*text));
  }
  return h.HexDigest();
}

namespace {

struct Source {
  std::string kind;  // registry, recipe, oci, oci-archive, docker-archive
  fs::path path;
};

Result<Source> ParseSourceText(const std::string& s) {
  if (s.empty()) return Source{"registry", {}};
  auto colon = s.find(':');
  std::string kind = s.substr(0, colon);
  if (colon == std::string::npos ||
      (kind != "recipe" && kind != "oci" && kind != "oci-archive" && kind != "docker-archive")) {
    return Fail("image source '" + s + "' must be recipe:DIR, oci:DIR, oci-archive:TAR or docker-archive:TAR");
  }
  return Source{kind, s.substr(colon + 1)};
}

}  // namespace

Result<std::vector<PreloadedImage>> PullImages(const std::vector<ImageSpec>& specs, const PullOptions& options) {
  Cache cache(options.cache_dir);
  std::vector<PreloadedImage> out;
  std::vector<std::string> names;
  names.reserve(specs.size());
  for (const auto& s : specs) names.push_back(s.ref);
  Bars bars(options.tty, names);
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const ImageSpec& spec = specs[i];
    bars.Begin(i);
    auto ref = ParseReference(spec.ref);
    if (!ref) return Fail(ref.error());
    Platform platform = HostPlatform();
    if (!spec.platform.empty()) {
      auto p = ParsePlatform(spec.platform);
      if (!p) return Fail(p.error());
      platform = *p;
    }
    auto source = ParseSourceText(spec.source);
    if (!source) return Fail(source.error());
    const std::string what = spec.ref;

    // The key under which a tag's resolution is remembered depends on the source.
    std::string key = spec.ref;
    if (source->kind == "recipe") {
      auto k = RecipeKey(source->path);
      if (!k) return Fail(k.error());
      // A recipe builds for one platform; each platform is its own cache entry.
      key = "recipe:" + *k + ":" + PlatformString(platform) + ":" + spec.ref;
    } else if (source->kind != "registry") {
      key = source->kind + ":" + source->path.string() + ":" + spec.ref;
    }
    std::string top = !ref->digest.empty() ? ref->digest : cache.LookupRef(key).value_or("");
    Resolved have;
    if (!top.empty()) {
      auto r = Resolve(cache, top, platform);
      if (!r) return Fail(spec.ref + ": " + r.error());
      have = *r;
    }
    if (!have.complete && source->kind != "registry") {
      // Local sources need no network; they are read again whenever the cache lacks them.
      Result<std::string> d = Fail("");
      if (source->kind == "recipe") {
        std::error_code ec;
        fs::create_directories(options.cache_dir / "oci", ec);
        TempDir work(options.cache_dir / "oci", "recipe");
        fs::path script = source->path / "build.sh";
        auto run = Run({{"bash", script.string(), (work.path() / "layout").string()},
                        {{"SPROUT_IMAGE_REF", spec.ref},
                         {"SPROUT_CACHE_DIR", options.cache_dir.string()},
                         {"SPROUT_OFFLINE", options.offline ? "1" : "0"},
                         {"SPROUT_IMAGE_ARCH", platform.architecture}},
                        {},
                        (work.path() / "log").string(),
                        true});
        if (!run || run->exit_code != 0) {
          auto log = ReadFile(work.path() / "log");
          std::string tail = log ? log->substr(log->size() > 1500 ? log->size() - 1500 : 0) : "";
          return Fail("the image recipe " + script.string() + " failed for " + spec.ref + ":\n" + tail);
        }
        d = ImportLayout(cache, work.path() / "layout", *ref, spec.ref, platform, "recipe " + source->path.string());
      } else if (source->kind == "oci") {
        d = ImportLayout(cache, source->path, *ref, spec.ref, platform, "OCI layout " + source->path.string());
      } else {
        std::error_code ec;
        fs::create_directories(options.cache_dir / "oci", ec);
        TempDir work(options.cache_dir / "oci", "archive");
        if (auto s = ExtractTar(source->path, work.path()); !s) return Fail(s.error());
        if (source->kind == "oci-archive") {
          d = ImportLayout(cache, work.path(), *ref, spec.ref, platform, "oci-archive " + source->path.string());
        } else {
          d = ImportDockerArchive(cache, work.path(), spec.ref, "docker-archive " + source->path.string());
        }
      }
      if (!d) return Fail(d.error());
      top = *d;
      if (!ref->digest.empty() && top != ref->digest) {
        return Fail(spec.ref + ": the source " + spec.source + " holds " + top + ", not the pinned digest");
      }
      if (auto s = cache.RecordRef(key, top); !s) return Fail(s.error());
      auto r = Resolve(cache, top, platform);
      if (!r) return Fail(r.error());
      have = *r;
    }
    if (!have.complete) {
      if (options.offline) {
        return Fail("image " + spec.ref + " is not in the cache " + options.cache_dir.string() +
                    " and --offline forbids the network; run `sprout pull PROFILE` where the registry is reachable");
      }
      auto creds = FindCredentials(ref->registry, spec.credentials);
      if (!creds) return Fail(creds.error());
      ClientOptions co;
      co.ca_bundle = options.ca_bundle;
      co.credentials = *creds;
      co.parallel = options.parallel;
      co.progress = [&bars, i](const std::string& digest, std::uint64_t bytes) { bars.Blob(i, digest, bytes); };
      RegistryClient client(ref->registry, ref->repository, co);
      auto m = client.GetManifest(ref->digest.empty() ? ref->tag : ref->digest);
      if (!m) return Fail(m.error());
      auto parsed = ParseManifest(m->bytes, m->content_type);
      if (!parsed) return Fail(spec.ref + ": " + parsed.error());
      if (auto s = cache.Put(m->digest, m->bytes, spec.ref); !s) return Fail(s.error());
      top = m->digest;
      if (parsed->is_index) {
        auto pick = SelectPlatform(*parsed, platform);
        if (!pick) return Fail(spec.ref + ": " + pick.error());
        auto child = client.GetManifest(pick->digest);
        if (!child) return Fail(child.error());
        parsed = ParseManifest(child->bytes, child->content_type);
        if (!parsed || parsed->is_index) return Fail(spec.ref + ": the platform entry is not an image manifest");
        if (auto s = cache.Put(child->digest, child->bytes, spec.ref); !s) return Fail(s.error());
      }
      std::vector<Descriptor> blobs = parsed->layers;
      blobs.insert(blobs.begin(), parsed->config);
      std::uint64_t total = 0;
      for (const auto& b : blobs) total += static_cast<std::uint64_t>(b.size);
      bars.SetTotal(i, total);
      if (auto s = client.FetchBlobs(blobs, cache); !s) return Fail(s.error());
      if (auto s = cache.RecordRef(key, top); !s) return Fail(s.error());
      auto r = Resolve(cache, top, platform);
      if (!r) return Fail(r.error());
      have = *r;
      if (!have.complete) return Fail(spec.ref + ": some blobs are still missing after the pull");
    } else {
      bars.SetTotal(i, have.size);
    }
    bars.Complete(i);
    PreloadedImage img;
    img.reference = spec.ref;
    img.digest = top;
    img.manifest_digest = have.manifest_digest;
    img.platform = PlatformString(platform);
    img.size = have.size;
    out.push_back(img);
  }
  bars.Finish();
  return out;
}

Result<std::vector<std::string>> ImageBlobs(const Cache& cache, const std::string& manifest_digest) {
  auto bytes = cache.Read(manifest_digest);
  if (!bytes) return Fail(bytes.error());
  auto m = ParseManifest(*bytes);
  if (!m) return Fail(manifest_digest + ": " + m.error());
  std::vector<std::string> out{manifest_digest, m->config.digest};
  for (const auto& l : m->layers) out.push_back(l.digest);
  return out;
}

std::string ComponentOf(const std::string& reference) {
  std::string repo = reference.substr(0, reference.find('@'));
  const auto slash = repo.rfind('/');
  const auto colon = repo.rfind(':');
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) repo.resize(colon);
  return slash == std::string::npos ? repo : repo.substr(slash + 1);
}

std::vector<PreloadedImage> WorkerImages(const std::vector<PreloadedImage>& images) {
  static const std::set<std::string> kControlPlane = {"etcd", "kube-apiserver", "kube-controller-manager",
                                                      "kube-scheduler"};
  std::vector<PreloadedImage> out;
  for (const auto& img : images) {
    if (kControlPlane.count(ComponentOf(img.reference)) == 0) out.push_back(img);
  }
  return out;
}

Result<std::string> LayoutIndex(const std::vector<PreloadedImage>& images, const Cache& cache) {
  json index;
  index["schemaVersion"] = 2;
  index["mediaType"] = kOciIndex;
  index["manifests"] = json::array();
  for (const auto& img : images) {
    auto bytes = cache.Read(img.manifest_digest);
    if (!bytes) return Fail(bytes.error());
    auto m = ParseManifest(*bytes);
    if (!m) return Fail(m.error());
    json entry = {{"mediaType", m->media_type}, {"digest", img.manifest_digest}, {"size", bytes->size()}};
    if (auto p = ParsePlatform(img.platform)) entry["platform"] = {{"os", p->os}, {"architecture", p->architecture}};
    // ref.name for podman and skopeo (they accept a full reference there), the
    // containerd annotation for `ctr images import` (docs/images.md).
    entry["annotations"] = {{"org.opencontainers.image.ref.name", img.reference},
                            {"io.containerd.image.name", img.reference}};
    index["manifests"].push_back(entry);
  }
  return index.dump(2) + "\n";
}

Status WriteLayout(const std::vector<PreloadedImage>& images, const Cache& cache, const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir / "blobs" / "sha256", ec);
  if (ec) return Fail("cannot create " + dir.string() + ": " + ec.message());
  std::set<std::string> written;
  for (const auto& img : images) {
    auto blobs = ImageBlobs(cache, img.manifest_digest);
    if (!blobs) return Fail(blobs.error());
    for (const auto& d : *blobs) {
      if (!written.insert(d).second) continue;
      fs::path to = dir / "blobs" / "sha256" / d.substr(7);
      fs::remove(to, ec);
      fs::copy_file(cache.BlobPath(d), to, ec);
      if (ec) return Fail("cannot copy blob " + d + " into " + dir.string() + ": " + ec.message());
    }
  }
  auto index = LayoutIndex(images, cache);
  if (!index) return Fail(index.error());
  if (auto s = WriteFileAtomic(dir / "oci-layout", R"({"imageLayoutVersion":"1.0.0"})"); !s) return s;
  return WriteFileAtomic(dir / "index.json", *index);
}

std::string ImagesJson(const std::vector<PreloadedImage>& images) {
  json a = json::array();
  for (const auto& i : images) {
    a.push_back({{"reference", i.reference},
                 {"digest", i.digest},
                 {"manifestDigest", i.manifest_digest},
                 {"platform", i.platform},
                 {"size", i.size}});
  }
  return a.dump();
}

}  // namespace sprout::oci
