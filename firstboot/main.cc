// sprout-firstboot: runs on every node at every boot. This version loads its state,
// reports the node's phase to systemd and the journal, and stays up; peer discovery
// and cluster formation build on this skeleton.
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <cstdio>
#include <cxxopts.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "firstboot/state.h"
#include "nodeconfig/sources.h"
#include "util/fs.h"

namespace {

volatile std::sig_atomic_t g_stop = 0;

void OnSignal(int) { g_stop = 1; }

// Log writes a structured journal entry when running under systemd, else a plain line.
void Log(int priority, const std::string& phase, const std::string& message) {
  if (std::getenv("JOURNAL_STREAM") || std::getenv("INVOCATION_ID")) {
    sd_journal_send("MESSAGE=sprout-firstboot: %s", message.c_str(), "PRIORITY=%d", priority, "SPROUT_PHASE=%s",
                    phase.c_str(), "SYSLOG_IDENTIFIER=sprout-firstboot", nullptr);
  } else {
    std::fprintf(stderr, "sprout-firstboot: %s\n", message.c_str());
  }
}

// ApplyHostname makes a configured hostname the node's name now and at the next boot
// (the initrd binds <state>/hostname over /etc/hostname).
void ApplyHostname(const std::string& name, const std::string& state_dir) {
  auto current = sprout::ReadFile(std::filesystem::path(state_dir) / "hostname");
  if (current && *current == name + "\n") return;
  if (auto s = sprout::WriteFileAtomic(std::filesystem::path(state_dir) / "hostname", name + "\n"); !s) {
    Log(LOG_WARNING, "config", s.error());
  }
  if (::sethostname(name.c_str(), name.size()) != 0) {
    Log(LOG_WARNING, "config", "cannot set the hostname to " + name + ": " + std::strerror(errno));
  } else {
    Log(LOG_INFO, "config", "hostname set to " + name);
  }
}

int Run(const std::string& state_dir) {
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  auto state = sprout::LoadNodeState(state_dir);
  if (!state) {
    Log(LOG_ERR, "error", state.error());
    sd_notifyf(0, "STATUS=error: %s", state.error().c_str());
    return 1;
  }
  state->boots += 1;

  // Per-node settings given at flashing or boot time; a broken source is skipped.
  auto loaded = sprout::LoadNodeConfig();
  for (const auto& problem : loaded.problems) Log(LOG_WARNING, "config", "ignoring a bad config source: " + problem);
  for (const auto& [key, origin] : loaded.config.origin) Log(LOG_INFO, "config", key + " set by the " + origin);
  if (loaded.config.hostname) ApplyHostname(*loaded.config.hostname, state_dir);
  if (auto s = sprout::SaveNodeState(state_dir, *state); !s) {
    Log(LOG_ERR, "error", s.error());
    return 1;
  }
  std::string msg = "ready (boot " + std::to_string(state->boots) + ", phase " + state->phase + ")";
  Log(LOG_INFO, state->phase, msg);
  sd_notifyf(0, "READY=1\nSTATUS=%s", msg.c_str());
  while (!g_stop) ::pause();
  sd_notify(0, "STOPPING=1");
  return 0;
}

}  // namespace

namespace {

int Main(int argc, char** argv) {
  cxxopts::Options options("sprout-firstboot",
                           "Runs on every sprout node at boot: discovers peers and forms or joins the cluster.\n");
  options.add_options()("state-dir", "where the node keeps its state",
                        cxxopts::value<std::string>()->default_value("/var/lib/sprout"))(
      "command", "run | status", cxxopts::value<std::string>()->default_value("run"))("h,help", "show this help");
  options.parse_positional({"command"});
  options.positional_help("[run|status]");
  cxxopts::ParseResult args;
  try {
    args = options.parse(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "sprout-firstboot: " << e.what() << "\n" << options.help();
    return 2;
  }
  if (args.count("help")) {
    std::cout << options.help();
    return 0;
  }
  std::string command = args["command"].as<std::string>();
  std::string state_dir = args["state-dir"].as<std::string>();
  if (command == "run") return Run(state_dir);
  if (command == "status") {
    auto state = sprout::LoadNodeState(state_dir);
    if (!state) {
      std::cerr << "sprout-firstboot: " << state.error() << "\n";
      return 1;
    }
    std::cout << "phase: " << state->phase << "\nboots: " << state->boots << "\n";
    return 0;
  }
  std::cerr << "sprout-firstboot: unknown command '" << command << "'; use 'run' or 'status'\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    // Anything unexpected still ends with a message, never an abort.
    std::fprintf(stderr, "%s: %s\n", "sprout-firstboot", e.what());
    return 1;
  }
}
