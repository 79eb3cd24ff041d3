// tcp_store.hpp: a small TCP key-value store implementing gloo::rendezvous::Store, the rendezvous for ranks
// on several hosts (env mode: MASTER_ADDR/MASTER_PORT as torchrun sets them). Debian's Gloo ships FileStore,
// HashStore, PrefixStore and RedisStore but no TCP store. Rank 0 serves it (TcpStoreServer: one poll()
// thread); every rank, rank 0 included, talks to it through a TcpStore client.
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <memory>

struct addrinfo;

namespace domino {

// The IPv4 address of host:port for sockets of `socktype` (SOCK_STREAM, SOCK_DGRAM); BadInput naming
// `what` when the name does not resolve.
struct AddrInfoDeleter {
  void operator()(addrinfo* a) const;
};
using AddrInfo = std::unique_ptr<addrinfo, AddrInfoDeleter>;
AddrInfo resolve_ipv4(const std::string& host, int port, int socktype, const std::string& what);


class TcpStoreServer {
 public:
  // Listens on every interface; port 0 picks a free port (see port()). Throws domino::Error.
  explicit TcpStoreServer(int port);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;
  int port() const { return port_; }

 private:
  void serve();
  bool handle_request(int fd);  // false: the client went away

  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  int port_ = 0;
  std::map<std::string, std::vector<char>> data_;  // only touched by the server thread
  std::thread thread_;
};

class TcpStore : public gloo::rendezvous::Store {
 public:
  // Connects to host:port, retrying until `timeout` (the server may start later). Throws domino::Error.
  TcpStore(const std::string& host, int port, std::chrono::milliseconds timeout);
  ~TcpStore() override;

  void set(const std::string& key, const std::vector<char>& data) override;
  // Waits for the key to appear (up to the timeout given at construction).
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  bool try_get(const std::string& key, std::vector<char>* value);

  std::mutex mutex_;
  int fd_ = -1;
  std::string where_;
  std::chrono::milliseconds timeout_;
};

}  // namespace domino
