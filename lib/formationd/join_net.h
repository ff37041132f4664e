// The join endpoint's network side (docs/formation.md, "Joining"): the server a
// control-plane node runs, the client a joining node uses, and the backup-copy push.
// What goes over the wire, and the answer a request gets, is formation/join.h (pure).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "formation/join.h"
#include "util/result.h"

namespace sprout::formation {

// JoinLimits bound what the join endpoint gives any one client, so that nobody, with or
// without the secret, can stall it for the nodes that are joining.
struct JoinLimits {
  int max_connections = 64;  // connections served at once; more are closed at accept
  int per_source = 4;        // connections served at once from one address
  int deadline_ms = 10000;   // the whole connection: handshake, request and answer
  int io_timeout_ms = 3000;  // each read or write
};

// JoinServer serves join requests on address:port: an accept thread, and one thread per
// connection within limits. Until SetCredentials it refuses requests.
class JoinServer {
 public:
  JoinServer() = default;
  explicit JoinServer(JoinLimits limits) : limits_(limits) {}
  JoinServer(const JoinServer&) = delete;
  JoinServer& operator=(const JoinServer&) = delete;
  ~JoinServer();

  // Start listens and starts the thread; clients authenticate with either of keys.
  Status Start(const std::string& address, std::uint16_t port, const JoinKeys& keys);
  // SetCredentials makes the server answer with credentials.
  void SetCredentials(const Credentials& credentials);
  // SetBackupStore makes the server take backup copies from control-plane peers and
  // hand each to store (called on the connection's thread; empty: copies are refused).
  void SetBackupStore(BackupCopyStore store);
  // Stop ends the threads and closes the sockets.
  void Stop();
  // running is true between Start and Stop.
  bool running() const { return thread_.joinable(); }
  // port is the port listened on (useful after Start with port 0).
  std::uint16_t port() const { return port_; }
  // refused counts handshakes that failed (wrong secret or garbage).
  std::uint64_t refused() const { return refused_.load(); }
  // overreached counts requests for control-plane credentials over the worker PSK.
  std::uint64_t overreached() const { return overreached_.load(); }
  // turned_away counts connections closed at accept because of the limits.
  std::uint64_t turned_away() const { return turned_away_.load(); }
  // cut_off counts connections closed at their deadline.
  std::uint64_t cut_off() const { return cut_off_.load(); }

 private:
  // Connection is one client being served: its socket stays open until the accept
  // thread reaps it after its thread has ended, so its number is never reused while a
  // deadline may still shut it down.
  struct Connection {
    int fd = -1;
    std::string from;
    // Steady-clock milliseconds; the serving thread may move it later once a peer that
    // proved the control-plane key offers a backup copy (the copy's size buys time).
    std::atomic<std::int64_t> deadline_ms{0};
    bool cut = false;
    std::atomic<bool> done{false};
    std::thread thread;
  };
  void Serve();
  void Accept();
  void Reap(bool all);
  void Handle(Connection& c);
  JoinLimits limits_;
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  JoinKeys keys_{};
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> refused_{0};
  std::atomic<std::uint64_t> overreached_{0};
  std::atomic<std::uint64_t> turned_away_{0};
  std::atomic<std::uint64_t> cut_off_{0};
  std::mutex mu_;
  std::shared_ptr<const Credentials> credentials_;
  std::shared_ptr<const BackupCopyStore> store_;
  std::vector<std::unique_ptr<Connection>> connections_;  // only the accept thread touches it
  std::thread thread_;
};

// FetchJoin connects to address:port, authenticates with key and sends request;
// bounded by timeout_ms for connect and each read or write.
Result<JoinResponse> FetchJoin(const std::string& address, std::uint16_t port, const JoinKey& key,
                               const JoinRequest& request, int timeout_ms = 3000);

// PushBackupCopy offers the bundle named name to the join endpoint at address:port
// (authenticated with a control-plane key) and sends its bytes; Ok once the peer has
// checked and written it. Bounded: connect and each read or write by timeout_ms.
Status PushBackupCopy(const std::string& address, std::uint16_t port, const JoinKey& key, const JoinRequest& from,
                      const std::string& name, std::string_view bytes, int timeout_ms = 3000);

// SaveWorkerCredentials writes a worker's credentials under dir: ca.crt (0644),
// api-endpoints (one URL a line, 0644) and bootstrap-token (0600), each atomically.
Status SaveWorkerCredentials(const std::filesystem::path& dir, const JoinResponse& response);

}  // namespace sprout::formation
