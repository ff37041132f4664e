#include "formation/sim.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>

using namespace sprout::formation;

namespace {

// Schedules per cluster size: SPROUT_SIM_SCHEDULES overrides the default, e.g. to run
// more in a nightly job or fewer under a sanitizer.
int ScheduleCount() {
  if (const char* env = std::getenv("SPROUT_SIM_SCHEDULES")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  return 10000;
}

// SeedFor spreads the schedules of each size over their own seed range.
std::uint64_t SeedFor(int nodes, int i) {
  return (static_cast<std::uint64_t>(nodes) << 32) + static_cast<std::uint64_t>(i);
}

std::string ReplayHint(const SimResult& r) {
  return "replay: SPROUT_SIM_NODES=" + std::to_string(r.nodes) + " SPROUT_SIM_SEED=" + std::to_string(r.seed) +
         " (and SPROUT_SIM_EXPECTED, _EXPECTED_ALT, _ELECTORATE, _LISTED as in the schedule line)" +
         " sprout-unit-tests '[formation-replay]'";
}

int EnvInt(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : 0;
}

std::string Label(const SimOptions& o) {
  std::string s = std::to_string(o.nodes) + " control-plane nodes";
  if (o.expected > 0) s += ", N=" + std::to_string(o.expected);
  if (o.expected_alt > 0) s += " (every second node N=" + std::to_string(o.expected_alt) + ")";
  if (o.electorate > 0) s += ", M=" + std::to_string(o.electorate);
  if (o.listed > 0) s += ", static list of " + std::to_string(o.listed);
  return s;
}

// RunMany runs `count` schedules of one configuration (seeds from its own range) and
// requires safety, convergence and a founding in every one.
void RunMany(SimOptions base, int count, std::uint64_t seed_space) {
  int founded = 0, violations = 0, converged = 0, failed_schedules = 0;
  std::uint64_t events = 0, crashes = 0, partitions = 0, worst_converge = 0;
  std::map<std::size_t, int> sizes;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < count; ++i) {
    SimOptions o = base;
    o.seed = (seed_space << 32) + static_cast<std::uint64_t>(i);
    SimResult r = RunSchedule(o);
    events += r.events;
    crashes += r.crashes;
    partitions += r.partitions;
    if (r.founded) ++founded;
    if (r.converged) {
      ++converged;
      worst_converge = std::max(worst_converge, r.converge_ms);
    }
    if (r.founded) ++sizes[r.founding_size];
    violations += static_cast<int>(r.violations.size());
    if (!r.violations.empty() && ++failed_schedules <= 5) {
      // Say everything needed to reproduce: the seed alone replays the schedule.
      FAIL_CHECK("seed " << r.seed << " (" << r.schedule << "): " << r.violations.front() << "\n  " << ReplayHint(r));
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "formation sim, " << Label(base) << ": schedules run " << count << ", clusters founded " << founded
            << ", founders per schedule at most 1: " << (violations == 0 ? "yes" : "NO") << ", violations "
            << violations << ", converged " << converged << ", slowest convergence " << worst_converge
            << " ms after the network settled, crashes " << crashes << ", partitions " << partitions << ", events "
            << events << ", " << secs << " s\n  founding set sizes:";
  for (auto [size, n] : sizes) std::cout << " " << size << "x" << n;
  std::cout << "\n";
  CHECK(violations == 0);
  CHECK(converged == count);
  CHECK(founded == count);
}

void RunMany(int nodes) { RunMany(SimOptions{.nodes = nodes}, ScheduleCount(), static_cast<std::uint64_t>(nodes)); }

// Spare-node configurations run a quarter of the schedules each: they add cases, not
// new code paths per schedule.
int SpareCount() { return std::max(1, ScheduleCount() / 4); }

}  // namespace

TEST_CASE("simulation: 3 control-plane nodes never found twice and always converge", "[formation][sim]") { RunMany(3); }

TEST_CASE("simulation: 5 control-plane nodes never found twice and always converge", "[formation][sim]") { RunMany(5); }

TEST_CASE("simulation: 7 control-plane nodes never found twice and always converge", "[formation][sim]") { RunMany(7); }

TEST_CASE("simulation: spare nodes: 5 powered on, N=3, M=5 (the default Shoot) found once", "[formation][sim]") {
  RunMany(SimOptions{.nodes = 5, .expected = 3, .electorate = 5}, SpareCount(), 105);
}

TEST_CASE("simulation: spare nodes: 7 powered on, N=3, M=7 found once", "[formation][sim]") {
  RunMany(SimOptions{.nodes = 7, .expected = 3, .electorate = 7}, SpareCount(), 107);
}

TEST_CASE("simulation: misconfigured N: 5 nodes told N=3 or N=5, M=5, found once", "[formation][sim]") {
  RunMany(SimOptions{.nodes = 5, .expected = 3, .expected_alt = 5, .electorate = 5}, SpareCount(), 205);
}

TEST_CASE("simulation: misconfigured N: 5 nodes told N=1 or N=3, M=5, found once", "[formation][sim]") {
  RunMany(SimOptions{.nodes = 5, .expected = 1, .expected_alt = 3, .electorate = 5}, SpareCount(), 206);
}

TEST_CASE("simulation: a static list of 3 with 2 spare nodes powered on: the spares join, one founding",
          "[formation][sim]") {
  RunMany(SimOptions{.nodes = 5, .expected = 3, .listed = 3}, SpareCount(), 305);
}

TEST_CASE("simulation: without the bound M, spare nodes found two clusters (the hole the bound closes)",
          "[formation][sim]") {
  // Negative control: 5 nodes that only know N=3 (M unset) can split into two
  // "majorities of 3" across a partition. If the checker did not see that, the spare
  // node runs above would prove nothing.
  std::optional<SimResult> caught;
  int tried = 0;
  for (int i = 0; i < 20000 && !caught; ++i, ++tried) {
    SimResult r =
        RunSchedule(SimOptions{.nodes = 5, .seed = (405ull << 32) + static_cast<std::uint64_t>(i), .expected = 3});
    for (const auto& v : r.violations)
      if (v.find("two foundings chosen") != std::string::npos || v.find("two founders") != std::string::npos)
        caught = r;
  }
  REQUIRE(caught);
  std::cout << "formation sim, spare nodes without the bound M: first double founding at seed " << caught->seed
            << " after " << tried << " schedules (" << caught->schedule << "): " << caught->violations.front() << "\n";
}

TEST_CASE("simulation: a seed replays its schedule exactly", "[formation][sim]") {
  for (std::uint64_t seed : {std::uint64_t{1}, std::uint64_t{77}, SeedFor(5, 1234)}) {
    SimResult a = RunSchedule(SimOptions{.nodes = 5, .seed = seed, .trace = true});
    SimResult b = RunSchedule(SimOptions{.nodes = 5, .seed = seed, .trace = true});
    CHECK(a.digest == b.digest);
    CHECK(a.trace == b.trace);
    CHECK(a.events == b.events);
    CHECK_FALSE(a.trace.empty());
  }
  CHECK(RunSchedule(SimOptions{.nodes = 5, .seed = 1}).digest != RunSchedule(SimOptions{.nodes = 5, .seed = 2}).digest);
}

TEST_CASE("simulation: the checker catches nodes that forget their vote on restart", "[formation][sim]") {
  // Fault injection: restarting from empty state breaks the protocol's persistence
  // rule. If the checker could not see the resulting double founding, the clean runs
  // above would prove nothing.
  std::optional<SimResult> caught;
  int tried = 0;
  for (int i = 0; i < 20000 && !caught; ++i, ++tried) {
    SimResult r = RunSchedule(SimOptions{.nodes = 3, .seed = SeedFor(3, i), .forget_on_restart = true});
    for (const auto& v : r.violations)
      if (v.find("two foundings chosen") != std::string::npos || v.find("two founders") != std::string::npos)
        caught = r;
  }
  REQUIRE(caught);
  std::cout << "formation sim, amnesia fault injection: first double founding at seed " << caught->seed << " after "
            << tried << " schedules: " << caught->violations.front() << "\n";
  // And that failing seed replays to the very same violation.
  SimResult again = RunSchedule(SimOptions{.nodes = 3, .seed = caught->seed, .forget_on_restart = true});
  CHECK(again.violations == caught->violations);
  CHECK(again.digest == caught->digest);
}

TEST_CASE("simulation: replay one seed with a full trace", "[formation-replay][.]") {
  // Hidden unless asked for: SPROUT_SIM_SEED=<seed> SPROUT_SIM_NODES=<n> sprout-unit-tests '[formation-replay]'
  const char* seed = std::getenv("SPROUT_SIM_SEED");
  const char* nodes = std::getenv("SPROUT_SIM_NODES");
  REQUIRE(seed);
  SimOptions o{.nodes = nodes ? std::atoi(nodes) : 3, .seed = std::strtoull(seed, nullptr, 0), .trace = true};
  o.forget_on_restart = std::getenv("SPROUT_SIM_FORGET") != nullptr;
  o.expected = EnvInt("SPROUT_SIM_EXPECTED");
  o.expected_alt = EnvInt("SPROUT_SIM_EXPECTED_ALT");
  o.electorate = EnvInt("SPROUT_SIM_ELECTORATE");
  o.listed = EnvInt("SPROUT_SIM_LISTED");
  SimResult r = RunSchedule(o);
  std::cout << r.schedule << "\n" << r.trace;
  for (const auto& v : r.violations) std::cout << "violation: " << v << "\n";
  CHECK(r.violations.empty());
}
