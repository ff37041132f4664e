#include "backup/schedule.h"

#include <catch2/catch.hpp>
#include <new>
#include <stdexcept>

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
