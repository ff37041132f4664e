// Reading a PKCS#10 certificate signing request, as a CSR approver must before it signs
// off on one (lib/kube/csr_approval.h): its subject, the names it asks for, and a hash of
// its public key that identifies the key across requests. Pure apart from OpenSSL's
// parser; a fuzzing entry point (fuzz/csr_fuzz.cc).
#pragma once

#include <string>
#include <vector>

#include "util/result.h"

namespace sprout::pki {

struct CsrInfo {
  std::string common_name;                 // the subject's CN (the last one, if several)
  std::vector<std::string> organizations;  // the subject's O values, in order
  int common_names = 0;                    // how many CN entries the subject has
  std::vector<std::string> dns_names;      // subjectAltName DNS entries
  std::vector<std::string> ips;            // subjectAltName IP entries, as inet_ntop prints them
  int other_names = 0;                     // subjectAltName entries of any other kind (email, URI, ...)
  std::string key_sha256;                  // "sha256:HEX" of the DER SubjectPublicKeyInfo
  bool signature_ok = false;               // the request is signed by its own key
};

// ParseCsr reads a PEM "CERTIFICATE REQUEST". Anything that does not parse is an error
// with OpenSSL's reason; a request whose self-signature does not verify parses, with
// signature_ok false.
Result<CsrInfo> ParseCsr(const std::string& pem);

}  // namespace sprout::pki
