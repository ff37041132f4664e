// libFuzzer target for what sprout's CSR approver reads from the API (lib/kube/csr_approval.h):
// a CertificateSigningRequestList whose requests any bootstrap-token holder writes, the
// PKCS#10 request inside each, and the identity record. None may crash, throw, leak or read
// out of bounds, and a decision on anything parsed must be made without either.
// Seeds: fuzz/corpus/csr_fuzz/.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kube/csr_approval.h"
#include "pki/csr.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)sprout::pki::ParseCsr(text);
  sprout::kube::ApprovalFacts facts;
  facts.nodes = {"node-1", "node-4"};
  facts.control_plane = {"node-1"};
  facts.known = {{"node-1", "198.18.0.11"}};
  facts.node_network = "198.18.0.0/24";
  if (auto record = sprout::kube::ParseIdentityRecord(text)) {
    facts.record = *record;
    (void)sprout::kube::IdentityRecordBody(*record);
  }
  if (auto list = sprout::kube::ParseCsrList(text)) {
    for (const auto& csr : *list) {
      auto d = sprout::kube::DecideCsr(csr, facts);
      if (d.kind != sprout::kube::CsrDecision::kLeave) (void)sprout::kube::ApprovalBody(csr.json, true, d.reason);
    }
  }
  return 0;
}
