// `sprout-firstboot clock`: checks, early in a VM's boot, that the TSC the kernel made its
// clock runs at the rate the kernel took for it, and makes another clocksource the clock
// when it does not (util/tsc.h; docs/design.md, "The clock in emulation").
#pragma once

namespace sprout::firstboot {

// ClockMain runs `clock` (argv[0] is "clock"): prints one line of what it found and did;
// 0 unless a clocksource could not be set.
int ClockMain(int argc, char** argv);

}  // namespace sprout::firstboot
