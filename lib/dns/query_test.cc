#include "dns/query.h"

#include <catch2/catch.hpp>

using namespace sprout;
using namespace sprout::dns;

TEST_CASE("dns: a query on the wire and the header of its answer", "[dns]") {
  const std::string q = QueryPacket(0x1234, "dns-version.cluster.local.", 16);
  REQUIRE(q.size() == 12 + 27 + 4);
  CHECK(q.substr(0, 2) == std::string("\x12\x34", 2));
  CHECK(q.substr(12, 13) == std::string("\x0b"
                                        "dns-version\x07",
                                        13));
  CHECK(QueryPacket(1, "a b", 1).empty());

  // The same bytes turned into an authoritative NOERROR answer with one record.
  std::string a = q;
  a[2] = static_cast<char>(0x84);  // QR, AA
  a[3] = 0;
  a[7] = 1;  // ANCOUNT 1
  auto h = ParseAnswerHeader(a, 0x1234);
  REQUIRE(h);
  CHECK(h->rcode == 0);
  CHECK(h->answers == 1);
  CHECK(h->authoritative);
  a[3] = 3;  // NXDOMAIN
  CHECK(ParseAnswerHeader(a, 0x1234)->rcode == 3);
  CHECK_FALSE(ParseAnswerHeader(a, 0x1235));
  CHECK_FALSE(ParseAnswerHeader(q, 0x1234));  // a query is no answer
  CHECK_FALSE(ParseAnswerHeader("abc", 0x1234));
}
