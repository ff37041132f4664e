// sprout: builds bootable node images from a YAML profile.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cxxopts.hpp>
#include <iostream>

#include "builder/commands.h"
#include "builder/images.h"
#include "builder/media.h"
#include "util/fs.h"
#include "util/text.h"

namespace {

const char* kUsage = R"(sprout builds bootable node images for self-hosted Kubernetes control planes.

Usage:
  sprout validate PROFILE [--print]        check a profile; every problem is reported at once
  sprout build PROFILE -o DIR [options]    build the profile's images into DIR
  sprout base PROFILE|RECIPE [--force]     build the base OS once and cache it (needs root)
  sprout pull PROFILE [--offline]          fetch the profile's container images into the cache
  sprout personalize IMAGE [settings]      write per-node settings (secret, hostname, role, address,
                                           peers, SSH key) into an image; the root is not touched
  sprout boot IMAGE [--snapshot]           boot an image in QEMU with UEFI and a serial console
  sprout keygen -o PREFIX                  make an Ed25519 key pair PREFIX.key, PREFIX.pub
  sprout verify DIR [--key PUB]            check a build's outputs against its sums and signature
  sprout inspect IMAGE [--json]            show an image's partitions, root hash, profile, images
  sprout help                              show this text

Start with:
  sprout validate profiles/default.yaml
  sudo sprout base profiles/default.yaml
  sprout build profiles/default.yaml -o out/
  sprout boot out/default.raw --snapshot

Profiles are YAML; docs/profiles.md describes every setting and how `extends:` merges.
)";

std::filesystem::path DefaultCache() { return sprout::UserCacheDir(); }

int Fail(const std::string& message) {
  std::cerr << "sprout: " << message << "\n";
  return 2;
}

}  // namespace

namespace {

// MediaCommand runs keygen, verify and inspect.
int MediaCommand(const std::string& command, int argc, char** argv) {
  cxxopts::Options o("sprout " + command, "");
  if (command == "keygen") {
    o.custom_help("-o PREFIX");
    o.add_options()("o,output", "prefix of PREFIX.key (private, mode 0600) and PREFIX.pub",
                    cxxopts::value<std::string>())("h,help", "show help");
  } else if (command == "verify") {
    o.positional_help("DIR [--key PUB]");
    o.add_options()("key", "Ed25519 public key (PEM) the manifest's signature must match",
                    cxxopts::value<std::string>())("dir", "output directory", cxxopts::value<std::string>())(
        "h,help", "show help");
    o.parse_positional({"dir"});
  } else {
    o.positional_help("IMAGE [--json]");
    o.add_options()("json", "print JSON")("image", "raw, qcow2 or ISO image", cxxopts::value<std::string>())(
        "h,help", "show help");
    o.parse_positional({"image"});
  }
  auto a = o.parse(argc, argv);
  if (a.count("help")) {
    std::cout << o.help();
    return 0;
  }
  if (command == "keygen") {
    if (!a.count("output")) return Fail("keygen needs -o PREFIX, such as -o keys/site");
    return sprout::cli::Keygen(a["output"].as<std::string>());
  }
  if (command == "verify") {
    if (!a.count("dir")) return Fail("verify needs a DIR, the -o of a build");
    return sprout::cli::Verify(a["dir"].as<std::string>(), a.count("key") ? a["key"].as<std::string>() : "");
  }
  if (!a.count("image")) return Fail("inspect needs an IMAGE, such as out/default.raw");
  return sprout::cli::Inspect(a["image"].as<std::string>(), a.count("json") > 0);
}

int Main(int argc, char** argv) {
  // Children that stop reading (a packer that failed) must give an error, not kill sprout.
  std::signal(SIGPIPE, SIG_IGN);
  if (argc < 2 || std::string(argv[1]) == "help" || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  if (std::string(argv[1]) == "--version") {
    std::cout << "sprout " << SPROUT_VERSION << "\n";
    return 0;
  }
  std::string command = argv[1];
  // Each subcommand has its own options; argv[1] is dropped so cxxopts sees the rest.
  int sub_argc = argc - 1;
  char** sub_argv = argv + 1;
  try {
    if (command == "validate") {
      cxxopts::Options o("sprout validate", "Check a profile and everything it extends; all problems are listed.");
      o.add_options()("print", "print the resolved profile as JSON")(
          "profile", "profile file", cxxopts::value<std::string>())("h,help", "show help");
      o.parse_positional({"profile"});
      o.positional_help("PROFILE");
      auto a = o.parse(sub_argc, sub_argv);
      if (a.count("help")) {
        std::cout << o.help();
        return 0;
      }
      if (!a.count("profile")) return Fail("validate needs a PROFILE, such as profiles/default.yaml");
      return sprout::cli::Validate(a["profile"].as<std::string>(), a.count("print") > 0);
    }
    if (command == "build") {
      cxxopts::Options o("sprout build", "Build a profile's images. Runs without root once the base is cached.");
      o.add_options()("o,output", "output directory", cxxopts::value<std::string>())(
          "cache-dir", "cache of bases (default: ~/.cache/sprout)", cxxopts::value<std::string>())(
          "build-base", "build the base recipe if it is not cached yet (needs root or user namespaces)")(
          "j,jobs", "compressor threads (default: all cores)", cxxopts::value<int>()->default_value("0"))(
          "format", "outputs to make, overriding the profile: raw,iso,pxe,qcow2", cxxopts::value<std::string>())(
          "offline", "never use the network: container images must be in the cache")(
          "ca-bundle", "extra CA bundle (PEM) for registries", cxxopts::value<std::string>())(
          "sign", "sign manifest.json with this Ed25519 private key (see sprout keygen)",
          cxxopts::value<std::string>())("profile", "profile file", cxxopts::value<std::string>())("h,help",
                                                                                                   "show help");
      o.parse_positional({"profile"});
      o.positional_help("PROFILE -o DIR");
      auto a = o.parse(sub_argc, sub_argv);
      if (a.count("help")) {
        std::cout << o.help();
        return 0;
      }
      if (!a.count("profile")) return Fail("build needs a PROFILE, such as profiles/default.yaml");
      if (!a.count("output")) return Fail("build needs an output directory: -o DIR");
      sprout::cli::BuildOptions b;
      b.profile = a["profile"].as<std::string>();
      b.out_dir = a["output"].as<std::string>();
      b.cache_dir = a.count("cache-dir") ? std::filesystem::path(a["cache-dir"].as<std::string>()) : DefaultCache();
      b.build_base = a.count("build-base") > 0;
      b.jobs = a["jobs"].as<int>();
      b.offline = a.count("offline") > 0;
      if (a.count("ca-bundle")) b.ca_bundle = a["ca-bundle"].as<std::string>();
      if (a.count("sign")) b.sign_key = a["sign"].as<std::string>();
      if (a.count("format")) {
        for (const auto& f : sprout::Split(a["format"].as<std::string>(), ',')) {
          auto format = sprout::ParseFormatName(f);
          if (!format) return Fail("--format takes raw, iso, pxe and qcow2 (comma-separated); '" + f + "' is not one");
          b.formats.push_back(*format);
        }
      }
      return sprout::cli::Build(b);
    }
    if (command == "pull") {
      cxxopts::Options o("sprout pull", "Fetch the container images a profile lists into the cache (docs/images.md).");
      o.add_options()("cache-dir", "cache (default: ~/.cache/sprout)", cxxopts::value<std::string>())(
          "offline", "never use the network; fail naming any image not in the cache")(
          "ca-bundle", "extra CA bundle (PEM) for registries", cxxopts::value<std::string>())(
          "parallel", "concurrent blob downloads", cxxopts::value<int>()->default_value("6"))(
          "layout", "also write the images as one OCI layout into this directory", cxxopts::value<std::string>())(
          "profile", "profile file", cxxopts::value<std::string>())("h,help", "show help");
      o.parse_positional({"profile"});
      o.positional_help("PROFILE");
      auto a = o.parse(sub_argc, sub_argv);
      if (a.count("help")) {
        std::cout << o.help();
        return 0;
      }
      if (!a.count("profile")) return Fail("pull needs a PROFILE, such as profiles/default.yaml");
      sprout::cli::PullCliOptions p;
      p.profile = a["profile"].as<std::string>();
      p.cache_dir = a.count("cache-dir") ? std::filesystem::path(a["cache-dir"].as<std::string>()) : DefaultCache();
      p.offline = a.count("offline") > 0;
      if (a.count("ca-bundle")) p.ca_bundle = a["ca-bundle"].as<std::string>();
      if (a.count("layout")) p.layout = a["layout"].as<std::string>();
      p.parallel = a["parallel"].as<int>();
      return sprout::cli::Pull(p);
    }
    if (command == "keygen" || command == "verify" || command == "inspect") {
      return MediaCommand(command, sub_argc, sub_argv);
    }
    if (command == "base") {
      cxxopts::Options o("sprout base", "Build the base OS of a profile (or a recipe directory) into the cache.");
      o.add_options()("cache-dir", "cache of bases (default: ~/.cache/sprout)", cxxopts::value<std::string>())(
          "force", "rebuild even if cached")("what", "profile or recipe", cxxopts::value<std::string>())("h,help",
                                                                                                         "show help");
      o.parse_positional({"what"});
      o.positional_help("PROFILE|RECIPE");
      auto a = o.parse(sub_argc, sub_argv);
      if (a.count("help")) {
        std::cout << o.help();
        return 0;
      }
      if (!a.count("what")) return Fail("base needs a PROFILE or a recipe directory, such as images/base");
      auto cache = a.count("cache-dir") ? std::filesystem::path(a["cache-dir"].as<std::string>()) : DefaultCache();
      return sprout::cli::Base(a["what"].as<std::string>(), cache, a.count("force") > 0);
    }
    if (command == "personalize") {
      cxxopts::Options o("sprout personalize",
                         "Write per-cluster and per-node settings into a raw image's config area, without\n"
                         "rebuilding and without touching the root. Settings add to those already there.\n"
                         "At boot, fw_cfg (opt/sprout/config) overrides them and the kernel command line\n"
                         "(sprout.KEY=VALUE) overrides both.");
      o.add_options()("cluster-secret", "file whose bytes are the cluster secret (at least 16)",
                      cxxopts::value<std::string>())("hostname", "node name", cxxopts::value<std::string>())(
          "role", "control-plane or worker", cxxopts::value<std::string>())(
          "address", "static address with prefix, e.g. 198.18.0.10/24", cxxopts::value<std::string>())(
          "gateway", "default gateway", cxxopts::value<std::string>())(
          "peer", "a static peer address (repeat or comma-separate)", cxxopts::value<std::vector<std::string>>())(
          "ssh-key", "file with an SSH public key, for debugging", cxxopts::value<std::string>())(
          "print", "show the current settings (secret redacted) and change nothing")(
          "clear", "drop the current settings first")("image", "raw image", cxxopts::value<std::string>())("h,help",
                                                                                                           "show help");
      o.parse_positional({"image"});
      o.positional_help("IMAGE");
      auto a = o.parse(sub_argc, sub_argv);
      if (a.count("help")) {
        std::cout << o.help();
        return 0;
      }
      if (!a.count("image")) return Fail("personalize needs an IMAGE, such as out/default.raw");
      sprout::cli::PersonalizeOptions p;
      p.image = a["image"].as<std::string>();
      if (a.count("cluster-secret")) p.secret_file = a["cluster-secret"].as<std::string>();
      if (a.count("ssh-key")) p.ssh_key_file = a["ssh-key"].as<std::string>();
      if (a.count("hostname")) p.hostname = a["hostname"].as<std::string>();
      if (a.count("role")) p.role = a["role"].as<std::string>();
      if (a.count("address")) p.address = a["address"].as<std::string>();
      if (a.count("gateway")) p.gateway = a["gateway"].as<std::string>();
      if (a.count("peer")) p.peers = a["peer"].as<std::vector<std::string>>();
      p.print = a.count("print") > 0;
      p.clear = a.count("clear") > 0;
      return sprout::cli::Personalize(p);
    }
    if (command == "boot") {
      cxxopts::Options o("sprout boot",
                         "Boot an image in QEMU: UEFI firmware (OVMF), serial console on this terminal.\n"
                         "Quit with Ctrl-A then X. Extra QEMU arguments go after --.");
      o.add_options()("snapshot", "discard every write when QEMU exits")(
          "kvm", "use KVM (default: software emulation)")("m,memory", "memory in MiB",
                                                          cxxopts::value<std::string>()->default_value("2048"))(
          "smp", "virtual CPUs", cxxopts::value<int>()->default_value("2"))(
          "image", "raw image", cxxopts::value<std::string>())("h,help", "show help");
      o.parse_positional({"image"});
      o.positional_help("IMAGE [-- QEMU-ARGS...]");
      std::vector<std::string> extra;
      for (int i = 0; i < sub_argc; ++i) {
        if (std::string(sub_argv[i]) == "--") {
          for (int j = i + 1; j < sub_argc; ++j) extra.emplace_back(sub_argv[j]);
          sub_argc = i;
          break;
        }
      }
      auto a = o.parse(sub_argc, sub_argv);
      if (a.count("help")) {
        std::cout << o.help();
        return 0;
      }
      if (!a.count("image")) return Fail("boot needs an IMAGE, such as out/default.raw");
      sprout::cli::BootOptions b;
      b.image = a["image"].as<std::string>();
      b.snapshot = a.count("snapshot") > 0;
      b.memory = a["memory"].as<std::string>();
      b.cpus = a["smp"].as<int>();
      b.kvm = a.count("kvm") > 0;
      b.extra = extra;
      return sprout::cli::Boot(b);
    }
  } catch (const cxxopts::exceptions::exception& e) {
    return Fail(std::string(e.what()) + "\nsee `sprout " + command + " --help`");
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
