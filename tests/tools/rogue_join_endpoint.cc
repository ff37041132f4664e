// A rogue join endpoint for tests/worker_pin_test.sh: what any holder of the worker
// secret can run (another worker, a stolen worker disk). It serves worker credentials
// under the worker PSK with the real join server, but with a Kubernetes CA of its own,
// a token of its own and itself as the API server. A worker that keeps its CA would
// send its kubelet's bootstrap to the rogue and trust whatever the rogue signs.
//
//   sprout-rogue-join-endpoint --listen ADDR --port PORT --worker-secret-file F --cluster-name NAME
//
// It prints the hash of the CA it hands out, then serves until SIGTERM; the join
// server logs each answer to stderr ("join: gave worker credentials to ...").
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <string>

#include "formation/auth.h"
#include "formation/join.h"
#include "formationd/join_net.h"
#include "pki/pki.h"
#include "util/fs.h"

namespace {

volatile std::sig_atomic_t stop = 0;
void OnSignal(int) { stop = 1; }

int Usage(const std::string& why) {
  std::cerr << "sprout-rogue-join-endpoint: " << why
            << "\nusage: sprout-rogue-join-endpoint --listen ADDR --port PORT --worker-secret-file F "
               "--cluster-name NAME\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  namespace f = sprout::formation;
  std::map<std::string, std::string> args;
  for (int i = 1; i + 1 < argc; i += 2) args[argv[i]] = argv[i + 1];
  for (const char* need : {"--listen", "--port", "--worker-secret-file", "--cluster-name"}) {
    if (!args.count(need)) return Usage(std::string("missing ") + need);
  }
  auto secret = sprout::ReadFile(args["--worker-secret-file"]);
  if (!secret) return Usage(secret.error());
  std::string worker_secret = *secret;
  while (!worker_secret.empty() && (worker_secret.back() == '\n' || worker_secret.back() == '\r')) {
    worker_secret.pop_back();
  }
  if (!f::ValidWorkerSecret(worker_secret)) return Usage("the worker secret is not 64 lower-case hex digits");
  auto worker_key = f::DeriveKey(worker_secret, args["--cluster-name"]);
  // The control-plane PSK is unknown to a worker: a random one stands in, so no
  // control-plane joiner ever completes a handshake here.
  auto unknown = sprout::pki::RandomBytes(32);
  if (!worker_key || !unknown) return Usage("cannot derive the keys");
  auto cp_key = f::DeriveKey(*unknown, args["--cluster-name"]);
  if (!cp_key) return Usage(cp_key.error());
  f::JoinKeys keys{f::JoinPsk(*cp_key), f::JoinPsk(*worker_key)};

  auto cas = sprout::pki::MakeClusterCAs();  // random keys: the rogue has no cluster secret
  auto token = f::MakeBootstrapToken();
  if (!cas || !token) return Usage("cannot make the rogue's CA");
  auto hash = sprout::pki::SpkiSha256(cas->kubernetes_ca.cert_pem);
  f::Credentials served{*cas, *token, {"https://" + args["--listen"] + ":6443"}};

  f::JoinServer server;
  const int port = std::stoi(args["--port"]);
  if (auto s = server.Start(args["--listen"], static_cast<std::uint16_t>(port), keys); !s) {
    std::cerr << "sprout-rogue-join-endpoint: " << s.error() << "\n";
    return 1;
  }
  server.SetCredentials(served);
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGPIPE, SIG_IGN);
  std::cout << "rogue join endpoint at " << args["--listen"] << ":" << port << " hands out the CA "
            << (hash ? *hash : "?") << std::endl;
  while (stop == 0) ::pause();
  server.Stop();
  return 0;
}
