// tcp_store.cpp: the TCP rendezvous store. Wire format, one request per message:
//   u8 command ('S' set, 'G' get), u32 key length, key, [set: u32 value length, value]
// replies: set -> u8 1; get -> u8 found, [found: u32 length, value]. Waiting is client-side polling of 'G'.
#include "executor/runtime/tcp_store.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "sim/base/error.hpp"

namespace domino {
namespace {

constexpr uint32_t kMaxMessage = 256u << 20;

bool read_all(int fd, void* data, size_t n) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t got = ::read(fd, p, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= size_t(got);
  }
  return true;
}

bool write_all(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t put = ::send(fd, p, n, MSG_NOSIGNAL);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    p += put;
    n -= size_t(put);
  }
  return true;
}

bool write_u32(int fd, uint32_t v) { return write_all(fd, &v, 4); }
bool read_u32(int fd, uint32_t* v) { return read_all(fd, v, 4); }

bool read_string(int fd, std::vector<char>* out) {
  uint32_t n = 0;
  if (!read_u32(fd, &n) || n > kMaxMessage) return false;
  out->resize(n);
  return n == 0 || read_all(fd, out->data(), n);
}

std::string errno_text() { return std::strerror(errno); }

}  // namespace

TcpStoreServer::TcpStoreServer(int port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw_runtime("rendezvous store: socket: " + errno_text());
  const int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(uint16_t(port));
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listen_fd_, 128) != 0) {
    const std::string why = errno_text();
    ::close(listen_fd_);
    throw_runtime("rendezvous store: cannot listen on port " + std::to_string(port) + ": " + why +
                  " (is MASTER_PORT free on rank 0's host?)");
  }
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  if (::pipe2(wake_pipe_, O_CLOEXEC) != 0) {
    ::close(listen_fd_);
    throw_runtime("rendezvous store: pipe: " + errno_text());
  }
  thread_ = std::thread([this] { serve(); });
}

TcpStoreServer::~TcpStoreServer() {
  const char stop = 1;
  (void)!::write(wake_pipe_[1], &stop, 1);
  thread_.join();
  ::close(wake_pipe_[0]);
  ::close(wake_pipe_[1]);
  ::close(listen_fd_);
}

void TcpStoreServer::serve() {
  std::vector<pollfd> fds{{wake_pipe_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
  for (;;) {
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents) break;
    if (fds[1].revents & POLLIN) {
      const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client >= 0) {
        const int one = 1;
        ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fds.push_back({client, POLLIN, 0});
      }
    }
    for (size_t i = 2; i < fds.size();) {
      if (fds[i].revents && !handle_request(fds[i].fd)) {
        ::close(fds[i].fd);
        fds.erase(fds.begin() + long(i));
        continue;
      }
      fds[i].revents = 0;
      ++i;
    }
  }
  for (size_t i = 2; i < fds.size(); ++i) ::close(fds[i].fd);
}

bool TcpStoreServer::handle_request(int fd) {
  char command = 0;
  std::vector<char> key_bytes;
  if (!read_all(fd, &command, 1) || !read_string(fd, &key_bytes)) return false;
  const std::string key(key_bytes.begin(), key_bytes.end());
  if (command == 'S') {
    std::vector<char> value;
    if (!read_string(fd, &value)) return false;
    data_[key] = std::move(value);
    const char ok = 1;
    return write_all(fd, &ok, 1);
  }
  if (command == 'G') {
    auto it = data_.find(key);
    const char found = it != data_.end();
    if (!write_all(fd, &found, 1)) return false;
    if (!found) return true;
    return write_u32(fd, uint32_t(it->second.size())) && write_all(fd, it->second.data(), it->second.size());
  }
  return false;  // not our protocol: drop the client
}

void AddrInfoDeleter::operator()(addrinfo* a) const { ::freeaddrinfo(a); }

AddrInfo resolve_ipv4(const std::string& host, int port, int socktype, const std::string& what) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = socktype;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0)
    throw_bad_input("cannot resolve " + what + " '" + host + "': " + gai_strerror(rc));
  return AddrInfo(found);
}

TcpStore::TcpStore(const std::string& host, int port, std::chrono::milliseconds timeout)
    : where_(host + ":" + std::to_string(port)), timeout_(timeout) {
  const AddrInfo found = resolve_ipv4(host, port, SOCK_STREAM, "MASTER_ADDR (the rendezvous store)");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last_error;
  while (fd_ < 0) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
      fd_ = fd;
      break;
    }
    last_error = errno_text();
    if (fd >= 0) ::close(fd);
    if (std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (fd_ < 0)
    throw_runtime("rendezvous store: cannot connect to " + where_ + " within " +
                  std::to_string(timeout.count()) + " ms: " + last_error + " (is rank 0 running?)");
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

TcpStore::~TcpStore() {
  if (fd_ >= 0) ::close(fd_);
}

void TcpStore::set(const std::string& key, const std::vector<char>& data) {
  std::lock_guard lock(mutex_);
  const char command = 'S';
  char ok = 0;
  if (!write_all(fd_, &command, 1) || !write_u32(fd_, uint32_t(key.size())) || !write_all(fd_, key.data(), key.size()) ||
      !write_u32(fd_, uint32_t(data.size())) || !write_all(fd_, data.data(), data.size()) || !read_all(fd_, &ok, 1))
    throw_runtime("rendezvous store " + where_ + ": lost the connection while setting '" + key +
                  "' (rank 0 died?)");
}

bool TcpStore::try_get(const std::string& key, std::vector<char>* value) {
  std::lock_guard lock(mutex_);
  const char command = 'G';
  char found = 0;
  if (!write_all(fd_, &command, 1) || !write_u32(fd_, uint32_t(key.size())) || !write_all(fd_, key.data(), key.size()) ||
      !read_all(fd_, &found, 1) || (found && !read_string(fd_, value)))
    throw_runtime("rendezvous store " + where_ + ": lost the connection while reading '" + key +
                  "' (rank 0 died?)");
  return found != 0;
}

std::vector<char> TcpStore::get(const std::string& key) {
  wait({key}, timeout_);
  std::vector<char> value;
  try_get(key, &value);
  return value;
}

void TcpStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<char> ignored;
  for (const std::string& key : keys) {
    while (!try_get(key, &ignored)) {
      if (std::chrono::steady_clock::now() > deadline)
        throw_runtime("rendezvous store " + where_ + ": key '" + key + "' did not appear within " +
                      std::to_string(timeout.count()) + " ms (a rank did not start or died)");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

}  // namespace domino
