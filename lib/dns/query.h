// A DNS question on the wire and the header of its answer (pure), for the controller's
// health check of its server: it asks for dns-version.DOMAIN TXT.
#pragma once

#include <cstdint>
#include <string>

#include "util/result.h"

namespace sprout::dns {

// QueryPacket is a standard query (RD clear) for name of type qtype (16 is TXT) in
// class IN with id; "" when name is not a valid DNS name.
std::string QueryPacket(std::uint16_t id, const std::string& name, std::uint16_t qtype);

// AnswerHeader is what the health check reads of an answer.
struct AnswerHeader {
  int rcode = 0;    // 0 NOERROR, 2 SERVFAIL, 3 NXDOMAIN, 5 REFUSED
  int answers = 0;  // ANCOUNT
  bool authoritative = false;
};

// ParseAnswerHeader reads an answer to query id; an error says why it is not one
// (too short, another id, not a response, truncated).
Result<AnswerHeader> ParseAnswerHeader(const std::string& packet, std::uint16_t id);

}  // namespace sprout::dns
