#include "dns/query.h"

#include "dns/records.h"

namespace sprout::dns {

std::string QueryPacket(std::uint16_t id, const std::string& name, std::uint16_t qtype) {
  if (!ValidName(name)) return "";
  std::string p;
  auto u16 = [&p](std::uint16_t v) {
    p += static_cast<char>(v >> 8);
    p += static_cast<char>(v & 0xff);
  };
  u16(id);
  u16(0);  // flags: a standard query, no recursion wanted
  u16(1);  // QDCOUNT
  u16(0);
  u16(0);
  u16(0);
  std::string n = name;
  if (n.ends_with('.')) n.pop_back();
  std::size_t start = 0;
  while (start <= n.size()) {
    std::size_t dot = n.find('.', start);
    if (dot == std::string::npos) dot = n.size();
    p += static_cast<char>(dot - start);
    p += n.substr(start, dot - start);
    start = dot + 1;
  }
  p += '\0';
  u16(qtype);
  u16(1);  // class IN
  return p;
}

Result<AnswerHeader> ParseAnswerHeader(const std::string& packet, std::uint16_t id) {
  if (packet.size() < 12)
    return Fail("the answer is " + std::to_string(packet.size()) + " bytes, shorter than a header");
  auto u16 = [&packet](std::size_t at) {
    return static_cast<std::uint16_t>((static_cast<unsigned char>(packet[at]) << 8) |
                                      static_cast<unsigned char>(packet[at + 1]));
  };
  if (u16(0) != id) return Fail("the answer is for another query (id " + std::to_string(u16(0)) + ")");
  const std::uint16_t flags = u16(2);
  if ((flags & 0x8000) == 0) return Fail("the packet is a query, not an answer");
  if ((flags & 0x0200) != 0) return Fail("the answer is truncated");
  AnswerHeader h;
  h.rcode = flags & 0x000f;
  h.authoritative = (flags & 0x0400) != 0;
  h.answers = u16(6);
  return h;
}

}  // namespace sprout::dns
