#include "kube/renewal.h"

#include <algorithm>

namespace sprout::kube {

std::vector<std::string> RestartsFor(const std::vector<std::string>& issued) {
  static const std::map<std::string, std::string> kReaders = {
      {"controller-manager.conf", "kube-controller-manager"},
      {"scheduler.conf", "kube-scheduler"},
      {"kubelet.conf", "kubelet"},
  };
  std::vector<std::string> out;
  for (const auto& path : issued) {
    auto it = kReaders.find(path);
    if (it != kReaders.end() && std::find(out.begin(), out.end(), it->second) == out.end()) out.push_back(it->second);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::int64_t NextCheckIn(const std::vector<std::int64_t>& renew_at, std::int64_t now) {
  constexpr std::int64_t kMin = 5, kMax = 3600;
  if (renew_at.empty()) return kMax;
  const std::int64_t earliest = *std::min_element(renew_at.begin(), renew_at.end());
  return std::clamp<std::int64_t>(earliest - now, kMin, kMax);
}

}  // namespace sprout::kube
