// The TSC's rate: the one the kernel took at boot against the one another clock measures.
// In software emulation the kernel calibrates the TSC in a few milliseconds against the
// emulated PIT; a busy host that deschedules the guest then makes it take a rate several
// times too low, and a clock that runs that many times too fast (docs/design.md, "The
// clock in emulation"). JudgeTsc decides from two pairs of samples; the caller takes them.
#pragma once

#include <cstdint>
#include <string>

namespace sprout {

// TscSample: the TSC and CLOCK_MONOTONIC_RAW read back to back.
struct TscSample {
  std::uint64_t tsc = 0;
  std::int64_t raw_ns = 0;
};

struct TscVerdict {
  double assumed_mhz = 0;   // the rate the kernel's clock counts the TSC at
  double measured_mhz = 0;  // the rate the reference clock sees
  double clock_speed = 1;   // how many seconds the kernel's clock counted for each real one
  bool wrong = false;       // off by more than the tolerance
  std::string why;          // one line for the journal
};

// JudgeTsc: a0 and a1 are samples taken while the TSC is the clocksource (so their raw
// time is the kernel's reading of the TSC), m0 and m1 while `reference` is (its raw time
// is that clock's). Each pair must be at least 100 ms apart and in order; otherwise the
// verdict is "not wrong" with why saying the samples could not be judged.
TscVerdict JudgeTsc(const TscSample& a0, const TscSample& a1, const TscSample& m0, const TscSample& m1,
                    const std::string& reference, double tolerance = 0.02);

}  // namespace sprout
