#include "util/tsc.h"

#include <catch2/catch.hpp>

using namespace sprout;

TEST_CASE("a TSC the kernel calibrated too low makes its clock run fast, and is found", "[tsc]") {
  // The host's TSC runs at 2,594 MHz; node-2 of a cluster run took 412.386 MHz at boot
  // (its kernel log: "PIT calibration deviates from HPET: 412386 2594231").
  const double real = 2594.0, assumed = 412.386;
  // On the TSC: one real second is `real` million ticks, which the kernel counts as
  // real/assumed seconds of raw time.
  TscSample a0{1'000'000'000, 5'000'000'000};
  TscSample a1{a0.tsc + static_cast<std::uint64_t>(real * 1e6),
               a0.raw_ns + static_cast<std::int64_t>(real / assumed * 1e9)};
  TscSample m0{a1.tsc + 1'000'000, 0};
  m0.raw_ns = 9'000'000'000;
  TscSample m1{m0.tsc + static_cast<std::uint64_t>(real * 1e6), m0.raw_ns + 1'000'000'000};
  auto v = JudgeTsc(a0, a1, m0, m1, "hpet");
  CHECK(v.wrong);
  CHECK(v.assumed_mhz == Approx(assumed).epsilon(1e-6));
  CHECK(v.measured_mhz == Approx(real).epsilon(1e-6));
  CHECK(v.clock_speed == Approx(6.29).epsilon(0.01));
  CHECK(v.why.find("412.386 MHz, hpet measures it at 2594.000 MHz: the clock runs 6.29 times as fast") !=
        std::string::npos);
}

TEST_CASE("a TSC within the tolerance is left as the clock", "[tsc]") {
  TscSample a0{0, 0}, a1{2'594'000'000, 1'000'000'000};  // 2,594 MHz as the kernel counts it
  TscSample m0{3'000'000'000, 2'000'000'000}, m1{m0.tsc + 2'600'000'000ULL, 3'000'000'000};  // 2,600 MHz
  auto v = JudgeTsc(a0, a1, m0, m1, "kvm-clock");
  CHECK_FALSE(v.wrong);
  CHECK(v.clock_speed == Approx(1.0023).epsilon(1e-3));
  // 3 % off is past the default 2 % and within a tolerance of 5 %.
  TscSample slow1{m0.tsc + 2'672'000'000ULL, 3'000'000'000};
  CHECK(JudgeTsc(a0, a1, m0, slow1, "hpet").wrong);
  CHECK_FALSE(JudgeTsc(a0, a1, m0, slow1, "hpet", 0.05).wrong);
}

TEST_CASE("a clock that runs slow is found too", "[tsc]") {
  TscSample a0{0, 0}, a1{3'000'000'000, 1'000'000'000};                                   // the kernel took 3,000 MHz
  TscSample m0{4'000'000'000, 2'000'000'000}, m1{m0.tsc + 2'000'000'000, 3'000'000'000};  // it runs at 2,000
  auto v = JudgeTsc(a0, a1, m0, m1, "acpi_pm");
  CHECK(v.wrong);
  CHECK(v.clock_speed == Approx(2.0 / 3.0));
  CHECK(v.why.find("times real time's speed") != std::string::npos);
}

TEST_CASE("samples too close, out of order or with a TSC standing still are not judged", "[tsc]") {
  TscSample a0{0, 0}, a1{2'594'000'000, 1'000'000'000};
  TscSample m0{3'000'000'000, 2'000'000'000};
  for (const TscSample& bad : {TscSample{m0.tsc + 100, m0.raw_ns + 50'000'000},  // 50 ms apart
                               TscSample{m0.tsc + 1'000'000, m0.raw_ns - 1},     // time went back
                               TscSample{m0.tsc, m0.raw_ns + 1'000'000'000}}) {  // the TSC stood still
    auto v = JudgeTsc(a0, a1, m0, bad, "hpet");
    CHECK_FALSE(v.wrong);
    CHECK(v.why.find("cannot be judged") != std::string::npos);
  }
  CHECK_FALSE(JudgeTsc(a1, a0, m0, TscSample{m0.tsc + 2'594'000'000ULL, 3'000'000'000}, "hpet").wrong);
}
