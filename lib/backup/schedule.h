// Who takes a scheduled snapshot, and when (docs/backup.md, "Who takes the scheduled
// snapshot"). Pure: the edge asks etcd who leads and lists the sink, then asks Decide.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "util/result.h"

namespace sprout::backup {

// ScheduleInput is what one control-plane node knows at one moment.
struct ScheduleInput {
  std::int64_t now = 0;           // Unix seconds
  std::int64_t interval = 0;      // seconds between scheduled snapshots; 0: off
  bool etcd_answered = false;     // this node's etcd answered its status request
  bool leader = false;            // and said this node's member leads
  bool slot_written = false;      // the sink holds the bundle of the current slot
  std::int64_t failed_slot = -1;  // the slot of this node's last failed attempt, -1: none
  std::int64_t failed_at = 0;     // when it failed
  std::int64_t retry_after = 30;  // seconds between attempts at one slot
};

// ScheduleDecision says whether to take the current slot's snapshot now, and why not.
struct ScheduleDecision {
  bool take = false;
  std::int64_t slot = 0;  // the slot's start, Unix seconds (its bundle's name time)
  std::string why;        // why not, for the status line and the journal
};

// SlotOf is the start of the slot now falls in: now rounded down to the interval.
std::int64_t SlotOf(std::int64_t now, std::int64_t interval);

// Decide takes the snapshot of the current slot when, and only when, this node is the
// etcd leader, the slot has no bundle yet and no attempt at it failed in the last
// retry_after seconds. Another node's belief that it leads is settled at the sink:
// the slot's name can be created once (link(2) fails on an existing name).
ScheduleDecision Decide(const ScheduleInput& in);

// Guarded runs one attempt of the scheduler and turns anything it throws (an
// std::exception, std::bad_alloc, or anything else) into an error that names it: a
// throw out of the scheduler's thread would end the whole node (std::terminate), so the
// scheduler logs the error instead and goes on at the next slot.
Status Guarded(const std::function<Status()>& attempt);

}  // namespace sprout::backup
