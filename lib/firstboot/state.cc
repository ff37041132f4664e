#include "firstboot/state.h"

#include <nlohmann/json.hpp>

#include "util/fs.h"

namespace sprout {

Result<NodeState> LoadNodeState(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::path file = dir / "state.json";
  if (!std::filesystem::exists(file, ec)) return NodeState{};
  auto text = ReadFile(file);
  if (!text) return Fail(text.error());
  try {
    auto j = nlohmann::json::parse(*text);
    NodeState s;
    s.phase = j.value("phase", s.phase);
    s.boots = j.value("boots", 0);
    return s;
  } catch (const std::exception& e) {
    return Fail(file.string() + " is not valid state JSON (" + e.what() + "); move it away to start the node afresh");
  }
}

Status SaveNodeState(const std::filesystem::path& dir, const NodeState& state) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Fail("cannot create " + dir.string() + ": " + ec.message());
  nlohmann::json j{{"phase", state.phase}, {"boots", state.boots}};
  return WriteFileAtomic(dir / "state.json", j.dump(2) + "\n", std::filesystem::perms(0600));
}

}  // namespace sprout
