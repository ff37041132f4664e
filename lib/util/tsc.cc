#include "util/tsc.h"

#include <cmath>
#include <cstdio>

namespace sprout {

namespace {

// Mhz: TSC ticks per microsecond between two samples; 0 when they cannot be used.
double Mhz(const TscSample& from, const TscSample& to) {
  constexpr std::int64_t kMinimumNs = 100'000'000;
  if (to.raw_ns - from.raw_ns < kMinimumNs || to.tsc <= from.tsc) return 0;
  return static_cast<double>(to.tsc - from.tsc) * 1000.0 / static_cast<double>(to.raw_ns - from.raw_ns);
}

}  // namespace

TscVerdict JudgeTsc(const TscSample& a0, const TscSample& a1, const TscSample& m0, const TscSample& m1,
                    const std::string& reference, double tolerance) {
  TscVerdict v;
  v.assumed_mhz = Mhz(a0, a1);
  v.measured_mhz = Mhz(m0, m1);
  if (v.assumed_mhz <= 0 || v.measured_mhz <= 0) {
    v.why = "the samples cannot be judged (each pair must be 100 ms or more apart, the TSC counting up)";
    return v;
  }
  // The kernel turns TSC ticks into time at the rate it assumed; at the real rate a real
  // second holds measured_mhz ticks, which it counts as measured/assumed seconds.
  v.clock_speed = v.measured_mhz / v.assumed_mhz;
  v.wrong = std::fabs(v.clock_speed - 1.0) > tolerance;
  char line[320];
  std::snprintf(line, sizeof line,
                "the kernel counts the TSC at %.3f MHz, %s measures it at %.3f MHz: the clock %s %.2f times %s",
                v.assumed_mhz, reference.c_str(), v.measured_mhz, v.wrong ? "runs" : "runs within the tolerance,",
                v.clock_speed, v.clock_speed >= 1.0 ? "as fast as real time" : "real time's speed");
  v.why = line;
  return v;
}

}  // namespace sprout
