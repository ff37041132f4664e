// sprout: builds bootable node images from a YAML profile.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cxxopts.hpp>
#include <functional>
#include <iostream>

#include "builder/commands.h"
#include "builder/images.h"
#include "util/fs.h"
#include "util/text.h"

namespace {

// kIntro and kStart frame the command table in `sprout help` (Usage below).
const char* kIntro = "sprout builds bootable node images for self-hosted Kubernetes control planes.\n\nUsage:\n";
const char* kStart = R"(
Start with:
  sprout validate profiles/default.yaml
  sudo sprout base profiles/default.yaml
  sprout build profiles/default.yaml -o out/
  sprout boot out/default.raw --snapshot

The cache (bases, images, compiled Kubernetes) is shared: root and the quickstart use
/var/cache/sprout, and so does any user who may write it; other users get ~/.cache/sprout
and still find the bases root built. SPROUT_CACHE_DIR or --cache-dir choose another.

Profiles are YAML; docs/profiles.md describes every setting and how `extends:` merges.
Each command explains its options: sprout COMMAND --help.
)";

int Fail(const std::string& message) {
  std::cerr << "sprout: " << message << "\n";
  return 2;
}

// CacheDir is --cache-dir, or the default cache without it (DefaultCacheDir:
// $SPROUT_CACHE_DIR, /var/cache/sprout for root or a user who may write it, else
// ~/.cache/sprout).
std::filesystem::path CacheDir(const cxxopts::ParseResult& a) {
  return a.count("cache-dir") ? std::filesystem::path(a["cache-dir"].as<std::string>()) : sprout::DefaultCacheDir();
}

// kCacheHelp is the --cache-dir help of every command that reads or fills the cache.
const char* kCacheHelp =
    "cache of bases and images (default: $SPROUT_CACHE_DIR; else /var/cache/sprout for root "
    "and for users who may write it; else ~/.cache/sprout, which also reads bases from "
    "/var/cache/sprout)";

// Set copies option name into field when it was given.
template <typename T, typename Field>
void Set(const cxxopts::ParseResult& a, const std::string& name, Field& field) {
  if (a.count(name)) field = a[name].template as<T>();
}

// Required is the argument a subcommand cannot run without, and the error without it.
struct Required {
  std::string name;     // option name, such as "output"
  std::string missing;  // the error message when it is absent
};

// Positional is a subcommand's one positional argument, which it needs.
struct Positional {
  std::string name;         // option name, such as "profile"
  std::string description;  // its help text, such as "profile file"
  std::string usage;        // what follows the options in the usage line, such as "PROFILE -o DIR"
  std::string missing;      // the error message when it is absent
};

using Runner = std::function<int(const cxxopts::ParseResult&)>;

// Run adds -h/--help as the last of o's options and parses argv: --help prints the
// help and returns 0, a missing required argument fails; otherwise run decides.
int Run(cxxopts::Options& o, const Required& required, int argc, char** argv, const Runner& run) {
  o.add_options()("h,help", "show help");
  auto a = o.parse(argc, argv);
  if (a.count("help")) {
    std::cout << o.help();
    return 0;
  }
  if (!a.count(required.name)) return Fail(required.missing);
  return run(a);
}

// Run adds the positional argument p after o's options, then runs as above.
int Run(cxxopts::Options& o, const Positional& p, int argc, char** argv, const Runner& run) {
  o.add_options()(p.name, p.description, cxxopts::value<std::string>());
  o.parse_positional({p.name});
  o.positional_help(p.usage);
  return Run(o, Required{p.name, p.missing}, argc, argv, run);
}

int Keygen(int argc, char** argv) {
  cxxopts::Options o("sprout keygen",
                     "Make an Ed25519 key pair for signing builds (sprout build --sign), or with --secure-boot an "
                     "RSA key and self-signed certificate for signing EFI images (sprout uki --key --cert).");
  o.custom_help("-o PREFIX [--secure-boot [--name CN]]");
  o.add_options()("o,output",
                  "prefix of PREFIX.key (private, mode 0600) and PREFIX.pub, or PREFIX.crt with --secure-boot",
                  cxxopts::value<std::string>())(
      "secure-boot",
      "make the Secure Boot pair: PREFIX.key (RSA 2048) and PREFIX.crt, the certificate to enroll in db")(
      "name", "the certificate's common name (with --secure-boot)",
      cxxopts::value<std::string>()->default_value("sprout Secure Boot signing key"));
  return Run(o, Required{"output", "keygen needs -o PREFIX, such as -o keys/site"}, argc, argv,
             [](const cxxopts::ParseResult& a) {
               if (a.count("secure-boot"))
                 return sprout::cli::KeygenSecureBoot(a["output"].as<std::string>(), a["name"].as<std::string>());
               return sprout::cli::Keygen(a["output"].as<std::string>());
             });
}

int Uki(int argc, char** argv) {
  cxxopts::Options o("sprout uki",
                     "Make a unified kernel image: systemd's EFI stub with the kernel, initrd, command line and "
                     "os-release as sections, one file the firmware starts. Signed with --key and --cert, Secure "
                     "Boot firmware that has the certificate in db starts it, and the stub then uses only the "
                     "embedded command line. Signed, it also carries systemd's signed PCR policy (.pcrpkey and "
                     ".pcrsig, with the same key), so a state sealed to the key unlocks under it. The same inputs "
                     "and key give the same bytes.\n\nExample:\n"
                     "  sprout keygen --secure-boot -o keys/sb\n"
                     "  sprout uki --stub /usr/lib/systemd/boot/efi/linuxx64.efi.stub --kernel vmlinuz \\\n"
                     "    --initrd initrd.img --cmdline 'console=ttyS0 ro' --os-release /etc/os-release \\\n"
                     "    --key keys/sb.key --cert keys/sb.crt -o sprout.efi\n"
                     "  sprout inspect sprout.efi");
  o.custom_help("--stub F --kernel F --cmdline S -o OUT [--initrd F] [--os-release F] [--key K --cert C]");
  o.add_options()("stub", "systemd's EFI stub (package systemd-boot-efi: linuxx64.efi.stub or linuxaa64.efi.stub)",
                  cxxopts::value<std::string>())("kernel", "the kernel (vmlinuz)", cxxopts::value<std::string>())(
      "initrd", "the initrd", cxxopts::value<std::string>())("cmdline", "the kernel command line",
                                                             cxxopts::value<std::string>())(
      "os-release", "an os-release file (boot menus show its PRETTY_NAME)", cxxopts::value<std::string>())(
      "key", "RSA private key (PEM) to sign with (sprout keygen --secure-boot)", cxxopts::value<std::string>())(
      "cert", "its certificate (PEM)", cxxopts::value<std::string>())(
      "o,output", "the image to write (replaced whole, never half-written)", cxxopts::value<std::string>());
  return Run(o, Required{"output", "uki needs -o OUT, such as -o sprout.efi"}, argc, argv,
             [](const cxxopts::ParseResult& a) {
               for (const char* need : {"stub", "kernel", "cmdline"}) {
                 if (!a.count(need)) return Fail(std::string("uki needs --") + need + " (see sprout uki --help)");
               }
               sprout::cli::UkiOptions u;
               u.output = a["output"].as<std::string>();
               u.stub = a["stub"].as<std::string>();
               u.kernel = a["kernel"].as<std::string>();
               u.cmdline = a["cmdline"].as<std::string>();
               Set<std::string>(a, "initrd", u.initrd);
               Set<std::string>(a, "os-release", u.os_release);
               Set<std::string>(a, "key", u.key);
               Set<std::string>(a, "cert", u.cert);
               return sprout::cli::Uki(u);
             });
}

int SignEfi(int argc, char** argv) {
  cxxopts::Options o("sprout sign-efi",
                     "Sign an EFI image (systemd-boot, a unified kernel image) for Secure Boot with an RSA key and its "
                     "certificate (sprout keygen --secure-boot). The signature is deterministic: the same image and "
                     "key give the same bytes.");
  o.add_options()("key", "RSA private key (PEM)", cxxopts::value<std::string>())(
      "cert", "its certificate (PEM), the one the firmware's db holds", cxxopts::value<std::string>())(
      "o,output", "the signed image to write", cxxopts::value<std::string>());
  return Run(o,
             Positional{"input", "unsigned EFI image", "IMAGE --key K --cert C -o OUT",
                        "sign-efi needs an IMAGE, such as /usr/lib/systemd/boot/efi/systemd-bootx64.efi"},
             argc, argv, [](const cxxopts::ParseResult& a) {
               for (const char* need : {"key", "cert", "output"}) {
                 if (!a.count(need))
                   return Fail(std::string("sign-efi needs --") +
                               (std::string(need) == "output" ? "output (-o)" : need) +
                               " (see sprout sign-efi --help)");
               }
               return sprout::cli::SignEfi(a["input"].as<std::string>(), a["output"].as<std::string>(),
                                           a["key"].as<std::string>(), a["cert"].as<std::string>());
             });
}

int Verify(int argc, char** argv) {
  cxxopts::Options o("sprout verify", "Check a build's outputs against its sums and, with --key, its signature.");
  o.add_options()("key", "Ed25519 public key (PEM) the manifest's signature must match", cxxopts::value<std::string>());
  return Run(o, Positional{"dir", "output directory", "DIR [--key PUB]", "verify needs a DIR, the -o of a build"}, argc,
             argv, [](const cxxopts::ParseResult& a) {
               return sprout::cli::Verify(a["dir"].as<std::string>(), a.count("key") ? a["key"].as<std::string>() : "");
             });
}

int Inspect(int argc, char** argv) {
  cxxopts::Options o("sprout inspect",
                     "Show an image's partitions, root hash, update slots, profile, images and workloads.");
  o.add_options()("json", "print JSON");
  return Run(o,
             Positional{"image", "raw, qcow2 or ISO image, or an EFI file (its sections and signature)",
                        "IMAGE [--json]", "inspect needs an IMAGE, such as out/default.raw"},
             argc, argv, [](const cxxopts::ParseResult& a) {
               return sprout::cli::Inspect(a["image"].as<std::string>(), a.count("json") > 0);
             });
}

int Validate(int argc, char** argv) {
  cxxopts::Options o("sprout validate", "Check a profile and everything it extends; all problems are listed.");
  o.add_options()("print", "print the resolved profile as JSON");
  return Run(
      o, Positional{"profile", "profile file", "PROFILE", "validate needs a PROFILE, such as profiles/default.yaml"},
      argc, argv, [](const cxxopts::ParseResult& a) {
        return sprout::cli::Validate(a["profile"].as<std::string>(), a.count("print") > 0);
      });
}

int Cis(int argc, char** argv) {
  cxxopts::Options o("sprout cis",
                     "Print the CIS Kubernetes Benchmark report of the files a profile's image and its control-plane "
                     "node would have, rendered as the build renders them (docs/cis.md).");
  return Run(o, Positional{"profile", "profile file", "PROFILE", "cis needs a PROFILE, such as profiles/default.yaml"},
             argc, argv,
             [](const cxxopts::ParseResult& a) { return sprout::cli::Cis(a["profile"].as<std::string>()); });
}

int Build(int argc, char** argv) {
  cxxopts::Options o("sprout build", "Build a profile's images. Runs without root once the base is cached.");
  o.add_options()("o,output", "output directory", cxxopts::value<std::string>())("cache-dir", kCacheHelp,
                                                                                 cxxopts::value<std::string>())(
      "build-base", "build the base recipe if it is not cached yet (needs root or user namespaces)")(
      "j,jobs", "compressor threads (default: all cores)", cxxopts::value<int>()->default_value("0"))(
      "format", "outputs to make, overriding the profile: raw,iso,pxe,qcow2", cxxopts::value<std::string>())(
      "offline", "never use the network: container images must be in the cache")(
      "ca-bundle", "extra CA bundle (PEM) for registries", cxxopts::value<std::string>())(
      "sign", "sign manifest.json with this Ed25519 private key (see sprout keygen)", cxxopts::value<std::string>())(
      "secure-boot-key",
      "sign systemd-boot and a unified kernel image for Secure Boot with this RSA key (sprout keygen --secure-boot)",
      cxxopts::value<std::string>())("secure-boot-cert",
                                     "the certificate of --secure-boot-key, the one enrolled in the firmware's db",
                                     cxxopts::value<std::string>())(
      "arch", "build for amd64 or arm64, overriding the profile's arch", cxxopts::value<std::string>())(
      "serial",
      "the build's serial, overriding the profile's update.serial (default: the build's epoch); nodes refuse an "
      "update whose serial is not above the one they run",
      cxxopts::value<std::string>());
  return Run(
      o,
      Positional{"profile", "profile file", "PROFILE -o DIR", "build needs a PROFILE, such as profiles/default.yaml"},
      argc, argv, [](const cxxopts::ParseResult& a) {
        if (!a.count("output")) return Fail("build needs an output directory: -o DIR");
        sprout::cli::BuildOptions b;
        b.profile = a["profile"].as<std::string>();
        b.out_dir = a["output"].as<std::string>();
        b.cache_dir = CacheDir(a);
        b.build_base = a.count("build-base") > 0;
        b.jobs = a["jobs"].as<int>();
        b.offline = a.count("offline") > 0;
        Set<std::string>(a, "ca-bundle", b.ca_bundle);
        Set<std::string>(a, "sign", b.sign_key);
        Set<std::string>(a, "secure-boot-key", b.secure_boot_key);
        Set<std::string>(a, "secure-boot-cert", b.secure_boot_cert);
        if (a.count("arch")) {
          b.arch = sprout::ParseArchName(a["arch"].as<std::string>());
          if (!b.arch) return Fail("--arch takes amd64 or arm64; " + sprout::ArchHint(a["arch"].as<std::string>()));
        }
        if (a.count("serial")) {
          const std::string v = a["serial"].as<std::string>();
          std::size_t used = 0;
          long long serial = -1;
          try {
            serial = std::stoll(v, &used);
          } catch (const std::exception&) {
            used = 0;
          }
          if (used != v.size() || serial < 0) {
            return Fail("--serial takes a non-negative whole number, such as 2026113001; got '" + v + "'");
          }
          b.serial = serial;
        }
        if (a.count("format")) {
          for (const auto& f : sprout::Split(a["format"].as<std::string>(), ',')) {
            auto format = sprout::ParseFormatName(f);
            if (!format) {
              return Fail("--format takes raw, iso, pxe and qcow2 (comma-separated); '" + f + "' is not one");
            }
            b.formats.push_back(*format);
          }
        }
        return sprout::cli::Build(b);
      });
}

int Pull(int argc, char** argv) {
  cxxopts::Options o("sprout pull", "Fetch the container images a profile lists into the cache (docs/images.md).");
  o.add_options()("cache-dir", kCacheHelp, cxxopts::value<std::string>())(
      "offline", "never use the network; fail naming any image not in the cache")(
      "ca-bundle", "extra CA bundle (PEM) for registries", cxxopts::value<std::string>())(
      "parallel", "concurrent blob downloads", cxxopts::value<int>()->default_value("6"))(
      "layout", "also write the images as one OCI layout into this directory", cxxopts::value<std::string>())(
      "arch", "pull for amd64 or arm64, overriding the profile's arch", cxxopts::value<std::string>());
  return Run(o, Positional{"profile", "profile file", "PROFILE", "pull needs a PROFILE, such as profiles/default.yaml"},
             argc, argv, [](const cxxopts::ParseResult& a) {
               sprout::cli::PullCliOptions p;
               if (a.count("arch")) {
                 p.arch = sprout::ParseArchName(a["arch"].as<std::string>());
                 if (!p.arch)
                   return Fail("--arch takes amd64 or arm64; " + sprout::ArchHint(a["arch"].as<std::string>()));
               }
               p.profile = a["profile"].as<std::string>();
               p.cache_dir = CacheDir(a);
               p.offline = a.count("offline") > 0;
               Set<std::string>(a, "ca-bundle", p.ca_bundle);
               Set<std::string>(a, "layout", p.layout);
               p.parallel = a["parallel"].as<int>();
               return sprout::cli::Pull(p);
             });
}

int Base(int argc, char** argv) {
  cxxopts::Options o("sprout base", "Build the base OS of a profile (or a recipe directory) into the cache.");
  o.add_options()("cache-dir", kCacheHelp, cxxopts::value<std::string>())("force", "rebuild even if cached")(
      "arch", "build for amd64 or arm64 (default: the profile's arch; amd64 for a recipe)",
      cxxopts::value<std::string>());
  return Run(o,
             Positional{"what", "profile or recipe", "PROFILE|RECIPE",
                        "base needs a PROFILE or a recipe directory, such as images/base"},
             argc, argv, [](const cxxopts::ParseResult& a) {
               std::optional<sprout::Arch> arch;
               if (a.count("arch")) {
                 arch = sprout::ParseArchName(a["arch"].as<std::string>());
                 if (!arch)
                   return Fail("--arch takes amd64 or arm64; " + sprout::ArchHint(a["arch"].as<std::string>()));
               }
               return sprout::cli::Base(a["what"].as<std::string>(), CacheDir(a), a.count("force") > 0, arch);
             });
}

int Personalize(int argc, char** argv) {
  cxxopts::Options o("sprout personalize",
                     "Write per-cluster and per-node settings into a raw image's config area, without\n"
                     "rebuilding and without touching the root. Settings add to those already there.\n"
                     "At boot, fw_cfg (opt/sprout/config) overrides them and the kernel command line\n"
                     "(sprout.KEY=VALUE) overrides both.");
  o.add_options()("cluster-secret", "file whose bytes are the cluster secret (at least 16, not a repeated pattern)",
                  cxxopts::value<std::string>())(
      "new-cluster-secret", "make a new cluster secret in this file (32 random bytes, mode 600; it must not exist)",
      cxxopts::value<std::string>())("hostname", "node name", cxxopts::value<std::string>())(
      "role", "control-plane or worker", cxxopts::value<std::string>())(
      "address", "static address with prefix, e.g. 198.18.0.10/24", cxxopts::value<std::string>())(
      "gateway", "default gateway", cxxopts::value<std::string>())(
      "peer", "a static peer address (repeat or comma-separate)", cxxopts::value<std::vector<std::string>>())(
      "ssh-key", "file with an SSH public key, for debugging", cxxopts::value<std::string>())(
      "backup-dir", "where this control-plane node writes etcd backups: a folder or nfs://HOST/PATH",
      cxxopts::value<std::string>())("restore-from",
                                     "a fresh control-plane node forms the cluster from this backup bundle (a path or\n"
                                     "nfs://HOST/PATH/NAME.sprout-backup); see docs/backup.md",
                                     cxxopts::value<std::string>())(
      "ca-cert-hash",
      "worker: pin the cluster CA, sha256:HEX (kubeadm's --discovery-token-ca-cert-hash form). --role worker "
      "--cluster-secret F writes the pin of the CA a cluster formed with F has; give this for a cluster formed "
      "before sprout derived its CA from the secret (`sprout-firstboot status` on a control-plane node prints it)",
      cxxopts::value<std::string>())("print", "show the current settings (secret redacted) and change nothing")(
      "clear", "drop the current settings first");
  return Run(o, Positional{"image", "raw image", "IMAGE", "personalize needs an IMAGE, such as out/default.raw"}, argc,
             argv, [](const cxxopts::ParseResult& a) {
               sprout::cli::PersonalizeOptions p;
               p.image = a["image"].as<std::string>();
               Set<std::string>(a, "cluster-secret", p.secret_file);
               Set<std::string>(a, "new-cluster-secret", p.new_secret_file);
               Set<std::string>(a, "ssh-key", p.ssh_key_file);
               Set<std::string>(a, "hostname", p.hostname);
               Set<std::string>(a, "role", p.role);
               Set<std::string>(a, "address", p.address);
               Set<std::string>(a, "gateway", p.gateway);
               Set<std::vector<std::string>>(a, "peer", p.peers);
               Set<std::string>(a, "backup-dir", p.backup_dir);
               Set<std::string>(a, "restore-from", p.restore_from);
               Set<std::string>(a, "ca-cert-hash", p.ca_cert_hash);
               p.print = a.count("print") > 0;
               p.clear = a.count("clear") > 0;
               return sprout::cli::Personalize(p);
             });
}

int WorkerSecret(int argc, char** argv) {
  cxxopts::Options o("sprout worker-secret",
                     "Print the worker secret of a cluster secret: 64 hex digits, one-way derived, which a\n"
                     "worker node is given instead of the cluster secret (worker-secret=... in fw_cfg or the\n"
                     "config area; sprout personalize --role worker writes it for you).");
  o.add_options()("cluster-secret", "file whose bytes are the cluster secret", cxxopts::value<std::string>());
  return Run(o, Required{"cluster-secret", "worker-secret needs --cluster-secret FILE"}, argc, argv,
             [](const cxxopts::ParseResult& a) {
               return sprout::cli::PrintWorkerSecret(a["cluster-secret"].as<std::string>());
             });
}

int CaCertHash(int argc, char** argv) {
  cxxopts::Options o("sprout ca-cert-hash",
                     "Print the pin of the cluster CA that a cluster formed with this cluster secret has:\n"
                     "sha256:HEX, kubeadm's discovery-hash form (the founder derives the Kubernetes CA's key\n"
                     "from the secret). A worker given it (ca-cert-hash=... in fw_cfg or the config area;\n"
                     "sprout personalize --role worker writes it for you) refuses a join endpoint that hands\n"
                     "it another CA. Public: it proves nothing by itself.");
  o.add_options()("cluster-secret", "file whose bytes are the cluster secret", cxxopts::value<std::string>());
  return Run(o, Required{"cluster-secret", "ca-cert-hash needs --cluster-secret FILE"}, argc, argv,
             [](const cxxopts::ParseResult& a) {
               return sprout::cli::PrintCaCertHash(a["cluster-secret"].as<std::string>());
             });
}

int Boot(int argc, char** argv) {
  cxxopts::Options o("sprout boot",
                     "Boot an image in QEMU: UEFI firmware (OVMF), serial console on this terminal.\n"
                     "Quit with Ctrl-A then X. Extra QEMU arguments go after --.");
  o.add_options()("snapshot", "discard every write when QEMU exits")(
      "kvm",
      "use KVM when a probe boot under it works, else software emulation, saying why "
      "(SPROUT_QEMU_ACCEL=kvm|tcg|auto overrides)")("m,memory", "memory in MiB",
                                                    cxxopts::value<std::string>()->default_value("2048"))(
      "smp", "virtual CPUs", cxxopts::value<int>()->default_value("2"));
  std::vector<std::string> extra;
  for (int i = 0; i < argc; ++i) {
    if (std::string(argv[i]) == "--") {
      for (int j = i + 1; j < argc; ++j) extra.emplace_back(argv[j]);
      argc = i;
      break;
    }
  }
  return Run(
      o, Positional{"image", "raw image", "IMAGE [-- QEMU-ARGS...]", "boot needs an IMAGE, such as out/default.raw"},
      argc, argv, [&extra](const cxxopts::ParseResult& a) {
        sprout::cli::BootOptions b;
        b.image = a["image"].as<std::string>();
        b.snapshot = a.count("snapshot") > 0;
        b.memory = a["memory"].as<std::string>();
        b.cpus = a["smp"].as<int>();
        b.kvm = a.count("kvm") > 0;
        b.extra = extra;
        return sprout::cli::Boot(b);
      });
}

// Command is one row of sprout's command table: `sprout help` is made from it, and Main
// runs the row whose name is argv[1] with the rest of the arguments.
struct Command {
  const char* name;
  const char* synopsis;  // what follows "sprout " in the help, such as "build PROFILE -o DIR [options]"
  const char* summary;   // one line; "\n" continues it under itself
  int (*run)(int argc, char** argv);
};

const Command kCommands[] = {
    {"validate", "validate PROFILE [--print]", "check a profile; every problem is reported at once", Validate},
    {"cis", "cis PROFILE", "print the CIS Benchmark report of the profile's rendered\ncontrol plane and kubelet files",
     Cis},
    {"build", "build PROFILE -o DIR [options]", "build the profile's images into DIR", Build},
    {"base", "base PROFILE|RECIPE [--force]", "build the base OS once and cache it (needs root)", Base},
    {"pull", "pull PROFILE [--offline]", "fetch the profile's container images into the cache", Pull},
    {"personalize", "personalize IMAGE [settings]",
     "write per-node settings (secret, hostname, role, address,\npeers, SSH key) into an image; the root is not "
     "touched",
     Personalize},
    {"worker-secret", "worker-secret --cluster-secret F",
     "print the worker secret of a cluster secret (what a worker\nis given instead, as worker-secret= in fw_cfg or "
     "the\nconfig area; docs/personalization.md)",
     WorkerSecret},
    {"ca-cert-hash", "ca-cert-hash --cluster-secret F",
     "print the pin of the cluster CA a cluster formed with that\nsecret has (ca-cert-hash= for a worker; "
     "docs/formation.md)",
     CaCertHash},
    {"boot", "boot IMAGE [--snapshot]", "boot an image in QEMU with UEFI and a serial console", Boot},
    {"keygen", "keygen -o PREFIX [--secure-boot]", "make a key pair for --sign, or for Secure Boot", Keygen},
    {"uki", "uki --stub F --kernel F -o OUT", "make a unified kernel image, signed for Secure Boot", Uki},
    {"sign-efi", "sign-efi IMAGE --key K -o OUT", "sign an EFI image for Secure Boot", SignEfi},
    {"verify", "verify DIR [--key PUB]", "check a build's outputs against its sums and signature", Verify},
    {"inspect", "inspect IMAGE [--json]", "show an image's partitions, root hash, profile, images, workloads", Inspect},
};

// Usage is `sprout help`: the introduction, one entry a command, and where to start.
std::string Usage() {
  constexpr std::size_t kColumn = 43;  // where the summaries start
  std::string out = kIntro;
  auto entry = [&out](const std::string& synopsis, const std::string& summary) {
    std::string line = "  sprout " + synopsis;
    line.append(line.size() < kColumn ? kColumn - line.size() : 1, ' ');
    bool first = true;
    for (const auto& part : sprout::Split(summary, '\n')) {
      out += (first ? line : std::string(kColumn, ' ')) + part + "\n";
      first = false;
    }
  };
  for (const auto& c : kCommands) entry(c.synopsis, c.summary);
  entry("help", "show this text");
  return out + kStart;
}

int Main(int argc, char** argv) {
  // Children that stop reading (a packer that failed) must give an error, not kill sprout.
  std::signal(SIGPIPE, SIG_IGN);
  if (argc < 2 || std::string(argv[1]) == "help" || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::cout << Usage();
    return argc < 2 ? 2 : 0;
  }
  if (std::string(argv[1]) == "--version") {
    std::cout << "sprout " << SPROUT_VERSION << "\n";
    return 0;
  }
  std::string command = argv[1];
  for (const auto& c : kCommands) {
    if (command != c.name) continue;
    try {
      // Each command has its own options; argv[1] is dropped so cxxopts sees the rest.
      return c.run(argc - 1, argv + 1);
    } catch (const cxxopts::exceptions::exception& e) {
      return Fail(std::string(e.what()) + "\nsee `sprout " + command + " --help`");
    }
  }
  return Fail("unknown command '" + command + "'; see `sprout help`");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    // Anything unexpected still ends with a message, never an abort.
    std::fprintf(stderr, "%s: %s\n", "sprout", e.what());
    return 1;
  }
}
