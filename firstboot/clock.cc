#include "firstboot/clock.h"

#include <time.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "util/text.h"
#include "util/tsc.h"

namespace sprout::firstboot {

namespace {

namespace fs = std::filesystem;

const fs::path kClocksource = "/sys/devices/system/clocksource/clocksource0";

std::int64_t RawNs() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC_RAW, &t);
  return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

// Sample reads the TSC between two readings of the raw clock that are at most 200 µs
// apart (the guest was not descheduled in between); false after 50 tries.
bool Sample(TscSample& out) {
#if defined(__x86_64__) || defined(__i386__)
  for (int i = 0; i < 50; ++i) {
    const std::int64_t before = RawNs();
    const std::uint64_t tsc = __builtin_ia32_rdtsc();
    const std::int64_t after = RawNs();
    if (after - before <= 200'000) {
      out = {tsc, before + (after - before) / 2};
      return true;
    }
  }
#else
  (void)out;
#endif
  return false;
}

// Window samples, waits until the raw clock advanced by at least ns, and samples again.
bool Window(std::int64_t ns, TscSample& from, TscSample& to) {
  if (!Sample(from)) return false;
  while (RawNs() - from.raw_ns < ns) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return Sample(to);
}

// ReadSys: a sysfs file's text, trimmed; empty when it cannot be read.
std::string ReadSys(const fs::path& path) {
  std::ifstream in(path);
  std::string text;
  std::getline(in, text);
  return std::string(Trim(text));
}

std::string Current() { return ReadSys(kClocksource / "current_clocksource"); }

bool Use(const std::string& name) {
  {
    std::ofstream out(kClocksource / "current_clocksource");
    out << name << "\n";
  }
  return Current() == name;
}

}  // namespace

int ClockMain(int argc, char** argv) {
  if (argc > 1) {
    std::cout << "usage: sprout-firstboot clock\n\n"
                 "Checks that the TSC, when it is the kernel's clock, runs at the rate the kernel took\n"
                 "for it at boot, measured against another clocksource (hpet, acpi_pm or kvm-clock) for\n"
                 "a second; when it is more than 2 % off, that clocksource stays the clock. In software\n"
                 "emulation a busy host can make the kernel take a rate several times too low, and\n"
                 "every timeout on the node then fires that many times too early. The image runs it\n"
                 "early in every boot in a VM (sprout-clock.service).\n";
    return std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0 ? 0 : 2;
  }
  const std::string current = Current();
  if (current != "tsc") {
    std::cout << "sprout-firstboot clock: the clocksource is " << (current.empty() ? "unknown" : current)
              << ", not the TSC: nothing to check\n";
    return 0;
  }
  const std::string offered = ReadSys(kClocksource / "available_clocksource");
  const std::string available = " " + offered + " ";
  std::string reference;
  for (const char* c : {"hpet", "acpi_pm", "kvm-clock"}) {
    if (available.find(std::string(" ") + c + " ") != std::string::npos) {
      reference = c;
      break;
    }
  }
  if (reference.empty()) {
    std::cout << "sprout-firstboot clock: no other clocksource to measure the TSC against (" << offered
              << "): nothing to check\n";
    return 0;
  }
  TscSample a0, a1, m0, m1;
  if (!Window(300'000'000, a0, a1)) {
    std::cout << "sprout-firstboot clock: could not read the TSC between two clock readings: nothing checked\n";
    return 0;
  }
  if (!Use(reference)) {
    std::cerr << "sprout-firstboot clock: could not make " << reference << " the clocksource to measure the TSC\n";
    return Use("tsc") ? 0 : 1;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const bool measured = Window(1'000'000'000, m0, m1);
  const TscVerdict v = measured ? JudgeTsc(a0, a1, m0, m1, reference) : TscVerdict{};
  if (measured && v.wrong) {
    std::cout << "sprout-firstboot clock: " << v.why << "; " << reference
              << " is the clock now (the TSC's rate was taken wrong at boot, as a busy host can make an "
                 "emulated one)\n";
    return 0;
  }
  if (!Use("tsc")) {
    std::cerr << "sprout-firstboot clock: could not make the TSC the clocksource again; " << Current()
              << " stays the clock\n";
    return 1;
  }
  std::cout << "sprout-firstboot clock: " << (measured ? v.why : "the TSC could not be measured")
            << "; the TSC stays the clock\n";
  return 0;
}

}  // namespace sprout::firstboot
