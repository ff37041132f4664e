#include "backup/nfs_sink.h"

#include <fcntl.h>
#include <nfsc/libnfs.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

namespace sprout::backup {

namespace {

// kWriteChunk is the most one WRITE carries. libnfs 4.0 (bookworm) cannot encode an
// NFSv4 WRITE much over 3.8 KiB ("ZDR error: Failed to encode COMPOUND4args"), and
// reports no write size for NFSv4; 3.5 KiB writes stay below that.
constexpr std::uint64_t kWriteChunk = 3584;
// kReadChunk is the most one READ asks for (larger reads work).
constexpr std::uint64_t kReadChunk = std::uint64_t{256} << 10;
// NF3REG: libnfs reports NFSv4 entry types with NFSv3's numbers.
constexpr std::uint32_t kRegularFile = 1;

class NfsSink : public Sink {
 public:
  NfsSink(nfs_context* ctx, SinkLocation loc) : ctx_(ctx), loc_(std::move(loc)) {}
  ~NfsSink() override { nfs_destroy_context(ctx_); }
  NfsSink(const NfsSink&) = delete;
  NfsSink& operator=(const NfsSink&) = delete;

  std::string Location() const override { return loc_.text; }

  Status WriteNew(const std::string& name, std::string_view bytes) override {
    nfsfh* fh = nullptr;
    // Not O_EXCL: NFSv4's exclusive create stores its verifier in the file's times,
    // which libnfs never sets right afterwards (the file would look 80 years old or
    // new). Temporary names are unique per node and process, so O_TRUNC is safe.
    if (nfs_create(ctx_, name.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600, &fh) != 0) return Error("create", name);
    std::uint64_t off = 0;
    while (off < bytes.size()) {
      std::uint64_t n = std::min<std::uint64_t>(kWriteChunk, bytes.size() - off);
      int w = nfs_pwrite(ctx_, fh, off, n, bytes.data() + off);
      if (w <= 0) {
        Status s = Error("write", name);
        nfs_close(ctx_, fh);
        return s;
      }
      off += static_cast<std::uint64_t>(w);
    }
    if (nfs_fsync(ctx_, fh) != 0) {
      Status s = Error("commit", name);
      nfs_close(ctx_, fh);
      return s;
    }
    if (nfs_close(ctx_, fh) != 0) return Error("close", name);
    return Ok{};
  }

  Result<bool> Link(const std::string& from, const std::string& to) override {
    // NFSv4 LINK fails with NFS4ERR_EXIST on an existing name: the slot's lock.
    int r = nfs_link(ctx_, from.c_str(), to.c_str());
    if (r == 0) return true;
    if (r == -EEXIST) return false;
    return Fail(nfs_get_error(ctx_));
  }

  Status Remove(const std::string& name) override {
    int r = nfs_unlink(ctx_, name.c_str());
    if (r == 0 || r == -ENOENT) return Ok{};
    return Error("remove", name);
  }

  Result<std::string> ReadPrefix(const std::string& name, std::uint64_t limit) override {
    nfsfh* fh = nullptr;
    if (nfs_open(ctx_, name.c_str(), O_RDONLY, &fh) != 0) return Fail(Error("open", name).error());
    std::string out;
    std::string buf(kReadChunk, '\0');
    while (out.size() < limit) {
      const std::uint64_t want = std::min<std::uint64_t>(buf.size(), limit - out.size());
      int n = nfs_pread(ctx_, fh, out.size(), want, buf.data());
      if (n < 0) {
        Status s = Error("read", name);
        nfs_close(ctx_, fh);
        return Fail(s.error());
      }
      if (n == 0) break;
      out.append(buf.data(), static_cast<std::size_t>(n));
    }
    nfs_close(ctx_, fh);
    return out;
  }

  Status ReadChunks(const std::string& name, std::uint64_t limit,
                    const std::function<bool(std::string_view)>& each) override {
    nfsfh* fh = nullptr;
    if (nfs_open(ctx_, name.c_str(), O_RDONLY, &fh) != 0) return Error("open", name);
    std::string buf(kChunkSize, '\0');
    std::uint64_t done = 0;
    while (done < limit) {
      const std::uint64_t want = std::min<std::uint64_t>(buf.size(), limit - done);
      int n = nfs_pread(ctx_, fh, done, want, buf.data());
      if (n < 0) {
        Status s = Error("read", name);
        nfs_close(ctx_, fh);
        return s;
      }
      if (n == 0) break;
      done += static_cast<std::uint64_t>(n);
      if (!each(std::string_view(buf.data(), static_cast<std::size_t>(n)))) break;
    }
    nfs_close(ctx_, fh);
    return Ok{};
  }

  Result<bool> Exists(const std::string& name) override {
    struct nfs_stat_64 st {};
    int r = nfs_stat64(ctx_, name.c_str(), &st);
    if (r == 0) return true;
    if (r == -ENOENT) return false;
    return Fail(Error("look at", name).error());
  }

  Result<std::vector<SinkEntry>> List() override {
    nfsdir* dir = nullptr;
    if (nfs_opendir(ctx_, "", &dir) != 0) return Fail(Error("list", ".").error());
    std::vector<SinkEntry> out;
    for (nfsdirent* e; (e = nfs_readdir(ctx_, dir)) != nullptr;) {
      if (e->type != kRegularFile) continue;
      out.push_back(SinkEntry{e->name, e->size, static_cast<std::int64_t>(e->mtime.tv_sec)});
    }
    nfs_closedir(ctx_, dir);
    return out;
  }

  // The server commits a LINK or REMOVE before it answers (NFSv4 has no folder fsync).
  Status Sync() override { return Ok{}; }

 private:
  Status Error(const char* what, const std::string& name) {
    return Fail("cannot " + std::string(what) + " " + name + " on " + loc_.text + ": " + nfs_get_error(ctx_));
  }

  nfs_context* ctx_;
  SinkLocation loc_;
};

}  // namespace

Result<std::unique_ptr<Sink>> OpenNfsSink(const SinkLocation& loc, int timeout_ms) {
  nfs_context* ctx = nfs_init_context();
  if (ctx == nullptr) return Fail("cannot set up an NFS client (libnfs) for " + loc.text);
  nfs_set_version(ctx, 4);
  nfs_set_timeout(ctx, timeout_ms);
  // A share that drops the connection is an error for this attempt; the schedule retries.
  nfs_set_autoreconnect(ctx, 0);
  nfs_set_uid(ctx, loc.uid);
  nfs_set_gid(ctx, loc.gid);
  if (nfs_mount(ctx, loc.host.c_str(), loc.path.c_str()) != 0) {
    std::string err = nfs_get_error(ctx);
    nfs_destroy_context(ctx);
    return Fail("the NFS share " + loc.text + " is not reachable: " + err + " (check the server's address, that it " +
                "exports " + loc.path + " over NFSv4 and that this node reaches it)");
  }
  return std::unique_ptr<Sink>(std::make_unique<NfsSink>(ctx, loc));
}

}  // namespace sprout::backup
