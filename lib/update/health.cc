#include "update/health.h"

#include <nlohmann/json.hpp>

#include "util/json_field.h"
#include "util/text.h"

namespace sprout::update {

using nlohmann::json;

Result<std::vector<PodReadiness>> ParsePodList(const std::string& text) {
  auto j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Fail("the PodList is not a JSON object");
  if (JsonString(j, "kind").value_or("") != "PodList") {
    auto message = JsonString(j, "message");
    return Fail("expected a PodList, got " + JsonString(j, "kind").value_or("no kind") +
                (message ? ": " + *message : ""));
  }
  std::vector<PodReadiness> out;
  if (!j.contains("items") || !j["items"].is_array()) return out;
  for (const auto& item : j["items"]) {
    if (!item.is_object()) continue;
    PodReadiness p;
    if (item.contains("metadata")) p.name = JsonString(item["metadata"], "name").value_or("");
    if (item.contains("spec")) p.node = JsonString(item["spec"], "nodeName").value_or("");
    if (item.contains("status") && item["status"].is_object() && item["status"].contains("conditions") &&
        item["status"]["conditions"].is_array()) {
      for (const auto& c : item["status"]["conditions"]) {
        if (JsonString(c, "type").value_or("") == "Ready") p.ready = JsonString(c, "status").value_or("") == "True";
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::string KubeHealthProblem(const std::string& node, const std::vector<std::string>& static_pods,
                              const KubeView& view) {
  if (view.readyz_status != 200 || Trim(view.readyz_body) != "ok") {
    return "this node's kube-apiserver is not ready (/readyz: " +
           (view.readyz_status == 0 ? view.readyz_body : "HTTP " + std::to_string(view.readyz_status)) + ")";
  }
  if (!view.node_listed) return "the Node " + node + " is not registered yet";
  if (!view.node_ready) return "the Node " + node + " is not Ready (its kubelet)";
  for (const auto& pod : static_pods) {
    const std::string mirror = pod + "-" + node;
    bool found = false;
    bool ready = false;
    for (const auto& p : view.pods) {
      if (p.name == mirror && p.node == node) {
        found = true;
        ready = p.ready;
      }
    }
    if (!found) return "the static pod " + mirror + " has no mirror pod yet";
    if (!ready) return "the static pod " + mirror + " is not Ready";
  }
  return "";
}

}  // namespace sprout::update
