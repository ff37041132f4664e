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

// EtcdView is what one question to this node's etcd showed.
struct EtcdView {
  bool answered = false;  // it answered its status request
  bool leader = false;    // and said this node's member leads
};

// SchedulerEdge is what the scheduler's rounds reach outside pure code: the clock, this
// node's etcd and the backup itself (firstboot/backup.cc; fakes in tests).
class SchedulerEdge {
 public:
  virtual ~SchedulerEdge() = default;
  // Now is Unix seconds.
  virtual std::int64_t Now() = 0;
  // AskEtcd asks this node's etcd whether it leads.
  virtual EtcdView AskEtcd() = 0;
  // Take takes the scheduled backup of slot: Ok once its bundle is in the sink (written,
  // or another node's that authenticates as the slot's), an error to retry. It logs and
  // records its own outcome.
  virtual Status Take(std::int64_t slot) = 0;
  // RoundFailed logs and records a round that threw (Guarded's message).
  virtual void RoundFailed(const std::string& why) = 0;
};

// Scheduler is the scheduler thread's state between rounds: which slot is done, and
// the last failed attempt (Decide's inputs).
class Scheduler {
 public:
  Scheduler(SchedulerEdge& edge, std::int64_t interval);
  // Round asks etcd, decides (Decide) and, if it is this node's turn, takes the slot's
  // backup. It never throws: a round that throws (anything, in the edge or here) is
  // given to RoundFailed, and its slot is given up, so the next round waits for the next
  // slot rather than throwing at the same place every two seconds.
  void Round();
  // Done is the last slot whose bundle is known to be in the sink, or that was given up.
  std::int64_t Done() const { return done_slot_; }

 private:
  SchedulerEdge& edge_;
  ScheduleInput in_;
  std::int64_t done_slot_ = -1;
};

}  // namespace sprout::backup
