// `sprout personalize`: write per-cluster and per-node settings into an image's config
// area, without rebuilding and without touching the root (so verity stays valid).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "backup/sink.h"
#include "builder/commands.h"
#include "formation/auth.h"
#include "image/disk_file.h"
#include "image/gpt.h"
#include "image/plan.h"
#include "nodeconfig/nodeconfig.h"
#include "pki/pki.h"
#include "settings/settings.h"
#include "util/fs.h"
#include "util/text.h"

namespace sprout::cli {

namespace {

namespace fs = std::filesystem;

// Redacted shows a config without its secrets' bytes.
std::string Redacted(const NodeConfig& c) {
  NodeConfig shown = c;
  std::string size = c.cluster_secret ? std::to_string(c.cluster_secret->size()) : "";
  shown.cluster_secret.reset();
  shown.worker_secret.reset();
  std::string text = RenderNodeConfig(shown);
  if (!size.empty()) text += "cluster-secret=(" + size + " bytes, not shown)\n";
  if (c.worker_secret) text += "worker-secret=(derived from the cluster secret, not shown)\n";
  return text;
}

// ReadClusterSecret reads a cluster secret file, refusing one too weak to be a secret.
Result<std::string> ReadClusterSecret(const std::filesystem::path& file) {
  auto secret = ReadFile(file);
  if (!secret) return Fail(secret.error());
  if (auto weak = formation::ClusterSecretWeakness(*secret); !weak.empty()) {
    return Fail("the cluster secret in " + file.string() + " is too weak: " + weak +
                "; let sprout make one: --new-cluster-secret FILE (32 random bytes, mode 600)");
  }
  return secret;
}

// NewClusterSecret makes 32 random bytes and writes them to file, which must not exist
// yet (created mode 600, so no other user reads it even for a moment).
Result<std::string> NewClusterSecret(const std::filesystem::path& file) {
  auto secret = pki::RandomBytes(32);
  if (!secret) return Fail(secret.error());
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int err = errno;
    if (err == EEXIST) {
      return Fail("--new-cluster-secret: " + file.string() +
                  " exists; a second cluster secret would found a second cluster. Give --cluster-secret " +
                  file.string() + " to use it, or another name");
    }
    return Fail("--new-cluster-secret: cannot create " + file.string() + ": " + std::strerror(err));
  }
  const bool written = ::write(fd, secret->data(), secret->size()) == static_cast<ssize_t>(secret->size());
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!written || !synced) {
    ::unlink(file.c_str());
    return Fail("--new-cluster-secret: cannot write " + file.string() + ": " + std::strerror(errno));
  }
  return secret;
}

}  // namespace

int Personalize(const PersonalizeOptions& o) {
  // A secret made by --new-cluster-secret is removed again when the image was not
  // personalized with it: nothing holds it, and a rerun may make it afresh.
  bool made_secret = false;
  auto fail = [&](const std::string& why) {
    std::cerr << "sprout: " << o.image.string() << ": " << why << "\n";
    if (made_secret) {
      std::error_code ec;
      fs::remove(*o.new_secret_file, ec);
      std::cerr << "sprout: removed " << o.new_secret_file->string() << " again; no image holds that secret\n";
    }
    return 1;
  };
  auto disk = DiskFile::Open(o.image, !o.print);
  if (!disk) return fail(disk.error());
  auto gpt = disk->Gpt();
  if (!gpt) {
    return fail(gpt.error() +
                "\nhint: personalize takes a raw image made by `sprout build` (for qcow2, convert with "
                "`qemu-img convert -O raw`)");
  }
  const Partition* area = FindPartitionByLabel(gpt->partitions, kConfigLabel);
  if (!area) return fail(std::string("has no '") + kConfigLabel + "' partition; was it built by this sprout?");

  auto area_bytes = ReadPartition(*disk, *area, 0, area->size());
  if (!area_bytes) return fail("cannot read the config area: " + area_bytes.error());
  const std::string current(area_bytes->begin(), area_bytes->end());
  auto existing = ParseNodeConfig(current, "config area of " + o.image.string());
  if (!existing) return fail(existing.error() + "\nhint: start afresh with --clear");
  if (o.print) {
    std::cout << Redacted(*existing);
    return 0;
  }

  // The options go through the same parser as every other source, so they are checked
  // by the same rules and messages.
  std::string lines;
  if (o.hostname) lines += "hostname=" + *o.hostname + "\n";
  if (o.role) lines += "role=" + *o.role + "\n";
  if (o.address) lines += "address=" + *o.address + "\n";
  if (o.gateway) lines += "gateway=" + *o.gateway + "\n";
  if (!o.peers.empty()) lines += "peers=" + Join(o.peers, ",") + "\n";
  // The same checks sprout-firstboot makes when it resolves them, so a typo is refused
  // here, before the image is flashed.
  if (o.backup_dir) {
    if (auto loc = backup::ParseSinkLocation(*o.backup_dir); !loc)
      return fail("--backup-dir: " + loc.error() + "; give a folder or nfs://HOST/PATH[?uid=N&gid=N]");
    lines += "backup-dir=" + *o.backup_dir + "\n";
  }
  if (o.restore_from) {
    if (auto at = backup::SplitBundleLocation(*o.restore_from); !at) return fail("--restore-from: " + at.error());
    lines += "restore-from=" + *o.restore_from + "\n";
  }
  if (o.secret_file && o.new_secret_file) {
    return fail("give --cluster-secret FILE (an existing secret) or --new-cluster-secret FILE (a new one), not both");
  }
  if (o.secret_file || o.new_secret_file) {
    auto secret = o.secret_file ? ReadClusterSecret(*o.secret_file) : NewClusterSecret(*o.new_secret_file);
    if (!secret) return fail(secret.error());
    made_secret = o.new_secret_file.has_value();
    if (o.new_secret_file) {
      std::cerr << "sprout: made a new cluster secret in " << o.new_secret_file->string()
                << " (32 random bytes, mode 600); personalize the cluster's other nodes with --cluster-secret "
                << o.new_secret_file->string() << "\n";
    }
    lines += "cluster-secret=" + Base64Encode(*secret) + "\n";
  }
  if (o.ca_cert_hash) lines += "ca-cert-hash=" + *o.ca_cert_hash + "\n";
  if (o.ssh_key_file) {
    auto key = ReadFile(*o.ssh_key_file);
    if (!key) return fail(key.error());
    lines += "ssh-authorized-key=" + std::string(Trim(*key)) + "\n";
  }
  auto given = ParseNodeConfig(lines, "option");
  if (!given) return fail(given.error());
  // A cluster secret given now brings its own CA pin, unless one is given beside it: the
  // pin already in the area belongs to whatever secret came with it.
  NodeConfig kept = *existing;
  const bool secret_now = o.secret_file || o.new_secret_file;
  if (secret_now && !o.ca_cert_hash) kept.ca_cert_hash.reset();
  // A worker's config area gets the worker secret derived from the cluster secret, never
  // the cluster secret itself (a worker's image must yield no control-plane secret), and
  // the pin of the CA a cluster formed with that secret has.
  NodeConfig combined = o.clear ? *given : MergeNodeConfig({kept, *given});
  const bool worker = combined.role && *combined.role == "worker";
  if (o.ca_cert_hash && !worker) {
    return fail("--ca-cert-hash pins the cluster CA on a worker, and this node's role is " +
                (combined.role ? *combined.role : std::string("control-plane (the default)")) +
                "; give --role worker, or leave --ca-cert-hash out");
  }
  const bool derives_pin = worker && combined.cluster_secret && !combined.ca_cert_hash;
  auto merged_or = settings::SecretsForRole(combined);
  if (!merged_or) return fail(merged_or.error());
  NodeConfig merged = *merged_or;
  if (merged.worker_secret && secret_now) {
    std::cerr << "sprout: " << o.image.string()
              << ": role worker: wrote the worker secret derived from the cluster secret, not the cluster secret\n";
  }
  if (derives_pin && merged.ca_cert_hash) {
    std::cerr << "sprout: " << o.image.string() << ": role worker: pinned the cluster CA " << *merged.ca_cert_hash
              << ", which a cluster formed with this secret has (a cluster formed before sprout derived its CA "
                 "from the secret has another: give --ca-cert-hash with the hash `sprout-firstboot status` prints "
                 "on its control-plane nodes)\n";
  }
  if (worker && !merged.ca_cert_hash) {
    std::cerr << "sprout: warning: " << o.image.string()
              << ": role worker without a cluster CA pin: it will trust the first CA a join endpoint hands it; give "
                 "--cluster-secret FILE or --ca-cert-hash sha256:HEX\n";
  }
  std::string text = RenderNodeConfig(merged);
  if (text.size() >= area->size()) return fail("the settings do not fit the config area");
  std::vector<std::uint8_t> block(text.begin(), text.end());
  block.resize(area->size(), 0);
  if (auto w = WritePartition(*disk, *area, 0, block); !w) return fail("cannot write the config area: " + w.error());
  if (auto w = disk->Sync(); !w) return fail("cannot write the config area: " + w.error());
  // An image that holds a secret is a secret itself: only its owner may read it.
  if (merged.cluster_secret || merged.worker_secret) {
    struct stat st {};
    if (::fstat(disk->fd(), &st) == 0 && (st.st_mode & 077) != 0) {
      if (::fchmod(disk->fd(), st.st_mode & 0700) == 0) {
        std::cerr << "sprout: " << o.image.string() << " holds the "
                  << (merged.cluster_secret ? "cluster secret" : "worker secret") << " now; made it mode " << std::oct
                  << (st.st_mode & 0700) << std::dec << " (was " << std::oct << (st.st_mode & 0777) << std::dec
                  << ")\n";
      } else {
        std::cerr << "sprout: warning: " << o.image.string()
                  << " holds a secret and others may read it; cannot change its mode: " << std::strerror(errno)
                  << "; run chmod 600 on it\n";
      }
    }
  }
  made_secret = false;  // the image holds it now: it stays, whatever follows
  std::cout << "personalized " << o.image.string() << " (config area at byte " << area->offset()
            << "; root and verity untouched):\n"
            << Redacted(merged);
  return 0;
}

int PrintCaCertHash(const std::filesystem::path& secret_file) {
  auto secret = ReadClusterSecret(secret_file);
  if (!secret) {
    std::cerr << "sprout: " << secret.error() << "\n";
    return 1;
  }
  auto hash = pki::ClusterCaCertHash(*secret);
  if (!hash) {
    std::cerr << "sprout: " << hash.error() << "\n";
    return 1;
  }
  std::cout << *hash << "\n";
  return 0;
}

int PrintWorkerSecret(const std::filesystem::path& secret_file) {
  auto secret = ReadClusterSecret(secret_file);
  if (!secret) {
    std::cerr << "sprout: " << secret.error() << "\n";
    return 1;
  }
  std::cout << formation::WorkerSecret(*secret) << "\n";
  return 0;
}

}  // namespace sprout::cli
