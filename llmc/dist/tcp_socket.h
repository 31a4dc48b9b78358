// TCP connections between ranks started without MPI (llmc/dist/rendezvous.h sets them up,
// llmc/dist/socket_communicator.h runs the collectives over them). Every failure is thrown as
// std::runtime_error naming the peer ("rank 1", or an address before the peer said who it is).
#pragma once
#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>

namespace llmc {

using Deadline = std::chrono::steady_clock::time_point;

// A wait with a deadline that passed.
class TimeoutError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class TcpSocket {
 public:
  TcpSocket() = default;
  TcpSocket(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}
  ~TcpSocket();
  TcpSocket(TcpSocket&& other) noexcept;
  TcpSocket& operator=(TcpSocket&& other) noexcept;
  TcpSocket(const TcpSocket&) = delete;
  TcpSocket& operator=(const TcpSocket&) = delete;

  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  // Who is at the other end, for messages: "rank 2", or "10.0.0.5:40312" before it said.
  const std::string& peer() const { return peer_; }
  void set_peer(std::string peer) { peer_ = std::move(peer); }

  // Sends every byte (no SIGPIPE: a closed peer is an exception).
  void send_all(const void* data, size_t bytes);
  // Receives exactly `bytes`. Without a deadline it waits as long as the peer lives: a peer that
  // stops without dying is the watchdog's (--step-timeout) to end; one that ends or whose machine
  // is gone (TCP keepalive, about two minutes) is an exception here.
  void recv_all(void* data, size_t bytes);
  // The same, throwing TimeoutError once the deadline has passed.
  void recv_all(void* data, size_t bytes, Deadline deadline, const char* what);

 private:
  void recv_some(char* data, size_t bytes, size_t& done, int timeout_ms, const char* what);
  int fd_ = -1;
  std::string peer_;
};

// Listens on host:port (host "" = every address of this machine, port 0 = any free port). Throws
// naming `where` (the flag the address came from) when the address is not this machine's or the
// port is taken.
TcpSocket listen_on(const std::string& host, int port, const std::string& where);
// The port a listening socket got (for port 0).
int local_port(const TcpSocket& listener);
// The next connection, or an exception once the deadline has passed.
TcpSocket accept_before(const TcpSocket& listener, Deadline deadline, const std::string& waiting_for);
// Connects to host:port, retrying while nobody listens there yet, until the deadline; returns a
// closed socket on a timeout (the caller says what it waited for). Throws for a host that does not
// resolve.
TcpSocket connect_before(const std::string& host, int port, Deadline deadline, std::string& last_error);

}  // namespace llmc
