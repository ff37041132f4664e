// libFuzzer target for the join endpoint's request parser (it reads bytes from anyone
// who completed the PSK handshake) and, for good measure, the response parser a
// joiner runs on what a member sent, and a worker's check of the CA in it (a rogue
// holder of the worker secret chooses those bytes). None may crash, leak or read out of
// bounds. Seeds: fuzz/corpus/join_request_fuzz/.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "formation/join.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto request = sprout::formation::ParseJoinRequest(text);
  if (request) {
    // An accepted request renders and parses back to the same request.
    auto again = sprout::formation::ParseJoinRequest(sprout::formation::RenderJoinRequest(*request));
    if (!again || again->name != request->name || again->address != request->address) __builtin_trap();
  }
  auto response = sprout::formation::ParseJoinResponse(text);
  const sprout::formation::WorkerCaTrust pinned{
      "sha256:7e858bf6c6e83eaf78d3cc3967d2e34b5d1608e99687acd70f16c5948e9fd40b", "fuzz", "", ""};
  if (response) {
    auto verdict = sprout::formation::CheckWorkerCa(pinned, "198.18.0.11:7777", response->ca_bundle);
    if (verdict.keep != verdict.refusal.empty()) __builtin_trap();  // kept, or refused with a reason
  }
  // The CA check on the raw bytes too, as if they were the bundle.
  auto verdict = sprout::formation::CheckWorkerCa({}, "198.18.0.11:7777", std::string(text));
  if (verdict.keep != !verdict.offered.empty()) __builtin_trap();  // kept exactly when it is one certificate
  return 0;
}
