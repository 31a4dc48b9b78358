#include "llmc/dist/tcp_socket.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdexcept>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace llmc {

namespace {

std::string errno_text(int err) { return std::strerror(err); }

int ms_until(Deadline deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return left.count() <= 0 ? 0 : int(std::min<long long>(left.count(), 1 << 30));
}

// Collectives are many small messages in lock step: Nagle's delay would add up to 40 ms to each.
// Keepalive turns a peer machine that vanished (no FIN, no RST) into an error after 60 s of
// silence plus 6 unanswered probes 10 s apart, instead of a wait without end.
void tune_connection(int fd) {
  const int one = 1, idle = 60, interval = 10, probes = 6;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes);
}

std::string address_text(const sockaddr_storage& a) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    inet_ntop(AF_INET, &v4.sin_addr, host, sizeof host);
    port = ntohs(v4.sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    inet_ntop(AF_INET6, &v6.sin6_addr, host, sizeof host);
    port = ntohs(v6.sin6_port);
  }
  return fmt::format("{}:{}", host, port);
}

struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list) freeaddrinfo(list);
  }
};

void resolve(const std::string& host, int port, bool passive, AddrInfo& out, const std::string& where) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &out.list);
  if (rc != 0) throw std::runtime_error(fmt::format("{}: cannot resolve '{}': {}", where, host, gai_strerror(rc)));
}

// One non-blocking connect, waited for until the deadline; -1 and `error` set on failure.
int try_connect(const addrinfo& a, Deadline deadline, std::string& error) {
  const int fd = socket(a.ai_family, a.ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a.ai_protocol);
  if (fd < 0) {
    error = errno_text(errno);
    return -1;
  }
  int rc = connect(fd, a.ai_addr, a.ai_addrlen);
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    rc = poll(&p, 1, ms_until(deadline));
    int err = ETIMEDOUT;
    socklen_t len = sizeof err;
    if (rc == 1) getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    errno = err;
    rc = err == 0 ? 0 : -1;
  }
  if (rc != 0) {
    error = errno_text(errno);
    close(fd);
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  tune_connection(fd);
  return fd;
}

}  // namespace

TcpSocket::~TcpSocket() {
  if (fd_ >= 0) close(fd_);
}

TcpSocket::TcpSocket(TcpSocket&& other) noexcept : fd_(other.fd_), peer_(std::move(other.peer_)) { other.fd_ = -1; }

TcpSocket& TcpSocket::operator=(TcpSocket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    peer_ = std::move(other.peer_);
    other.fd_ = -1;
  }
  return *this;
}

void TcpSocket::send_all(const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = send(fd_, p, bytes, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      throw std::runtime_error(fmt::format("{}: connection lost while sending ({}): that process ended or its machine "
                                           "is gone; see its own messages",
                                           peer_, errno_text(errno)));
    p += n;
    bytes -= size_t(n);
  }
}

void TcpSocket::recv_some(char* data, size_t bytes, size_t& done, int timeout_ms, const char* what) {
  pollfd p{fd_, POLLIN, 0};
  const int ready = poll(&p, 1, timeout_ms);
  if (ready < 0 && errno == EINTR) return;
  if (ready == 0) throw TimeoutError(fmt::format("{}: {} did not come in time", peer_, what));
  const ssize_t n = recv(fd_, data + done, bytes - done, 0);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n < 0)
    throw std::runtime_error(fmt::format("{}: connection lost while receiving {} ({}): that process ended or its "
                                         "machine is gone; see its own messages",
                                         peer_, what, errno_text(errno)));
  if (n == 0)
    throw std::runtime_error(fmt::format("{} closed its connection while this rank waited for {}: that process ended; "
                                         "see its own messages",
                                         peer_, what));
  done += size_t(n);
}

void TcpSocket::recv_all(void* data, size_t bytes) {
  for (size_t done = 0; done < bytes;) recv_some(static_cast<char*>(data), bytes, done, -1, "data");
}

void TcpSocket::recv_all(void* data, size_t bytes, Deadline deadline, const char* what) {
  for (size_t done = 0; done < bytes;) recv_some(static_cast<char*>(data), bytes, done, ms_until(deadline), what);
}

TcpSocket listen_on(const std::string& host, int port, const std::string& where) {
  AddrInfo info;
  resolve(host, port, true, info, where);
  std::string error = "no address";
  for (const addrinfo* a = info.list; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 128) == 0) return TcpSocket(fd, where);
    error = errno_text(errno);
    close(fd);
  }
  throw std::runtime_error(fmt::format("{}: rank 0 cannot listen on {}:{} ({}): give an address of rank 0's machine "
                                       "and a free port",
                                       where, host.empty() ? "*" : host, port, error));
}

int local_port(const TcpSocket& listener) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  getsockname(listener.fd(), reinterpret_cast<sockaddr*>(&a), &len);
  return a.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6&>(a).sin6_port)
                                 : ntohs(reinterpret_cast<sockaddr_in&>(a).sin_port);
}

TcpSocket accept_before(const TcpSocket& listener, Deadline deadline, const std::string& waiting_for) {
  for (;;) {
    pollfd p{listener.fd(), POLLIN, 0};
    const int ready = poll(&p, 1, ms_until(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) throw std::runtime_error(waiting_for);
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    const int fd = accept4(listener.fd(), reinterpret_cast<sockaddr*>(&a), &len, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      throw std::runtime_error(fmt::format("{}: accept failed: {}", listener.peer(), errno_text(errno)));
    }
    tune_connection(fd);
    return TcpSocket(fd, "the connection from " + address_text(a));
  }
}

TcpSocket connect_before(const std::string& host, int port, Deadline deadline, std::string& last_error) {
  AddrInfo info;
  resolve(host, port, false, info, "rank 0's address");
  for (;;) {
    for (const addrinfo* a = info.list; a != nullptr; a = a->ai_next) {
      // A few seconds per address, so that one that drops packets does not use up the deadline.
      const Deadline attempt = std::min(deadline, std::chrono::steady_clock::now() + std::chrono::seconds(3));
      const int fd = try_connect(*a, attempt, last_error);
      if (fd >= 0) return TcpSocket(fd, fmt::format("{}:{}", host, port));
    }
    if (std::chrono::steady_clock::now() >= deadline) return TcpSocket();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace llmc
