// libFuzzer target for the join endpoint's request parser (it reads bytes from anyone
// who completed the PSK handshake) and, for good measure, the response parser a
// joiner runs on what a member sent. Neither may crash, leak or read out of bounds.
// Seeds: fuzz/corpus/join_request_fuzz/.
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
  (void)sprout::formation::ParseJoinResponse(text);
  return 0;
}
