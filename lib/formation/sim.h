// Deterministic simulation of formation: N Node state machines on a seeded, hostile
// network (loss, duplication, reordering, delay, partitions that heal, crashes with
// restarts from the persisted state), with safety and liveness checked in every run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sprout::formation {

// SimOptions chooses one schedule: everything else is derived from the seed.
struct SimOptions {
  int nodes = 3;                   // control-plane nodes powered on
  std::uint64_t seed = 1;          // the whole schedule follows from this
  bool trace = false;              // record a readable trace of every event
  bool forget_on_restart = false;  // fault injection for the checker's own test: restart
                                   // nodes with empty state, which must be caught
  int expected = 0;                // N each node is given; 0 means `nodes`
  int expected_alt = 0;            // if set, every second node is given this N instead (a
                                   // misconfigured site)
  int electorate = 0;              // M each node is given (the Shoot's maximum); 0 means N
  int listed = 0;                  // if set, nodes 1..listed form a static voter list that
                                   // every node is given; the rest are spares
};

// SimResult is what one schedule did and what the checker found.
struct SimResult {
  std::uint64_t seed = 0;               // the schedule's seed
  int nodes = 0;                        // control-plane nodes simulated
  bool founded = false;                 // some nodes started etcd with a founding
  std::size_t foundings = 0;            // distinct foundings started (safety: at most 1)
  std::size_t founding_size = 0;        // members in the founding set
  bool converged = false;               // every node of the connected majority knows the cluster
  std::uint64_t converge_ms = 0;        // from the network settling to convergence
  std::vector<std::string> violations;  // empty when safety and liveness held
  std::uint64_t events = 0;             // events processed
  std::uint64_t delivered = 0;          // messages delivered
  std::uint64_t crashes = 0;            // node crashes injected
  std::uint64_t partitions = 0;         // partitions injected
  std::uint64_t digest = 0;             // hash of the whole event sequence, for replay checks
  std::string schedule;                 // one line describing the drawn schedule
  std::string trace;                    // filled when SimOptions::trace is set
};

// RunSchedule runs one seeded schedule to convergence or its deadline.
SimResult RunSchedule(const SimOptions& options);

}  // namespace sprout::formation
