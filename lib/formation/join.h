// The join endpoint: a TCP service on every control-plane node that has the cluster's
// CA material, speaking TLS 1.3 with an external PSK (no certificates: a joiner has
// none yet): one derived from the cluster secret, which proves a control-plane node,
// and one derived from the worker secret, which proves only a worker. The PSK a client
// used decides what it may get, never its request. A control-plane joiner receives the CAs,
// the service-account key pair and the bootstrap token, and makes its own node
// certificates; a worker receives the Kubernetes CA certificate, the API endpoints and
// the bootstrap token, never a key. The request and response parsers are pure; see
// docs/formation.md for the design and what was rejected.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "formation/auth.h"
#include "pki/pki.h"
#include "util/result.h"

namespace sprout::formation {

// kJoinVersion is the join protocol version a request must carry.
inline constexpr int kJoinVersion = 1;
// kMaxJoinRequest bounds a request line; longer requests are refused unread.
inline constexpr std::size_t kMaxJoinRequest = 4096;

// JoinAuthority is what a join client proved in its TLS handshake, by which external PSK
// it used: the control-plane one (from the cluster secret) or the worker one (from the
// worker secret). The role a joiner gets follows from it, never from the request text.
enum class JoinAuthority { kControlPlane, kWorker };

// JoinAuthorityName is "control-plane" or "worker", for logs and errors.
const char* JoinAuthorityName(JoinAuthority authority);

// kMaxBackupCopy bounds a backup bundle one control-plane node hands another (it is
// held in memory while it is checked and written).
inline constexpr std::uint64_t kMaxBackupCopy = 512ULL << 20;

// BackupCopyAllowanceMs is the time a backup copy of `size` bytes may take on top of a
// join exchange's own, on both sides: the sender waiting for the answer and the
// receiver's deadline. The receiver reads the copy, checks that it opens with the
// cluster's secret and writes it durably before it answers; on a busy control-plane node
// in emulation that took over 5 s for a 2.6 MB bundle (the copies were kept, but the
// sender had stopped waiting: docs/backup.md). 30 s plus 4 s a started MiB.
inline constexpr std::int64_t BackupCopyAllowanceMs(std::uint64_t size) {
  return 30000 + 4000 * static_cast<std::int64_t>((size + (1ULL << 20) - 1) >> 20);
}

// BackupCopyOffer is a control-plane node offering a peer a copy of a backup bundle
// (docs/backup.md, "Copies on the other control-plane nodes"): the bundle's file name
// and its size; the bytes follow the request line.
struct BackupCopyOffer {
  std::string bundle;      // file name, "<cluster>-<time>-<kind>.sprout-backup"
  std::uint64_t size = 0;  // bytes that follow the request line
};

// JoinRequest is what a joiner asks for, or, with copy, a control-plane node's offer of
// a backup copy (name and address then say who sends it).
struct JoinRequest {
  int version = kJoinVersion;  // protocol version
  bool control_plane = true;   // false: worker credentials only
  std::string name;            // the joiner's node name (for the log)
  std::string address;         // the joiner's address (for the log)
  std::optional<BackupCopyOffer> copy;
};

// ValidBundleFileName is the shape a copied bundle's name must have to be written under
// it: 1-200 characters of [A-Za-z0-9._-], not starting with '.', ending in
// ".sprout-backup" (no path, no hidden or temporary name).
bool ValidBundleFileName(std::string_view name);

// BackupCopy is a copy a peer received, for the store that keeps it.
struct BackupCopy {
  std::string from;    // the sending node's name
  std::string bundle;  // file name
  std::string bytes;   // the bundle
};

// BackupCopyStore keeps a received copy; an error is the refusal the sender is told.
using BackupCopyStore = std::function<Status(const BackupCopy& copy)>;

// MayStoreCopy decides whether a copy offer is taken at all: only from a node that
// proved the control-plane key (a worker holds no backup and may fill no disk), and only
// when this node keeps copies. Pure.
Status MayStoreCopy(const JoinRequest& request, JoinAuthority authority, bool keeps_copies);

// Credentials is what a control-plane node serves (and what a control-plane joiner gets).
struct Credentials {
  pki::ClusterCAs cas;                     // all CAs and the service-account key pair
  std::string bootstrap_token;             // kubeadm-style "abcdef.0123456789abcdef"
  std::vector<std::string> api_endpoints;  // "https://198.18.0.11:6443", ...
};

// JoinResponse is the answer: credentials for its role, or an error.
struct JoinResponse {
  bool ok = false;                         // false: error says why
  std::string error;                       // why the request was refused
  bool control_plane = false;              // which role the credentials are for
  std::map<std::string, std::string> ca;   // control plane: the CA layout files (pki::CAFiles)
  std::string ca_bundle;                   // worker: the Kubernetes CA certificate
  std::string bootstrap_token;             // both roles
  std::vector<std::string> api_endpoints;  // both roles
};

// RenderJoinRequest renders request as one JSON line.
std::string RenderJoinRequest(const JoinRequest& request);
// ParseJoinRequest reads a request line; it refuses oversized, malformed or
// out-of-range input with a reason (it is a fuzzing entry point).
Result<JoinRequest> ParseJoinRequest(std::string_view text);
// AnswerJoin decides the response to request from a client that proved authority, from
// what this node serves, at Unix time now. A request for control-plane credentials over
// the worker PSK is refused: the answer carries an error and no credentials at all. A
// control-plane joiner gets the base bootstrap token; a worker gets only the worker
// token of now's window (WorkerToken), which the API server accepts until
// WorkerTokenExpiry of that window.
JoinResponse AnswerJoin(const JoinRequest& request, JoinAuthority authority, const Credentials& served,
                        std::int64_t now);
// RenderJoinResponse and ParseJoinResponse are the response's JSON form.
std::string RenderJoinResponse(const JoinResponse& response);
Result<JoinResponse> ParseJoinResponse(std::string_view text);
// CredentialsFrom turns a control-plane response into Credentials, checking that each
// CA key matches its certificate.
Result<Credentials> CredentialsFrom(const JoinResponse& response);

// WorkerCaTrust is what a worker holds against the Kubernetes CA a join endpoint hands
// it (docs/formation.md, "Workers pin the cluster CA"): a pin given at personalization,
// else the CA it kept on first use.
struct WorkerCaTrust {
  std::string pin;           // pki::SpkiSha256 form; "" none
  std::string pin_source;    // where the pin came from, for messages
  std::string trusted;       // without a pin: the SpkiSha256 of the CA kept before; "" none
  std::string trusted_from;  // the file that CA is kept in, for messages
};

// WorkerCaVerdict is what a worker makes of one endpoint's CA.
struct WorkerCaVerdict {
  bool keep = false;       // the credentials may be saved
  bool first_use = false;  // kept with neither a pin nor an earlier CA: trusted from now on
  std::string offered;     // the offered CA's SpkiSha256; "" when it is not one certificate
  std::string refusal;     // when not kept: the whole log line, with the endpoint and the fix
};

// CheckWorkerCa decides whether a worker keeps the credentials whose CA certificate is
// ca_pem, handed out by endpoint ("198.18.0.11:7777"). With a pin, only a CA whose
// SpkiSha256 is the pin; without one, the CA kept before, or with none kept, any CA (trust
// on first use). ca_pem must be exactly one certificate: a bundle would make the kubelet
// trust whatever follows the pinned CA. Pure.
WorkerCaVerdict CheckWorkerCa(const WorkerCaTrust& trust, const std::string& endpoint, const std::string& ca_pem);

// NoCaPinWarning is what a worker without a pin says at every start: that it trusts the
// first CA a holder of the worker secret hands it (trusted: that CA's hash once kept, from
// trusted_from), and how to pin it.
std::string NoCaPinWarning(const std::string& trusted, const std::string& trusted_from);

// MakeBootstrapToken makes a random token in kubeadm's form [a-z0-9]{6}.[a-z0-9]{16}.
Result<std::string> MakeBootstrapToken();
// ValidBootstrapToken checks that form.
bool ValidBootstrapToken(std::string_view token);

// kWorkerTokenWindowSeconds is the length of one worker-token window. A worker token
// is handed out during its window and expires at the end of the next one, so it lives
// 12 to 24 hours after a worker got it.
inline constexpr std::int64_t kWorkerTokenWindowSeconds = std::int64_t{12} * 3600;

// WorkerTokenWindow is the window Unix time t lies in (t / 12 h, rounded down).
std::int64_t WorkerTokenWindow(std::int64_t unix_seconds);
// WorkerTokenExpiry is when the token of window w stops authenticating: the end of
// window w + 1, in Unix seconds.
std::int64_t WorkerTokenExpiry(std::int64_t window);
// WorkerToken is the worker token of window w: HMAC-SHA256 under the base token of
// "sprout worker bootstrap token v1 <w>", mapped to [a-z0-9]{6}.[a-z0-9]{16}. Every
// control-plane node computes the same one, with no coordination; knowing one tells
// nothing about the base token or another window's token. A malformed base is an error.
Result<std::string> WorkerToken(const std::string& base, std::int64_t window);

// JoinPsk is the TLS pre-shared key of the join endpoint: HMAC-SHA256 under the
// formation key (itself HKDF of the secret and cluster name) of a fixed label, so the
// beacon MAC key and the PSK are independent.
Key JoinPsk(const Key& formation_key);

// JoinKey is a join client's PSK and the authority it proves (which PSK identity it
// goes under): a control-plane node's is JoinPsk of the formation key, a worker's is
// JoinPsk of the worker formation key (DeriveKey of WorkerSecret).
struct JoinKey {
  JoinAuthority authority = JoinAuthority::kControlPlane;  // the identity used
  Key psk{};                                               // the PSK under that identity
};

// JoinKeys is what a join server accepts: both PSKs, each under its own identity.
struct JoinKeys {
  Key control_plane{};  // JoinPsk(formation key)
  Key worker{};         // JoinPsk(worker formation key)
};

}  // namespace sprout::formation
