#include "util/links.h"

#include <catch2/catch.hpp>

using namespace sprout;

TEST_CASE("util: LinkWithAddress finds the loopback link by 127.0.0.1, and no link for an address none holds",
          "[util]") {
  CHECK(LinkWithAddress("127.0.0.1") == "lo");
  CHECK_FALSE(LinkWithAddress("198.19.255.254"));
  CHECK_FALSE(LinkWithAddress("not an address"));
}
