#include "oci/import.h"

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <system_error>

#include "util/fs.h"
#include "util/sha256.h"
#include "util/text.h"

namespace sprout::oci {

namespace fs = std::filesystem;
using nlohmann::json;

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

Status ExtractTar(const fs::path& tar, const fs::path& dir) {
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

}  // namespace sprout::oci
