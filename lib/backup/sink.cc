#include "backup/sink.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <memory>
#include <utility>
#include <vector>

#include "backup/bundle.h"
#include "backup/nfs_sink.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace sprout::backup {

namespace {

constexpr std::string_view kNfsScheme = "nfs://";

// ParseId reads a uid or gid of an nfs:// query.
Result<int> ParseId(std::string_view text, std::string_view key, std::string_view whole) {
  int v = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0)
    return Fail("backup sink '" + std::string(whole) + "': " + std::string(key) + "=" + std::string(text) +
                " is not a number; write " + std::string(key) + "=N with N >= 0");
  return v;
}

Status WriteAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Fail(std::strerror(errno));
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return Ok{};
}

// FolderSink is a folder of this machine's file system (the state partition, or any
// mounted share).
class FolderSink : public Sink {
 public:
  explicit FolderSink(std::filesystem::path dir) : dir_(std::move(dir)) {}
  std::string Location() const override { return dir_.string(); }

  Status WriteNew(const std::string& name, std::string_view bytes) override {
    auto path = dir_ / name;
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return Fail(std::strerror(errno));
    if (auto s = WriteAll(fd, bytes); !s) {
      ::close(fd);
      return Fail("cannot write " + path.string() + ": " + s.error());
    }
    if (::fsync(fd) != 0) {
      std::string err = std::strerror(errno);
      ::close(fd);
      return Fail("cannot flush " + path.string() + ": " + err);
    }
    if (::close(fd) != 0) return Fail("cannot write " + path.string() + ": " + std::strerror(errno));
    return Ok{};
  }

  Result<bool> Link(const std::string& from, const std::string& to) override {
    // link(2) never replaces a name, also on a mounted NFS share.
    if (::link((dir_ / from).c_str(), (dir_ / to).c_str()) == 0) return true;
    if (errno == EEXIST) return false;
    return Fail(std::strerror(errno));
  }

  Status Remove(const std::string& name) override {
    if (::unlink((dir_ / name).c_str()) == 0 || errno == ENOENT) return Ok{};
    return Fail("cannot remove " + (dir_ / name).string() + ": " + std::strerror(errno));
  }

  Result<std::string> ReadPrefix(const std::string& name, std::uint64_t limit) override {
    std::string out;
    auto read = ReadChunks(name, limit, [&](std::string_view piece) {
      out.append(piece);
      return true;
    });
    if (!read) return Fail(read.error());
    return out;
  }

  Status ReadChunks(const std::string& name, std::uint64_t limit,
                    const std::function<bool(std::string_view)>& each) override {
    auto path = dir_ / name;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Fail("cannot open " + path.string() + ": " + std::strerror(errno));
    std::vector<char> buf(kChunkSize);
    std::uint64_t done = 0;
    while (done < limit) {
      const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), limit - done));
      ssize_t n = ::read(fd, buf.data(), want);
      if (n < 0) {
        if (errno == EINTR) continue;
        std::string err = std::strerror(errno);
        ::close(fd);
        return Fail("cannot read " + path.string() + ": " + err);
      }
      if (n == 0) break;
      done += static_cast<std::uint64_t>(n);
      if (!each(std::string_view(buf.data(), static_cast<std::size_t>(n)))) break;
    }
    ::close(fd);
    return Ok{};
  }

  Result<bool> Exists(const std::string& name) override {
    struct stat st {};
    if (::stat((dir_ / name).c_str(), &st) == 0) return true;
    if (errno == ENOENT) return false;
    return Fail("cannot look at " + (dir_ / name).string() + ": " + std::strerror(errno));
  }

  Result<std::vector<SinkEntry>> List() override {
    std::vector<SinkEntry> out;
    std::error_code ec;
    std::filesystem::directory_iterator it(dir_, ec);
    if (ec) return Fail("cannot list " + dir_.string() + ": " + ec.message());
    for (const auto& e : it) {
      if (!e.is_regular_file(ec)) continue;
      struct stat st {};
      if (::stat(e.path().c_str(), &st) != 0) continue;  // removed meanwhile
      out.push_back(SinkEntry{e.path().filename().string(), static_cast<std::uint64_t>(st.st_size), st.st_mtime});
    }
    return out;
  }

  Status Sync() override { return SyncPath(dir_); }

 private:
  std::filesystem::path dir_;
};

}  // namespace

Result<std::string> Sink::Read(const std::string& name, std::uint64_t limit) {
  auto text = ReadPrefix(name, limit + 1);
  if (!text) return text;
  if (text->size() > limit)
    return Fail(JoinLocation(Location(), name) + " is over " + std::to_string(limit) +
                " bytes, more than any bundle sprout writes; not reading it");
  return text;
}

Result<SinkLocation> ParseSinkLocation(std::string_view text) {
  SinkLocation loc;
  loc.text = std::string(text);
  const std::string whole(text);
  if (text.empty()) return Fail("backup sink: empty; give a folder or nfs://HOST/PATH");
  if (!text.starts_with(kNfsScheme)) {
    if (text.find("://") != std::string_view::npos)
      return Fail("backup sink '" + whole + "': only folders and nfs://HOST/PATH shares are supported");
    loc.kind = SinkLocation::Kind::kFolder;
    loc.folder = whole;
    return loc;
  }
  loc.kind = SinkLocation::Kind::kNfs;
  std::string_view rest = text.substr(kNfsScheme.size());
  std::string_view query;
  if (auto q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  auto slash = rest.find('/');
  std::string_view host = rest.substr(0, slash);
  if (host.empty())
    return Fail("backup sink '" + whole + "': no server; write nfs://HOST/PATH, e.g. nfs://198.18.0.5/backups");
  if (host.find(':') != std::string_view::npos || host.find('@') != std::string_view::npos)
    return Fail("backup sink '" + whole + "': write the server as a bare name or IPv4 address (NFSv4 on port 2049)");
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  if (path.size() <= 1)
    return Fail("backup sink '" + whole + "': no folder on the server; write nfs://HOST/PATH, e.g. nfs://" +
                std::string(host) + "/backups");
  for (std::size_t start = 1; start <= path.size();) {
    auto end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    auto part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..")
      return Fail("backup sink '" + whole +
                  "': the path on the server must be plain names joined by '/' (no //, . or ..)");
    start = end + 1;
  }
  loc.host = std::string(host);
  loc.path = std::string(path);
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    auto eq = item.find('=');
    std::string_view key = item.substr(0, eq);
    std::string_view value = eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1);
    if (key == "uid" || key == "gid") {
      auto id = ParseId(value, key, whole);
      if (!id) return Fail(id.error());
      (key == "uid" ? loc.uid : loc.gid) = *id;
    } else if (key == "version") {
      if (value != "4") return Fail("backup sink '" + whole + "': only NFS version 4 is supported; drop version=");
    } else {
      return Fail("backup sink '" + whole + "': unknown option '" + std::string(key) +
                  "'; nfs:// shares take uid=N and gid=N");
    }
  }
  return loc;
}

namespace {

// SplitQuery parts an NFS location into its path and its '?...' options (kept apart so
// a file name goes before them); a folder location has no options.
std::pair<std::string_view, std::string_view> SplitQuery(std::string_view location) {
  if (!location.starts_with(kNfsScheme)) return {location, {}};
  const auto q = location.find('?');
  if (q == std::string_view::npos) return {location, {}};
  return {location.substr(0, q), location.substr(q)};
}

}  // namespace

Result<BundleAt> SplitBundleLocation(std::string_view text) {
  const auto [main, query] = SplitQuery(text);
  auto slash = main.rfind('/');
  if (slash == std::string_view::npos) return BundleAt{".", std::string(main)};
  BundleAt at{std::string(main.substr(0, slash)) + std::string(query), std::string(main.substr(slash + 1))};
  if (at.name.empty())
    return Fail("'" + std::string(text) + "' names a folder; give the bundle's file (see `backup list`)");
  if (at.sink.empty()) at.sink = "/";
  if (auto loc = ParseSinkLocation(at.sink); !loc) return Fail(loc.error());
  return at;
}

std::string JoinLocation(std::string_view sink, std::string_view name) {
  const auto [main, query] = SplitQuery(sink);
  std::string out(main);
  if (!out.empty() && out.back() != '/') out += '/';
  return out + std::string(name) + std::string(query);
}

Result<std::unique_ptr<Sink>> OpenSink(const std::string& location) {
  auto loc = ParseSinkLocation(location);
  if (!loc) return Fail(loc.error());
  if (loc->kind == SinkLocation::Kind::kNfs) return OpenNfsSink(*loc, kNfsTimeoutMs);
  std::error_code ec;
  if (!std::filesystem::is_directory(loc->folder, ec))
    return Fail("the sink folder " + loc->folder +
                " is not there: " + (ec ? ec.message() : std::string("No such file or directory")) +
                " (create it, or mount the share, first)");
  return std::unique_ptr<Sink>(std::make_unique<FolderSink>(loc->folder));
}

Result<SinkWrite> WriteBundle(Sink& sink, const std::string& name, std::string_view bytes, const std::string& node,
                              long pid) {
  std::string tmp = TempNameFor(name, node, pid);
  std::string where = sink.Location();
  if (auto s = sink.WriteNew(tmp, bytes); !s) {
    sink.Remove(tmp).ok();
    return Fail("cannot write to the sink " + where + ": " + s.error());
  }
  auto linked = sink.Link(tmp, name);
  sink.Remove(tmp).ok();  // a leftover is never listed, and a later prune removes it
  if (!linked) return Fail("cannot link " + tmp + " to " + name + " in " + where + ": " + linked.error());
  if (!*linked) return SinkWrite::kExists;
  if (auto s = sink.Sync(); !s) return Fail("cannot sync the sink " + where + ": " + s.error());
  // Read back in pieces: the file is hashed as it comes, never held a second time.
  Sha256 back;
  std::uint64_t back_size = 0;
  auto read = sink.ReadChunks(name, bytes.size() + 1, [&](std::string_view piece) {
    back.Update(piece);
    back_size += piece.size();
    return true;
  });
  if (!read) return Fail("cannot read back " + JoinLocation(where, name) + ": " + read.error());
  if (back_size != bytes.size() || back.HexDigest() != Sha256Hex(bytes)) {
    // Not ours to keep: a bundle that reads back differently is not good.
    sink.Remove(name).ok();
    return Fail("the bundle read back from " + JoinLocation(where, name) + " differs from what was written");
  }
  return SinkWrite::kWritten;
}

Result<std::vector<SinkFile>> ScanBundles(Sink& sink) {
  auto entries = sink.List();
  if (!entries) return Fail("cannot list the sink " + sink.Location() + ": " + entries.error());
  std::vector<SinkFile> out;
  out.reserve(entries->size());
  for (const auto& e : *entries) {
    SinkFile f;
    f.file = e.name;
    f.size = e.size;
    f.mtime = e.mtime;
    if (ParseName(f.file) || TempBundleName(f.file)) {
      if (e.size > kMaxBundleSize) {
        f.problem = "it is " + std::to_string(e.size) + " bytes, over the " + std::to_string(kMaxBundleSize) +
                    " a bundle may have";
      } else if (auto head = sink.ReadPrefix(e.name, kMaxHeadSize); !head) {
        f.problem = head.error();
      } else if (auto h = ReadHeaderPrefix(*head, e.size); !h) {
        f.problem = h.error();
      } else {
        f.header_ok = true;
        f.revision = h->revision;
      }
    }
    out.push_back(f);
  }
  return out;
}

Result<Checked> CheckBundle(Sink& sink, const std::string& name, std::string_view cluster, std::string_view secret,
                            std::uint64_t max_bytes) {
  max_bytes = std::min(max_bytes, kMaxBundleSize);
  Checked c;
  Sha256 sha;
  std::unique_ptr<BundleVerifier> verifier;
  if (!secret.empty()) verifier = std::make_unique<BundleVerifier>(cluster, secret);
  bool stopped = false;
  auto read = sink.ReadChunks(name, max_bytes + 1, [&](std::string_view piece) {
    c.size += piece.size();
    if (c.size > max_bytes) {
      stopped = true;
      return false;
    }
    sha.Update(piece);
    if (verifier && !verifier->Feed(piece)) {
      stopped = true;  // it cannot open, whatever follows
      return false;
    }
    return true;
  });
  if (!read) return Fail(read.error());
  if (!stopped) c.sha256 = sha.HexDigest();
  if (c.size > max_bytes) {
    c.sha256.clear();
    c.opened = Authenticity::kRefused;
    c.over_limit = true;
    c.problem = "it is over " + std::to_string(max_bytes) + " bytes, " +
                (max_bytes == kMaxBundleSize
                     ? std::string("more than any bundle sprout writes")
                     : std::string("more than a bundle of this cluster now is, so it was not read through"));
    return c;
  }
  if (!verifier) return c;
  auto header = verifier->Finish();
  if (header) {
    c.opened = Authenticity::kAuthentic;
    c.header = *header;
  } else {
    c.opened = Authenticity::kRefused;
    c.problem = header.error();
  }
  return c;
}

void AuthenticateBundles(Sink& sink, std::vector<SinkFile>& files, std::string_view cluster, std::string_view secret,
                         std::string_view near) {
  std::uint64_t bound = kMaxBundleSize;
  for (const auto& f : files) {
    if (!near.empty() && f.file == near) bound = BundleSizeBound(f.size);
  }
  const auto order = OpenOrder(files, cluster, kMaxBytesOpenedPerPrune, bound);
  for (std::size_t i : order.open) {
    SinkFile& f = files[i];
    auto checked = CheckBundle(sink, f.file, cluster, secret, bound);
    if (!checked) {
      f.problem = checked.error();
      continue;
    }
    f.opened = checked->opened;
    if (checked->opened != Authenticity::kAuthentic) {
      f.problem = checked->problem.empty() ? std::string("no secret to open it") : checked->problem;
      continue;
    }
    f.created = checked->header.created;
    f.sealing = checked->header.salt;
    f.revision = checked->header.revision;
  }
  for (std::size_t i : order.too_large) {
    files[i].problem = "not opened: it is " + std::to_string(files[i].size) + " bytes, over " + std::to_string(bound) +
                       " (four times the bundle just written, at least 64 MiB)";
  }
  for (std::size_t i : order.skipped) {
    files[i].problem = "not opened: this prune's budget of " + std::to_string(kMaxBytesOpenedPerPrune) +
                       " bytes went to smaller bundles first";
  }
}

Retention PruneSink(Sink& sink, std::string_view cluster, std::string_view secret, int keep, std::int64_t now,
                    std::string_view protect) {
  Retention done;
  auto files = ScanBundles(sink);
  if (!files) return done;
  AuthenticateBundles(sink, *files, cluster, secret, protect);
  auto retention = Prune(*files, cluster, keep, now, protect);
  done.held = retention.held;
  done.not_counted = retention.not_counted;
  for (const auto& f : retention.remove) {
    if (sink.Remove(f)) done.remove.push_back(f);
  }
  if (!done.remove.empty()) sink.Sync().ok();
  return done;
}

Result<std::string> ReadBundleAt(const std::string& location) {
  auto at = SplitBundleLocation(location);
  if (!at) return Fail(at.error());
  auto sink = OpenSink(at->sink);
  if (!sink) return Fail(sink.error());
  auto text = (*sink)->Read(at->name, kMaxBundleSize);
  if (!text) return Fail("cannot read " + location + ": " + text.error());
  return text;
}

}  // namespace sprout::backup
