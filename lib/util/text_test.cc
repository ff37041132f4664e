#include "util/text.h"

#include <catch2/catch.hpp>

namespace sprout {
namespace {

TEST_CASE("text: WithoutTimings makes retries of one problem compare equal") {
  const std::string a = "POST https://198.18.0.11:6443/x failed: Failed to connect to 198.18.0.11 port 6443 after 9 ms";
  const std::string b =
      "POST https://198.18.0.11:6443/x failed: Failed to connect to 198.18.0.11 port 6443 after 1348 ms";
  CHECK(WithoutTimings(a) == WithoutTimings(b));
  CHECK(WithoutTimings(a) ==
        "POST https://198.18.0.11:6443/x failed: Failed to connect to 198.18.0.11 port 6443 after N ms");
  // Other numbers (addresses, ports, HTTP codes, other units) are kept, so different
  // problems stay different.
  CHECK(WithoutTimings("answered HTTP 503") != WithoutTimings("answered HTTP 500"));
  CHECK(WithoutTimings("took 5 s") == "took 5 s");
  CHECK(WithoutTimings("12 msgs") == "12 msgs");  // " ms" must be a word: "msgs" starts with it
  CHECK(WithoutTimings("") == "");
  CHECK(WithoutTimings("7 ms") == "N ms");
}

}  // namespace
}  // namespace sprout
