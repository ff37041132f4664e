// A tiny Kubernetes API client: read a kubeconfig, make one HTTPS request with its
// credentials. The thin edge under kube/nodes.h; everything it returns is plain data
// for the pure code to judge.
#pragma once

#include <functional>
#include <string>

#include "kube/certs.h"
#include "util/result.h"

namespace sprout::kube {

// ParseKubeconfig reads the first cluster and the first user of a kubeconfig: the
// server, the CA (certificate-authority-data, or a certificate-authority file), and
// either a client certificate and key (…-data, or client-certificate / client-key
// files, which may be one file as with the kubelet's kubelet-client-current.pem) or a
// token. Files must be named by absolute paths. user is the user's name.
Result<Kubeconfig> ParseKubeconfig(const std::string& yaml);

// ConnectProblem says why no connection to server (like "https://198.18.0.11:6443") was
// made, from the socket's errno (0 when unknown). It leaves out the request's path and
// the attempt's time, so the same cause reads the same for every request: a refused
// connection is what an apiserver that is still starting gives.
std::string ConnectProblem(const std::string& server, int os_errno);

// ApiResponse is an HTTP answer: any status, the API server's errors included.
struct ApiResponse {
  long status = 0;   // HTTP status code
  std::string body;  // the response body
};

// ApiRequest sends method k.server+path (path like "/api/v1/nodes") with body, trusting
// only k.ca_pem and authenticating with k's client certificate or bearer token. A
// failure to get an answer (connection, TLS, timeout) is an error naming the URL; an
// HTTP error status is not; no connection at all is ConnectProblem's text. It waits at
// most 5 s to connect and timeout_seconds in all.
Result<ApiResponse> ApiRequest(const Kubeconfig& k, const std::string& method, const std::string& path,
                               const std::string& body = "", const std::string& content_type = "application/json",
                               int timeout_seconds = 10);

// ApiStream sends GET k.server+path (a watch: "...?watch=1&resourceVersion=…") and hands
// on_line each line of the answer as it arrives. It ends when the server ends the
// answer, when on_line returns false, when keep_going (asked about once a second)
// returns false, or after timeout_seconds. It returns the HTTP status, 0 when the
// caller ended it, and an error when no answer came (connection, TLS).
Result<long> ApiStream(const Kubeconfig& k, const std::string& path,
                       const std::function<bool(const std::string& line)>& on_line,
                       const std::function<bool()>& keep_going, int timeout_seconds);

}  // namespace sprout::kube
