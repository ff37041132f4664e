#include "formationd/etcd_supervisor.h"

#include <system_error>
#include <utility>

namespace sprout::formation {

EtcdStartNote NoteForStart(const std::optional<StartEtcdNew>& founding, const std::string& initial_cluster) {
  if (!founding) return {"starting etcd to join the cluster: " + initial_cluster, {{"PHASE", "learner"}}};
  std::string members;
  for (const auto& m : founding->founding.members) members += (members.empty() ? "" : ",") + m.name;
  return {"starting etcd as founding member of " + founding->token + " (members " + members + ", founder " +
              founding->founding.founder + ")",
          {{"PHASE", "member"}, {"CLUSTER_TOKEN", founding->token}, {"INITIAL_CLUSTER", founding->initial_cluster}}};
}

EtcdSupervisor::EtcdSupervisor(std::unique_ptr<EtcdLauncher> launcher, std::filesystem::path data_dir,
                               std::string log_file)
    : launcher_(std::move(launcher)), data_dir_(std::move(data_dir)), log_file_(std::move(log_file)) {}

void EtcdSupervisor::Start(const EtcdArgs& args, EtcdStartNote note) {
  args_ = args;
  note_ = std::move(note);
  StartNow();
}

void EtcdSupervisor::StartNow() {
  if (args_.name.empty() || launcher_->Running()) return;
  std::error_code ec;
  // etcd's data holds every secret of the cluster: only root may read it (etcd warns
  // about anything wider, and a hostPath volume would make it 0755).
  std::filesystem::create_directories(data_dir_, ec);
  std::filesystem::permissions(data_dir_, std::filesystem::perms::owner_all, ec);
  if (auto s = launcher_->Start(args_); !s) {
    Journal(LOG_ERR, s.error(), {{"PHASE", "member"}});
    return;
  }
  started_ = true;
  auto fields = note_.fields;
  fields.emplace_back("ETCD", launcher_->Describe());
  Journal(LOG_INFO, note_.message, fields);
}

void EtcdSupervisor::Supervise(std::uint64_t now) {
  if (started_ && !launcher_->Running()) {
    started_ = false;
    Journal(LOG_WARNING, "etcd exited; see " + log_file_, {{"PHASE", "member"}});
    restart_at_ = now + 2000;
  }
  if (!args_.name.empty() && !started_ && now >= restart_at_) StartNow();
}

int EtcdSupervisor::pid() const {
  if (const auto* child = dynamic_cast<const ChildEtcdLauncher*>(launcher_.get())) return child->pid();
  return -1;
}

}  // namespace sprout::formation
