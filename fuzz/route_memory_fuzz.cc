// libFuzzer target for ParseRouteMemory: pod-routes.json, the node agent's memory of the
// address each Node was first seen with (lib/kube/node_list.h). It is read at every
// start from the state folder; a damaged file must be refused with a reason, never
// crash the agent, and accepted memory renders and parses back to the same memory.
// Each accepted memory is also fed to PeerRoutes with a small NodeList that names some
// of its entries. Seeds: fuzz/corpus/route_memory_fuzz/.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kube/node_list.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto memory = sprout::kube::ParseRouteMemory(text);
  if (!memory) return 0;
  if (memory->first_seen.size() > sprout::kube::kMaxRememberedNodes) __builtin_trap();
  auto again = sprout::kube::ParseRouteMemory(sprout::kube::RenderRouteMemory(*memory));
  if (!again || !(*again == *memory)) __builtin_trap();
  std::vector<sprout::kube::NodeView> nodes = {{"node-1", "10.244.0.0/24", "198.18.0.11"}};
  int i = 1;
  for (const auto& [name, ip] : memory->first_seen) {
    nodes.push_back({name, "10.244." + std::to_string(i) + ".0/24", i % 2 == 0 ? ip : "198.18.0.12"});
    if (++i > 8) break;
  }
  auto plan = sprout::kube::PeerRoutes("node-1", nodes, {"10.244.0.0/16", "198.18.0.0/24", "10.96.0.0/12"},
                                       {{"node-2", "198.18.0.12"}}, *memory);
  // Memory only grows, and never past its bound.
  if (plan.memory.first_seen.size() < memory->first_seen.size() ||
      plan.memory.first_seen.size() > sprout::kube::kMaxRememberedNodes) {
    __builtin_trap();
  }
  return 0;
}
