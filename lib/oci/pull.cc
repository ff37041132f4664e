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

// ImportLayout copies ref from an OCI layout directory into the cache; returns the
// digest of the manifest (or index) the layout names for ref.
Result<std::string> ImportLayout(Cache& cache, const fs::path& dir, const Reference& ref, const std::string& ref_text,
                                 const Platform& platform, const std::string& what) {
  auto index_text = ReadFile(dir / "index.json");
  if (!index_text) return Fail(what + " is not an OCI image layout: " + index_text.error());
  auto index = ParseManifest(*index_text, kOciIndex);
  if (!index || !index->is_index) {
    return Fail(what + ": index.json is not an image index" + (index ? "" : ": " + index.error()));
  }
  auto j = json::parse(*index_text, nullptr, false);
  std::string chosen;
  std::vector<std::string> names;
  const auto& list = j["manifests"];
  for (std::size_t i = 0; i < list.size(); ++i) {
    std::string name;
    if (list[i].contains("annotations") && list[i]["annotations"].is_object()) {
      auto a = list[i]["annotations"].find("org.opencontainers.image.ref.name");
      if (a != list[i]["annotations"].end() && a->is_string()) name = a->get<std::string>();
    }
    if (!name.empty()) names.push_back(name);
    if (!name.empty() && (name == ref_text || name == ref.tag || name == ref.repository + ":" + ref.tag)) {
      chosen = index->layers[i].digest;
    }
  }
  if (chosen.empty() && index->layers.size() == 1) chosen = index->layers[0].digest;
  if (chosen.empty()) {
    return Fail(what + " holds no image named '" + ref_text +
                "'; it has: " + (names.empty() ? std::string("no named images") : Join(names, ", ")));
  }
  auto blob = [&](const std::string& d) { return dir / "blobs" / "sha256" / d.substr(7); };
  std::string d = chosen;
  for (int depth = 0; depth < 2; ++depth) {
    if (auto s = cache.Import(d, blob(d), what); !s) return Fail(s.error());
    auto bytes = cache.Read(d);
    if (!bytes) return Fail(bytes.error());
    auto m = ParseManifest(*bytes);
    if (!m) return Fail(what + ": manifest " + d + ": " + m.error());
    if (m->is_index) {
      auto pick = SelectPlatform(*m, platform);
      if (!pick) return Fail(what + ": " + pick.error());
      d = pick->digest;
      continue;
    }
    std::vector<Descriptor> all = m->layers;
    all.push_back(m->config);
    for (const auto& b : all) {
      // The cache trusts a blob only at its descriptor's size, so a layout that misstates
      // one is refused here rather than found incomplete after the import.
      std::error_code ec;
      std::uintmax_t n = fs::file_size(blob(b.digest), ec);
      if (!ec && n != static_cast<std::uintmax_t>(b.size)) {
        return Fail(what + ": blob " + b.digest + " is " + std::to_string(n) + " bytes, but the manifest says " +
                    std::to_string(b.size));
      }
      if (auto s = cache.Import(b.digest, blob(b.digest), what); !s) return Fail(s.error());
    }
    return chosen;
  }
  return Fail(what + ": nested indexes are not supported");
}

// Extract unpacks a tar archive into dir with libarchive (no special files, no
// absolute or ".." paths).
Status Extract(const fs::path& tar, const fs::path& dir) {
  archive* a = archive_read_new();
  archive_read_support_format_tar(a);
  archive_read_support_filter_all(a);
  auto done = [&](const std::string& err) -> Status {
    archive_read_free(a);
    if (err.empty()) return Ok{};
    return Fail("cannot unpack " + tar.string() + ": " + err);
  };
  if (archive_read_open_filename(a, tar.c_str(), 1 << 16) != ARCHIVE_OK) return done(archive_error_string(a));
  archive_entry* e = nullptr;
  int rc = 0;
  while ((rc = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
    std::string name = archive_entry_pathname(e);
    fs::path rel = fs::path(name).lexically_normal();
    if (rel.is_absolute() || rel.string().starts_with("..")) return done("unsafe path " + name);
    fs::path out = dir / rel;
    std::error_code ec;
    if (archive_entry_filetype(e) == AE_IFDIR) {
      fs::create_directories(out, ec);
      continue;
    }
    if (archive_entry_filetype(e) != AE_IFREG) continue;
    fs::create_directories(out.parent_path(), ec);
    auto f = OpenForWriting(out, "wb");
    if (!f) return done(f.error());
    char buf[1 << 16];
    la_ssize_t n = 0;
    bool written = true;
    while ((n = archive_read_data(a, buf, sizeof buf)) > 0) {
      written = written && std::fwrite(buf, 1, static_cast<std::size_t>(n), *f) == static_cast<std::size_t>(n);
    }
    // A short write (a full disk) would otherwise become a smaller layer with its own digest.
    written = std::fclose(*f) == 0 && written;
    if (!written) return done("cannot write " + out.string() + ": " + std::generic_category().message(errno));
    if (n < 0) return done(archive_error_string(a));
  }
  if (rc != ARCHIVE_EOF) return done(archive_error_string(a));
  return done("");
}

// ImportDockerArchive turns a `docker save` tar into an image in the cache: its config
// and layer tars become blobs and sprout writes a Docker schema 2 manifest for them.
Result<std::string> ImportDockerArchive(Cache& cache, const fs::path& dir, const std::string& ref_text,
                                        const std::string& what) {
  auto text = ReadFile(dir / "manifest.json");
  if (!text) return Fail(what + " is not a docker-archive (no manifest.json)");
  auto j = json::parse(*text, nullptr, false);
  if (!j.is_array() || j.empty()) return Fail(what + ": manifest.json is not a list of images");
  const json* entry = j.size() == 1 ? &j[0] : nullptr;
  for (const auto& e : j) {
    if (e.contains("RepoTags") && e["RepoTags"].is_array()) {
      for (const auto& t : e["RepoTags"]) {
        if (t.is_string() && (t.get<std::string>() == ref_text)) entry = &e;
      }
    }
  }
  if (!entry || !(*entry).contains("Config") || !(*entry)["Config"].is_string() || !(*entry).contains("Layers")) {
    return Fail(what + " holds no image tagged '" + ref_text + "'");
  }
  auto add = [&](const std::string& rel, std::string_view type) -> Result<json> {
    auto member = ArchiveMember(dir, rel, what + ": manifest.json");
    if (!member) return Fail(member.error());
    const fs::path& p = *member;
    auto hex = Sha256File(p);
    if (!hex) return Fail(what + ": " + hex.error());
    std::string d = "sha256:" + *hex;
    if (auto s = cache.Import(d, p, what); !s) return Fail(s.error());
    return json{{"mediaType", type}, {"digest", d}, {"size", fs::file_size(p)}};
  };
  json m;
  m["schemaVersion"] = 2;
  m["mediaType"] = kDockerManifest;
  auto cfg = add((*entry)["Config"].get<std::string>(), "application/vnd.docker.container.image.v1+json");
  if (!cfg) return Fail(cfg.error());
  m["config"] = *cfg;
  m["layers"] = json::array();
  for (const auto& l : (*entry)["Layers"]) {
    if (!l.is_string()) return Fail(what + ": a layer in manifest.json is not a path");
    auto d = add(l.get<std::string>(), "application/vnd.docker.image.rootfs.diff.tar");
    if (!d) return Fail(d.error());
    m["layers"].push_back(*d);
  }
  std::string bytes = m.dump();
  std::string digest = "sha256:" + Sha256Hex(bytes);
  if (auto s = cache.Put(digest, bytes, what); !s) return Fail(s.error());
  return digest;
}

}  // namespace

std::string ArchivePathProblem(std::string_view rel) {
  if (rel.empty()) return "it is empty";
  if (rel.find('\0') != std::string_view::npos) return "it contains a NUL byte";
  if (rel.front() == '/') return "it is absolute";
  for (const auto& part : fs::path(rel)) {
    if (part.native() == "..") return "it has a '..' element";
  }
  return "";
}

Result<fs::path> ArchiveMember(const fs::path& dir, std::string_view rel, const std::string& what) {
  auto refuse = [&](const std::string& why) -> Error {
    return Fail(what + " names '" + std::string(rel) + "', which is refused: " + why +
                " (an archive may only name files inside itself)");
  };
  if (std::string why = ArchivePathProblem(rel); !why.empty()) return refuse(why);
  // The words are clean, but a symlink on the way could still lead out of dir.
  std::error_code ec;
  fs::path root = fs::canonical(dir, ec);
  if (ec) return Fail("cannot read " + dir.string() + ": " + ec.message());
  fs::path real = fs::weakly_canonical(root / rel, ec);
  if (ec) return Fail("cannot read " + (dir / rel).string() + ": " + ec.message());
  if (std::mismatch(root.begin(), root.end(), real.begin(), real.end()).first != root.end()) {
    return refuse("a symlink leads it out of the archive, to " + real.string());
  }
  return real;
}

namespace {

// RecipeKey hashes a recipe directory's files, so a changed recipe is rebuilt.
Result<std::string> RecipeKey(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file()) files.push_back(it->path());
  }
  if (ec) return Fail("cannot read the image recipe " + dir.string() + ": " + ec.message());
  std::sort(files.begin(), files.end());
  Sha256 h;
  for (const auto& f : files) {
    auto text = ReadFile(f);
    if (!text) return Fail(text.error());
    h.Update(f.lexically_relative(dir).string());
    h.Update("\n", 1);
    h.Update(Sha256Hex(*text));
  }
  return h.HexDigest();
}

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
        if (auto s = Extract(source->path, work.path()); !s) return Fail(s.error());
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
