#include "formationd/etcd_supervisor.h"

#include <catch2/catch.hpp>
#include <memory>

#include "util/fs.h"

namespace f = sprout::formation;

namespace {

// Etcd is what a FakeLauncher was asked to do, and whether "etcd" runs.
struct Etcd {
  bool running = false;
  bool fail = false;  // Start fails
  int starts = 0;     // Start calls, failed ones included
  f::EtcdArgs last;   // the args of the last start
};

class FakeLauncher : public f::EtcdLauncher {
 public:
  explicit FakeLauncher(std::shared_ptr<Etcd> etcd) : etcd_(std::move(etcd)) {}
  sprout::Status Start(const f::EtcdArgs& args) override {
    ++etcd_->starts;
    if (etcd_->fail) return sprout::Fail("cannot start etcd");
    etcd_->last = args;
    etcd_->running = true;
    return sprout::Ok{};
  }
  bool Running() override { return etcd_->running; }
  void Stop() override { etcd_->running = false; }
  std::string Describe() const override { return "fake"; }

 private:
  std::shared_ptr<Etcd> etcd_;
};

f::EtcdArgs ArgsOf(const std::string& name) {
  f::EtcdArgs a;
  a.name = name;
  a.initial_cluster = name + "=https://198.18.0.11:2380";
  return a;
}

}  // namespace

TEST_CASE("etcd supervisor: nothing starts before the args are decided", "[formation]") {
  sprout::TempDir dir(std::filesystem::temp_directory_path(), "supervisor-test");
  auto etcd = std::make_shared<Etcd>();
  f::EtcdSupervisor supervisor(std::make_unique<FakeLauncher>(etcd), dir.path() / "var" / "etcd", "etcd.log");
  supervisor.Supervise(10000);
  CHECK(etcd->starts == 0);
  CHECK_FALSE(supervisor.decided());
  CHECK_FALSE(supervisor.started());
  CHECK(supervisor.pid() == -1);  // not a child process
}

TEST_CASE("etcd supervisor: etcd that exited is started again after 2 s", "[formation]") {
  sprout::TempDir dir(std::filesystem::temp_directory_path(), "supervisor-test");
  auto etcd = std::make_shared<Etcd>();
  f::EtcdSupervisor supervisor(std::make_unique<FakeLauncher>(etcd), dir.path() / "var" / "etcd", "etcd.log");
  supervisor.Start(ArgsOf("node1"), f::NoteForStart(std::nullopt, "node1=https://198.18.0.11:2380"));
  CHECK(etcd->starts == 1);
  CHECK(etcd->last == ArgsOf("node1"));
  CHECK(supervisor.started());
  CHECK(std::filesystem::is_directory(dir.path() / "var"));  // the data dir's parent
  // etcd's data is for root alone, even where a hostPath volume would make it 0755
  CHECK(std::filesystem::status(dir.path() / "var" / "etcd").permissions() == std::filesystem::perms::owner_all);
  supervisor.Supervise(500);
  CHECK(etcd->starts == 1);  // still running: nothing to do
  etcd->running = false;
  supervisor.Supervise(1000);
  CHECK_FALSE(supervisor.started());
  supervisor.Supervise(2999);
  CHECK(etcd->starts == 1);
  supervisor.Supervise(3000);
  CHECK(etcd->starts == 2);
  CHECK(supervisor.started());
  supervisor.Stop();
  CHECK_FALSE(etcd->running);
}

TEST_CASE("etcd supervisor: a failed start is tried again at the next look", "[formation]") {
  sprout::TempDir dir(std::filesystem::temp_directory_path(), "supervisor-test");
  auto etcd = std::make_shared<Etcd>();
  etcd->fail = true;
  f::EtcdSupervisor supervisor(std::make_unique<FakeLauncher>(etcd), dir.path() / "etcd", "etcd.log");
  supervisor.Start(ArgsOf("node1"), {});
  CHECK_FALSE(supervisor.started());
  CHECK(supervisor.decided());
  supervisor.Supervise(50);
  CHECK(etcd->starts == 2);
  etcd->fail = false;
  supervisor.Supervise(100);
  CHECK(supervisor.started());
  CHECK(etcd->starts == 3);
}

TEST_CASE("etcd supervisor: the start line says founding member or learner", "[formation]") {
  f::Founding founding{"b", 3, "sprout-x", {{"a", "https://198.18.0.11:2380"}, {"b", "https://198.18.0.12:2380"}}};
  f::StartEtcdNew start{founding.InitialCluster(), founding.token, founding};
  auto member = f::NoteForStart(start, start.initial_cluster);
  CHECK(member.message == "starting etcd as founding member of sprout-x (members a,b, founder b)");
  CHECK(member.fields == std::vector<f::Field>{{"PHASE", "member"},
                                               {"CLUSTER_TOKEN", "sprout-x"},
                                               {"INITIAL_CLUSTER", founding.InitialCluster()}});
  auto learner = f::NoteForStart(std::nullopt, "a=https://198.18.0.11:2380,c=https://198.18.0.13:2380");
  CHECK(learner.message == "starting etcd to join the cluster: a=https://198.18.0.11:2380,c=https://198.18.0.13:2380");
  CHECK(learner.fields == std::vector<f::Field>{{"PHASE", "learner"}});
}
