#include "backup/schedule.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

using namespace sprout::backup;

namespace {

ScheduleInput Leader(std::int64_t now) {
  ScheduleInput in;
  in.now = now;
  in.interval = 60;
  in.etcd_answered = true;
  in.leader = true;
  return in;
}

}  // namespace

TEST_CASE("a slot starts at a multiple of the interval", "[backup]") {
  CHECK(SlotOf(1000, 60) == 960);
  CHECK(SlotOf(960, 60) == 960);
  CHECK(SlotOf(1019, 60) == 960);
  CHECK(SlotOf(1020, 60) == 1020);
}

TEST_CASE("only the etcd leader takes a scheduled snapshot, once per slot", "[backup]") {
  struct Row {
    const char* what;
    ScheduleInput in;
    bool take;
    const char* why;
  };
  ScheduleInput off = Leader(1000);
  off.interval = 0;
  ScheduleInput silent = Leader(1000);
  silent.etcd_answered = false;
  ScheduleInput follower = Leader(1000);
  follower.leader = false;
  ScheduleInput written = Leader(1000);
  written.slot_written = true;
  ScheduleInput failed = Leader(1000);
  failed.failed_slot = 960;
  failed.failed_at = 990;
  ScheduleInput failed_long_ago = failed;
  failed_long_ago.failed_at = 965;
  ScheduleInput failed_last_slot = Leader(1030);
  failed_last_slot.failed_slot = 960;
  failed_last_slot.failed_at = 1015;
  const Row rows[] = {
      {"the leader, slot open", Leader(1000), true, ""},
      {"schedule off", off, false, "scheduled backups are off"},
      {"etcd silent", silent, false, "this node's etcd did not answer"},
      {"a follower", follower, false, "not the etcd leader (the leader takes scheduled snapshots)"},
      {"slot written", written, false, "the bundle of this slot exists"},
      {"failed 10 s ago", failed, false, "the last attempt failed; retrying in 20 s"},
      {"failed 35 s ago", failed_long_ago, true, ""},
      {"failed in the slot before", failed_last_slot, true, ""},
  };
  for (const auto& row : rows) {
    INFO(row.what);
    auto d = Decide(row.in);
    CHECK(d.take == row.take);
    CHECK(d.why == row.why);
  }
  CHECK(Decide(Leader(1000)).slot == 960);
}

TEST_CASE("of three members, one leader and two followers, exactly one takes the slot", "[backup]") {
  int takers = 0;
  for (int member = 0; member < 3; ++member) {
    ScheduleInput in = Leader(5000);
    in.leader = member == 1;
    if (Decide(in).take) ++takers;
  }
  CHECK(takers == 1);
}

TEST_CASE("a scheduler round that throws becomes an error that names it, whatever it throws", "[backup]") {
  CHECK(Guarded([] { return sprout::Status(sprout::Ok{}); }).ok());
  CHECK(Guarded([]() -> sprout::Status { return sprout::Fail("the share is away"); }).error() == "the share is away");
  CHECK_THAT(Guarded([]() -> sprout::Status { throw std::bad_alloc(); }).error(),
             Catch::Contains("ran out of memory (std::bad_alloc)"));
  CHECK_THAT(Guarded([]() -> sprout::Status { throw std::out_of_range("basic_string::substr"); }).error(),
             Catch::Contains("the attempt threw: basic_string::substr"));
  CHECK_THAT(Guarded([]() -> sprout::Status { throw 42; }).error(), Catch::Contains("not an std::exception"));
}

namespace {

// FakeNode is a leader whose clock the test moves, and whose backups throw at the
// slots the test names.
class FakeNode : public SchedulerEdge {
 public:
  std::int64_t now = 6000;
  std::vector<std::int64_t> taken;    // slots Take was called for, in order
  std::vector<std::string> failures;  // RoundFailed's messages
  std::int64_t throw_at = -1;         // Take throws std::runtime_error at this slot
  std::int64_t bad_alloc_at = -1;     // and std::bad_alloc at this one
  bool etcd_throws = false;           // AskEtcd throws (a library's exception)

  std::int64_t Now() override { return now; }
  EtcdView AskEtcd() override {
    if (etcd_throws) throw std::invalid_argument("json: unexpected end of input");
    return {true, true};
  }
  sprout::Status Take(std::int64_t slot) override {
    taken.push_back(slot);
    if (slot == throw_at) throw std::out_of_range("basic_string::substr: __pos (which is 9) > this->size()");
    if (slot == bad_alloc_at) throw std::bad_alloc();
    return sprout::Ok{};
  }
  void RoundFailed(const std::string& why) override { failures.push_back(why); }
};

}  // namespace

TEST_CASE("a scheduled take that throws is logged and the scheduler takes the next slot", "[backup]") {
  // The attack: a share's writer makes a file that makes the take throw (before issue
  // 54, a sparse bundle claiming 8 GiB threw std::bad_alloc in the scheduler's thread,
  // which ended the node). Rounds run every 2 s over four 60 s slots; the takes of the
  // first two slots throw.
  FakeNode node;
  node.now = 6000;  // slot 6000
  node.throw_at = 6000;
  node.bad_alloc_at = 6060;
  Scheduler s(node, 60);
  for (int i = 0; i < 120; ++i) {
    REQUIRE_NOTHROW(s.Round());
    node.now += 2;
  }
  // Each slot taken once: a slot whose take threw is given up, not retried every round.
  CHECK(node.taken == std::vector<std::int64_t>{6000, 6060, 6120, 6180});
  REQUIRE(node.failures.size() == 2);
  CHECK_THAT(node.failures[0], Catch::Contains("the attempt threw: basic_string::substr"));
  CHECK_THAT(node.failures[1], Catch::Contains("ran out of memory (std::bad_alloc)"));
  CHECK(s.Done() == 6180);

  // Anything else in a round may throw too (the edge's etcd question): the round ends,
  // the scheduler does not.
  node.etcd_throws = true;
  node.now = 6240;
  REQUIRE_NOTHROW(s.Round());
  CHECK(node.failures.size() == 3);
  node.etcd_throws = false;
  node.now = 6300;
  s.Round();
  CHECK(node.taken.back() == 6300);
  std::printf("scheduler: 122 rounds over 6 slots, %zu takes, %zu rounds that threw, all survived\n", node.taken.size(),
              node.failures.size());
}
