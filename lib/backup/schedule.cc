#include "backup/schedule.h"

#include <exception>
#include <new>

namespace sprout::backup {

std::int64_t SlotOf(std::int64_t now, std::int64_t interval) {
  if (interval <= 0) return now;
  std::int64_t r = now % interval;
  if (r < 0) r += interval;
  return now - r;
}

ScheduleDecision Decide(const ScheduleInput& in) {
  ScheduleDecision d;
  d.slot = SlotOf(in.now, in.interval);
  if (in.interval <= 0) {
    d.why = "scheduled backups are off";
  } else if (!in.etcd_answered) {
    d.why = "this node's etcd did not answer";
  } else if (!in.leader) {
    d.why = "not the etcd leader (the leader takes scheduled snapshots)";
  } else if (in.slot_written) {
    d.why = "the bundle of this slot exists";
  } else if (in.failed_slot == d.slot && in.now - in.failed_at < in.retry_after) {
    d.why = "the last attempt failed; retrying in " + std::to_string(in.retry_after - (in.now - in.failed_at)) + " s";
  } else {
    d.take = true;
  }
  return d;
}

Status Guarded(const std::function<Status()>& attempt) {
  try {
    return attempt();
  } catch (const std::bad_alloc&) {
    return Fail("the attempt ran out of memory (std::bad_alloc)");
  } catch (const std::exception& e) {
    return Fail(std::string("the attempt threw: ") + e.what());
  } catch (...) {
    return Fail("the attempt threw something that is not an std::exception");
  }
}

Scheduler::Scheduler(SchedulerEdge& edge, std::int64_t interval) : edge_(edge) { in_.interval = interval; }

void Scheduler::Round() {
  std::int64_t slot = -1;
  auto round = Guarded([&]() -> Status {
    in_.now = edge_.Now();
    slot = SlotOf(in_.now, in_.interval);
    const EtcdView etcd = edge_.AskEtcd();
    in_.etcd_answered = etcd.answered;
    in_.leader = etcd.leader;
    // The sink is asked only by the leader, once per slot (Take looks for the slot's
    // bundle before it takes a snapshot): on an NFS share each question is a connection.
    in_.slot_written = slot == done_slot_;
    const auto d = Decide(in_);
    if (!d.take) return Ok{};
    if (auto taken = edge_.Take(d.slot); !taken) {
      in_.failed_slot = d.slot;
      in_.failed_at = edge_.Now();
      return Ok{};  // an error the edge logged: retried after retry_after
    }
    done_slot_ = d.slot;
    return Ok{};
  });
  if (round) return;
  // A throw before the clock was read gives up nothing: the next round reads it again.
  if (slot >= 0) done_slot_ = slot;
  Guarded([&]() -> Status {
    edge_.RoundFailed(round.error());
    return Ok{};
  }).ok();
}

}  // namespace sprout::backup
