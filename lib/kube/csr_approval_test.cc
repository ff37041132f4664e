#include "kube/csr_approval.h"

#include <arpa/inet.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <catch2/catch.hpp>
#include <memory>
#include <nlohmann/json.hpp>

#include "pki/csr.h"
#include "util/text.h"

namespace sprout::kube {
namespace {

struct Key {
  EVP_PKEY* p = EVP_EC_gen("P-256");
  Key() = default;
  Key(const Key&) = delete;
  Key& operator=(const Key&) = delete;
  ~Key() { EVP_PKEY_free(p); }
};

// Csr makes a PEM request for cn/o with SANs "DNS:x" / "IP:x" / "email:x", signed by key
// (or, with forge, by another key than the one it carries).
std::string Csr(const Key& key, const std::string& cn, const std::vector<std::string>& o,
                const std::vector<std::string>& sans = {}, bool forge = false) {
  X509_REQ* req = X509_REQ_new();
  X509_NAME* name = X509_REQ_get_subject_name(req);
  for (const auto& org : o) {
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(org.c_str()), -1, -1,
                               0);
  }
  if (!cn.empty()) {
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                               0);
  }
  X509_REQ_set_pubkey(req, key.p);
  if (!sans.empty()) {
    STACK_OF(X509_EXTENSION)* exts = sk_X509_EXTENSION_new_null();
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, nullptr, NID_subject_alt_name, Join(sans, ",").c_str());
    sk_X509_EXTENSION_push(exts, ext);
    X509_REQ_add_extensions(req, exts);
    sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
  }
  Key other;
  X509_REQ_sign(req, forge ? other.p : key.p, EVP_sha256());
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509_REQ(bio, req);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<std::size_t>(n));
  BIO_free(bio);
  X509_REQ_free(req);
  return out;
}

// Item is one CertificateSigningRequest as the API lists it.
nlohmann::json Item(const std::string& name, const std::string& signer, const std::string& username,
                    const std::vector<std::string>& groups, const std::vector<std::string>& usages,
                    const std::string& pem) {
  return {{"apiVersion", "certificates.k8s.io/v1"},
          {"kind", "CertificateSigningRequest"},
          {"metadata", {{"name", name}, {"resourceVersion", "7"}}},
          {"spec",
           {{"signerName", signer},
            {"username", username},
            {"groups", groups},
            {"usages", usages},
            {"request", Base64Encode(pem)}}}};
}

CsrView One(const nlohmann::json& item) {
  nlohmann::json list = {{"kind", "CertificateSigningRequestList"}, {"items", {item}}};
  auto v = ParseCsrList(list.dump());
  REQUIRE(v.ok());
  REQUIRE(v->size() == 1);
  return (*v)[0];
}

const std::vector<std::string> kBootGroups = {"system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token",
                                              "system:authenticated"};
const std::vector<std::string> kClientUsages = {"digital signature", "key encipherment", "client auth"};

CsrView Bootstrap(const Key& key, const std::string& node) {
  return One(Item("csr-1", kClientKubeletSigner, "system:bootstrap:abcdef", kBootGroups, kClientUsages,
                  Csr(key, "system:node:" + node, {"system:nodes"})));
}

ApprovalFacts Facts() {
  ApprovalFacts f;
  f.nodes = {"node-1", "node-2", "node-3", "old-worker"};
  f.control_plane = {"node-1", "node-2", "node-3"};
  f.known = {{"node-1", "198.18.0.11"}, {"node-2", "198.18.0.12"}, {"node-3", "198.18.0.13"}};
  f.node_network = "198.18.0.0/24";
  return f;
}

TEST_CASE("csr: a request's subject, names and key hash are read; a forged signature is seen") {
  Key key;
  auto info = pki::ParseCsr(Csr(key, "system:node:w1", {"system:nodes"}, {"DNS:w1", "IP:198.18.0.21", "email:a@b"}));
  REQUIRE(info.ok());
  CHECK(info->common_name == "system:node:w1");
  CHECK(info->common_names == 1);
  CHECK(info->organizations == std::vector<std::string>{"system:nodes"});
  CHECK(info->dns_names == std::vector<std::string>{"w1"});
  CHECK(info->ips == std::vector<std::string>{"198.18.0.21"});
  CHECK(info->other_names == 1);
  CHECK(info->signature_ok);
  CHECK(info->key_sha256.rfind("sha256:", 0) == 0);
  CHECK(info->key_sha256.size() == 71);
  // The same key gives the same hash; another key another.
  CHECK(pki::ParseCsr(Csr(key, "x", {}))->key_sha256 == info->key_sha256);
  Key other;
  CHECK(pki::ParseCsr(Csr(other, "x", {}))->key_sha256 != info->key_sha256);
  CHECK_FALSE(pki::ParseCsr(Csr(key, "x", {}, {}, true))->signature_ok);
  CHECK_FALSE(pki::ParseCsr("-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n").ok());
  CHECK_FALSE(pki::ParseCsr("").ok());
}

TEST_CASE("csr: a bootstrap request for a new name is approved and recorded; its name is then its key's alone") {
  Key key;
  auto f = Facts();
  auto d = DecideCsr(Bootstrap(key, "worker-1"), f);
  REQUIRE(d.kind == CsrDecision::kApprove);
  REQUIRE(d.record.has_value());
  CHECK(d.record->first == "worker-1");
  CHECK(d.record->second == Bootstrap(key, "worker-1").key_sha256);
  f.record.key_of[d.record->first] = d.record->second;
  f.nodes.insert("worker-1");
  // The same key again (the kubelet retried, or its certificate ran out while it was off).
  auto again = DecideCsr(Bootstrap(key, "worker-1"), f);
  CHECK(again.kind == CsrDecision::kApprove);
  CHECK_FALSE(again.record.has_value());
  // Any other key: refused, whatever the token.
  Key thief;
  auto stolen = DecideCsr(Bootstrap(thief, "worker-1"), f);
  CHECK(stolen.kind == CsrDecision::kDeny);
  CHECK_THAT(stolen.reason, Catch::Contains("first approved for another key"));
}

TEST_CASE("csr: a worker-secret holder gets no certificate for a control-plane node or an existing Node") {
  Key key;
  auto f = Facts();
  for (const char* name : {"node-1", "node-2", "node-3"}) {
    INFO(name);
    auto d = DecideCsr(Bootstrap(key, name), f);
    CHECK(d.kind == CsrDecision::kDeny);
    CHECK_THAT(d.reason, Catch::Contains("control-plane node's name"));
  }
  // A control-plane node whose Node is not registered yet is still refused.
  f.nodes.erase("node-3");
  CHECK(DecideCsr(Bootstrap(key, "node-3"), f).kind == CsrDecision::kDeny);
  auto old = DecideCsr(Bootstrap(key, "old-worker"), f);
  CHECK(old.kind == CsrDecision::kDeny);
  CHECK_THAT(old.reason, Catch::Contains("a Node of that name exists"));
  f.nodes.erase("old-worker");  // an operator deleted it: the name is free
  CHECK(DecideCsr(Bootstrap(key, "old-worker"), f).kind == CsrDecision::kApprove);
}

TEST_CASE("csr: a bootstrap request is refused unless it is exactly a node client request") {
  Key key;
  auto f = Facts();
  const auto refused = [&](const nlohmann::json& item, const std::string& why) {
    INFO(item.dump());
    auto d = DecideCsr(One(item), f);
    CHECK(d.kind == CsrDecision::kDeny);
    CHECK_THAT(d.reason, Catch::Contains(why));
    CHECK_FALSE(d.record.has_value());
  };
  const std::string user = "system:bootstrap:abcdef";
  refused(
      Item("a", kClientKubeletSigner, user, kBootGroups, kClientUsages, Csr(key, "system:node:w", {"system:masters"})),
      "O is not system:nodes");
  refused(Item("b", kClientKubeletSigner, user, kBootGroups, kClientUsages,
               Csr(key, "system:node:w", {"system:nodes", "system:masters"})),
          "O is not system:nodes");
  refused(Item("c", kClientKubeletSigner, user, kBootGroups, kClientUsages, Csr(key, "admin", {"system:nodes"})),
          "CN system:node:NAME");
  refused(
      Item("d", kClientKubeletSigner, user, kBootGroups, kClientUsages, Csr(key, "system:node:W_1", {"system:nodes"})),
      "not a node name");
  refused(Item("e", kClientKubeletSigner, user, kBootGroups, {"client auth", "server auth"},
               Csr(key, "system:node:w", {"system:nodes"})),
          "usage 'server auth'");
  refused(Item("f", kClientKubeletSigner, user, kBootGroups, kClientUsages,
               Csr(key, "system:node:w", {"system:nodes"}, {"DNS:w"})),
          "names no hosts");
  refused(Item("g", kClientKubeletSigner, user, kBootGroups, kClientUsages,
               Csr(key, "system:node:w", {"system:nodes"}, {}, true)),
          "not signed by its own key");
  auto bad = Item("h", kClientKubeletSigner, user, kBootGroups, kClientUsages, "");
  bad["spec"]["request"] = "!!";
  refused(bad, "cannot be read");
}

TEST_CASE("csr: what is not sprout's to decide is left alone") {
  Key key;
  auto f = Facts();
  // A node renewing its own client certificate: the controller-manager's approver.
  CHECK(DecideCsr(One(Item("r", kClientKubeletSigner, "system:node:node-2", {"system:nodes", "system:authenticated"},
                           kClientUsages, Csr(key, "system:node:node-2", {"system:nodes"}))),
                  f)
            .kind == CsrDecision::kLeave);
  // A user's own request, another signer, one decided already.
  CHECK(DecideCsr(One(Item("u", kClientKubeletSigner, "alice", {"system:authenticated"}, kClientUsages,
                           Csr(key, "system:node:w", {"system:nodes"}))),
                  f)
            .kind == CsrDecision::kLeave);
  CHECK(DecideCsr(One(Item("s", "example.com/other", "system:bootstrap:abcdef", kBootGroups, kClientUsages,
                           Csr(key, "system:node:w", {"system:nodes"}))),
                  f)
            .kind == CsrDecision::kLeave);
  auto decided = Item("d", kClientKubeletSigner, "system:bootstrap:abcdef", kBootGroups, kClientUsages,
                      Csr(key, "system:node:w", {"system:nodes"}));
  decided["status"]["conditions"] = {{{"type", "Denied"}, {"status", "True"}}};
  CHECK(DecideCsr(One(decided), f).kind == CsrDecision::kLeave);
}

TEST_CASE("csr: a kubelet serving certificate only for the node itself, its name and its addresses") {
  Key key;
  auto f = Facts();
  const std::vector<std::string> groups = {"system:nodes", "system:authenticated"};
  const std::vector<std::string> usages = {"digital signature", "key encipherment", "server auth"};
  const auto serving = [&](const std::string& user, const std::string& cn, const std::vector<std::string>& sans) {
    return DecideCsr(One(Item("s", kKubeletServingSigner, user, groups, usages, Csr(key, cn, {"system:nodes"}, sans))),
                     f);
  };
  CHECK(serving("system:node:w1", "system:node:w1", {"DNS:w1", "IP:198.18.0.21"}).kind == CsrDecision::kApprove);
  CHECK(serving("system:node:node-2", "system:node:node-2", {"DNS:node-2", "IP:198.18.0.12"}).kind ==
        CsrDecision::kApprove);
  // Another node's name, address or identity; an address outside the node network.
  CHECK(serving("system:node:w1", "system:node:node-2", {"DNS:node-2", "IP:198.18.0.12"}).kind == CsrDecision::kDeny);
  CHECK(serving("system:node:w1", "system:node:w1", {"DNS:node-2", "IP:198.18.0.21"}).kind == CsrDecision::kDeny);
  auto outside = serving("system:node:w1", "system:node:w1", {"DNS:w1", "IP:10.0.0.1"});
  CHECK(outside.kind == CsrDecision::kDeny);
  CHECK_THAT(outside.reason, Catch::Contains("outside networking.nodes"));
  auto moved = serving("system:node:node-2", "system:node:node-2", {"DNS:node-2", "IP:198.18.0.21"});
  CHECK(moved.kind == CsrDecision::kDeny);
  CHECK_THAT(moved.reason, Catch::Contains("formation's record gives node node-2 the address 198.18.0.12"));
  CHECK(serving("system:node:node-2", "system:node:node-2", {"IP:198.18.0.12", "IP:198.18.0.21"}).kind ==
        CsrDecision::kDeny);
  CHECK(serving("system:node:w1", "system:node:w1", {"DNS:w1"}).kind == CsrDecision::kDeny);
  CHECK(serving("system:node:w1", "system:node:w1", {"DNS:w1", "IP:198.18.0.21", "URI:spiffe://x"}).kind ==
        CsrDecision::kDeny);
  // A bootstrap token may not ask for a serving certificate.
  CHECK(DecideCsr(One(Item("b", kKubeletServingSigner, "system:bootstrap:abcdef", kBootGroups, usages,
                           Csr(key, "system:node:w1", {"system:nodes"}, {"DNS:w1", "IP:198.18.0.21"}))),
                  f)
            .kind == CsrDecision::kDeny);
}

TEST_CASE("csr: after a restore a worker name not heard from since is open to a new key, once") {
  Key old_key;
  Key fresh;
  auto f = Facts();
  f.record.exists = true;
  f.record.key_of["old-worker"] = Bootstrap(old_key, "old-worker").key_sha256;
  f.record.bound_at["old-worker"] = 1'000;
  f.lease_renewed = {{"old-worker", 1'500}, {"node-2", 1'990}};
  // No restore: the name is its first key's.
  CHECK(DecideCsr(Bootstrap(fresh, "old-worker"), f).kind == CsrDecision::kDeny);
  // Restored at 2,000 from a backup; the worker's lease was last renewed at 1,500 (its
  // disk was lost with the rest): a fresh worker takes its name back.
  f.record.restored_at = 2'000;
  auto d = DecideCsr(Bootstrap(fresh, "old-worker"), f);
  REQUIRE(d.kind == CsrDecision::kApprove);
  CHECK_THAT(d.reason, Catch::Contains("bound before the restore"));
  REQUIRE(d.record.has_value());
  CHECK(d.record->second == Bootstrap(fresh, "old-worker").key_sha256);
  // A worker that came back after the restore (its lease renewed since) keeps its name.
  f.lease_renewed["old-worker"] = 2'010;
  CHECK(DecideCsr(Bootstrap(fresh, "old-worker"), f).kind == CsrDecision::kDeny);
  // Once bound again after the restore, the name is the new key's alone.
  f.lease_renewed["old-worker"] = 1'500;
  f.record.key_of["old-worker"] = d.record->second;
  f.record.bound_at["old-worker"] = 2'050;
  Key third;
  CHECK(DecideCsr(Bootstrap(third, "old-worker"), f).kind == CsrDecision::kDeny);
  CHECK(DecideCsr(Bootstrap(fresh, "old-worker"), f).kind == CsrDecision::kApprove);
  // A control-plane node's name never opens, restore or not.
  CHECK(DecideCsr(Bootstrap(third, "node-3"), f).kind == CsrDecision::kDeny);
  // A Node from before the record (no entry) that is silent since the restore opens too.
  f.nodes.insert("legacy");
  CHECK(DecideCsr(Bootstrap(third, "legacy"), f).kind == CsrDecision::kApprove);
  f.lease_renewed["legacy"] = 2'100;
  CHECK(DecideCsr(Bootstrap(third, "legacy"), f).kind == CsrDecision::kDeny);
}

TEST_CASE("csr: lease renewals are read in Unix seconds; a bad time is left out") {
  auto r = ParseLeaseRenewals(
      R"({"kind":"LeaseList","items":[{"metadata":{"name":"w1"},"spec":{"renewTime":"2026-12-04T19:05:03.123456Z"}},)"
      R"({"metadata":{"name":"w2"},"spec":{"renewTime":"2026-12-04T19:05:03Z"}},)"
      R"({"metadata":{"name":"w3"},"spec":{"renewTime":"yesterday"}},{"metadata":{"name":"w4"},"spec":{}},5]})");
  REQUIRE(r.ok());
  CHECK(r->size() == 2);
  CHECK((*r)["w1"] == 1'796'411'103);
  CHECK((*r)["w2"] == 1'796'411'103);
  CHECK_FALSE(ParseLeaseRenewals(R"({"kind":"Status","message":"no"})").ok());
}

TEST_CASE("csr: the identity record and the approval are read and written as the API expects") {
  auto r = ParseIdentityRecord(
      R"({"kind":"ConfigMap","metadata":{"name":"sprout-node-identities","resourceVersion":"42"},)"
      R"("data":{"w1":"sha256:0000000000000000000000000000000000000000000000000000000000000000","w2":"junk","w3":5}})");
  REQUIRE(r.ok());
  CHECK(r->exists);
  CHECK(r->resource_version == "42");
  CHECK(r->key_of.size() == 2);
  CHECK(r->key_of["w2"] == "unreadable:junk");  // still binds its name, matches no key
  CHECK(r->bound_at["w1"] == 0);
  CHECK(r->restored_at == 0);
  r->bound_at["w1"] = 1'234;
  r->restored_at = 99;
  auto body = nlohmann::json::parse(IdentityRecordBody(*r));
  CHECK(body["metadata"]["resourceVersion"] == "42");
  CHECK(body["metadata"]["annotations"]["sprout.dev/restored-at"] == "99");
  CHECK(body["data"]["w1"] == "sha256:0000000000000000000000000000000000000000000000000000000000000000@1234");
  auto again = ParseIdentityRecord(
      R"({"kind":"ConfigMap","metadata":{"annotations":{"sprout.dev/restored-at":"99"}},)"
      R"("data":{"w1":"sha256:0000000000000000000000000000000000000000000000000000000000000000@1234"}})");
  REQUIRE(again.ok());
  CHECK(again->restored_at == 99);
  CHECK(again->bound_at["w1"] == 1'234);
  CHECK(again->key_of["w1"] == r->key_of["w1"]);
  CHECK(body["metadata"]["namespace"] == "kube-system");
  CHECK(body["data"]["w1"].get<std::string>().rfind("sha256:", 0) == 0);
  CHECK_FALSE(ParseIdentityRecord(R"({"kind":"Status","code":404})").ok());
  CHECK_FALSE(ParseIdentityRecord("[").ok());
  Key key;
  auto item = Item("csr-9", kClientKubeletSigner, "system:bootstrap:abcdef", kBootGroups, kClientUsages,
                   Csr(key, "system:node:w", {"system:nodes"}));
  auto approved = ApprovalBody(item.dump(), true, "ok");
  REQUIRE(approved.ok());
  auto j = nlohmann::json::parse(*approved);
  CHECK(j["metadata"]["resourceVersion"] == "7");
  CHECK(j["status"]["conditions"][0]["type"] == "Approved");
  CHECK(j["status"]["conditions"][0]["status"] == "True");
  auto denied = nlohmann::json::parse(ApprovalBody(item.dump(), false, "no").value());
  CHECK(denied["status"]["conditions"][0]["type"] == "Denied");
  CHECK(One(denied).decided);
}

TEST_CASE("csr: a list of the wrong shape is read without throwing") {
  CHECK_FALSE(ParseCsrList("nope").ok());
  CHECK_FALSE(ParseCsrList(R"({"kind":"Status","message":"forbidden"})").ok());
  auto v = ParseCsrList(R"({"kind":"CertificateSigningRequestList","items":[1,{"spec":5},{"spec":{"request":7,)"
                        R"("groups":"x","usages":[1]},"status":{"conditions":"x"},"metadata":[]}]})");
  REQUIRE(v.ok());
  REQUIRE(v->size() == 2);
  CHECK_FALSE((*v)[0].request_problem.empty());
  CHECK_FALSE((*v)[1].request_problem.empty());
  for (const auto& c : *v) CHECK(DecideCsr(c, Facts()).kind == CsrDecision::kLeave);
}

}  // namespace
}  // namespace sprout::kube
