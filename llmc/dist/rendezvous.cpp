#include "llmc/dist/rendezvous.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <unistd.h>

namespace llmc {

namespace {

constexpr char kMagic[8] = {'L', 'L', 'M', 'C', 'R', 'A', 'N', 'K'};
constexpr uint32_t kVersion = 1;
// How long a connected peer may take to greet before rank 0 gives up on it.
constexpr auto kGreetingWait = std::chrono::seconds(10);

struct Greeting {
  char magic[8];
  uint32_t version;
  uint32_t world_size;
  uint32_t rank;
  uint32_t unused;
  uint64_t token;
};
static_assert(sizeof(Greeting) == 32, "the greeting's bytes on the wire");

Greeting make_greeting(const RankPlan& plan, uint64_t token) {
  Greeting g{};
  std::memcpy(g.magic, kMagic, sizeof kMagic);
  g.version = kVersion;
  g.world_size = uint32_t(plan.layout.world_size);
  g.rank = uint32_t(plan.layout.rank);
  g.token = token;
  return g;
}

Deadline deadline_after(double seconds) {
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
}

std::string where(const RankPlan& plan) {
  return plan.method == InitMethod::kTcp ? fmt::format("-pi tcp (-ps {}:{})", plan.host, plan.port)
                                         : fmt::format("-pi fs (-pf {})", plan.fs_dir);
}

std::string file_path(const RankPlan& plan) { return plan.fs_dir + "/" + kRendezvousFileName; }

// This machine's IPv4 addresses, the loopback ones last: the others try them in this order.
std::vector<std::string> own_addresses() {
  std::vector<std::string> outer, loopback;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
      if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
      char text[INET_ADDRSTRLEN] = {};
      inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
      (std::strncmp(text, "127.", 4) == 0 ? loopback : outer).push_back(text);
    }
    freeifaddrs(list);
  }
  outer.insert(outer.end(), loopback.begin(), loopback.end());
  return outer;
}

// The -pi fs file, written under a temporary name and renamed into place.
void write_address_file(const RankPlan& plan, int port, uint64_t token) {
  const std::string path = file_path(plan);
  const std::string temporary = fmt::format("{}.{}.tmp", path, getpid());
  {
    std::ofstream out(temporary);
    out << "llmc-rendezvous " << kVersion << "\nworld " << plan.layout.world_size << "\ntoken " << token << "\nport "
        << port << "\n";
    for (const std::string& a : own_addresses()) out << "address " << a << "\n";
    if (!out.flush())
      throw std::runtime_error(fmt::format("-pf {}: cannot write {}", plan.fs_dir, temporary));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    throw std::runtime_error(fmt::format("-pf {}: cannot rename {} to {}: {}", plan.fs_dir, temporary, path,
                                         std::strerror(errno)));
  }
}

struct AddressFile {
  int world_size = 0;
  uint64_t token = 0;
  int port = 0;
  std::vector<std::string> addresses;
};

// Reads the -pi fs file; false while it is not there. Throws for a file that is not one.
bool read_address_file(const std::string& path, AddressFile& file) {
  std::ifstream in(path);
  if (!in) return false;
  std::string line, key;
  int version = 0;
  if (!std::getline(in, line) || !(std::istringstream(line) >> key >> version) || key != "llmc-rendezvous" ||
      version != int(kVersion))
    throw std::runtime_error(fmt::format("{}: not a rendezvous file of this trainer (first line '{}')", path, line));
  file = AddressFile{};
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string value;
    fields >> key >> value;
    if (key == "world") file.world_size = std::atoi(value.c_str());
    else if (key == "token") file.token = std::strtoull(value.c_str(), nullptr, 10);
    else if (key == "port") file.port = std::atoi(value.c_str());
    else if (key == "address") file.addresses.push_back(value);
  }
  if (file.port <= 0 || file.addresses.empty())
    throw std::runtime_error(fmt::format("{}: no port or no address in it", path));
  return true;
}

std::string missing_ranks(const std::vector<TcpSocket>& peers) {
  std::string list;
  for (size_t r = 1; r < peers.size(); ++r)
    if (!peers[r].is_open()) list += (list.empty() ? "" : ", ") + std::to_string(r);
  return list;
}

// Rank 0: accepts until every rank has greeted, then confirms to each.
std::vector<TcpSocket> gather_ranks(const RankPlan& plan) {
  const int world = plan.layout.world_size;
  const Deadline deadline = deadline_after(plan.rendezvous_timeout);
  uint64_t token = 0;
  TcpSocket listener;
  if (plan.method == InitMethod::kTcp) {
    listener = listen_on(plan.host, plan.port, fmt::format("-ps {}:{}", plan.host, plan.port));
  } else {
    listener = listen_on("0.0.0.0", 0, "-pi fs");
    token = std::random_device{}() | uint64_t(std::random_device{}()) << 32;
    write_address_file(plan, local_port(listener), token);
  }
  // The file goes once every rank has come, or when rank 0 gives up: no later start may find it.
  struct RemoveFile {
    std::string path;
    ~RemoveFile() {
      if (!path.empty()) std::remove(path.c_str());
    }
  } remove_file{plan.method == InitMethod::kFs ? file_path(plan) : std::string()};
  std::vector<TcpSocket> peers(static_cast<size_t>(world));
  for (int joined = 1; joined < world;) {
    TcpSocket s = accept_before(
        listener, deadline,
        fmt::format("{}: rank(s) {} of -pn {} did not connect within {} s: start every rank with the same -pn and {} "
                    "(LLMC_RENDEZVOUS_TIMEOUT sets the wait)",
                    where(plan), missing_ranks(peers), world, plan.rendezvous_timeout,
                    plan.method == InitMethod::kTcp ? "-ps" : "-pf"));
    Greeting g{};
    try {
      s.recv_all(&g, sizeof g, std::min(deadline, std::chrono::steady_clock::now() + kGreetingWait), "its greeting");
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(fmt::format("{}: {}", where(plan), e.what()));
    }
    if (std::memcmp(g.magic, kMagic, sizeof kMagic) != 0 || g.version != kVersion)
      throw std::runtime_error(fmt::format("{}: {} is not a rank of this trainer (it sent something else)", where(plan),
                                           s.peer()));
    if (int(g.world_size) != world)
      throw std::runtime_error(fmt::format("{}: {} says rank {} of -pn {}, but rank 0 has -pn {}: start every rank "
                                           "with the same -pn",
                                           where(plan), s.peer(), g.rank, g.world_size, world));
    if (g.token != token)
      throw std::runtime_error(fmt::format("{}: {} (rank {}) read the job token of another start from {}", where(plan),
                                           s.peer(), g.rank, kRendezvousFileName));
    if (g.rank == 0 || int(g.rank) >= world)
      throw std::runtime_error(fmt::format("{}: {} says it is rank {}, not one of 1 to {}", where(plan), s.peer(),
                                           g.rank, world - 1));
    if (peers[g.rank].is_open())
      throw std::runtime_error(fmt::format("{}: rank {} connected twice (two processes with -pr {}?)", where(plan),
                                           g.rank, g.rank));
    s.set_peer(fmt::format("rank {}", g.rank));
    peers[g.rank] = std::move(s);
    ++joined;
  }
  const Greeting confirmation = make_greeting(plan, token);
  for (int r = 1; r < world; ++r) peers[size_t(r)].send_all(&confirmation, sizeof confirmation);
  return peers;
}

// -pi fs, ranks > 0: waits for rank 0's file and connects to the first of its addresses that answers.
TcpSocket connect_through_file(const RankPlan& plan, Deadline deadline, uint64_t& token) {
  const std::string path = file_path(plan);
  std::string last = "no file yet";
  for (;;) {
    AddressFile file;
    if (read_address_file(path, file)) {
      if (file.world_size != plan.layout.world_size) {
        last = fmt::format("{} is for -pn {} (left by an earlier start?)", path, file.world_size);
      } else {
        for (const std::string& address : file.addresses) {
          std::string error;
          const Deadline attempt = std::min(deadline, std::chrono::steady_clock::now() + std::chrono::seconds(2));
          TcpSocket s = connect_before(address, file.port, attempt, error);
          if (s.is_open()) {
            token = file.token;
            return s;
          }
          last = fmt::format("{}:{}: {}", address, file.port, error);
        }
      }
    }
    if (std::chrono::steady_clock::now() >= deadline)
      throw std::runtime_error(fmt::format("{}: rank 0 did not become reachable within {} s ({}): start rank 0 with "
                                           "the same -pf (LLMC_RENDEZVOUS_TIMEOUT sets the wait)",
                                           where(plan), plan.rendezvous_timeout, last));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// Ranks > 0: connects to rank 0, greets, and waits for its confirmation.
std::vector<TcpSocket> join_rank_zero(const RankPlan& plan) {
  const Deadline deadline = deadline_after(plan.rendezvous_timeout);
  uint64_t token = 0;
  TcpSocket s;
  if (plan.method == InitMethod::kTcp) {
    std::string error;
    try {
      s = connect_before(plan.host, plan.port, deadline, error);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(fmt::format("-ps {}:{}: {}", plan.host, plan.port, e.what()));
    }
    if (!s.is_open())
      throw std::runtime_error(fmt::format("{}: rank 0 did not answer within {} s ({}): start rank 0 with the same -ps "
                                           "(LLMC_RENDEZVOUS_TIMEOUT sets the wait)",
                                           where(plan), plan.rendezvous_timeout, error));
  } else {
    s = connect_through_file(plan, deadline, token);
  }
  s.set_peer("rank 0");
  const Greeting greeting = make_greeting(plan, token);
  s.send_all(&greeting, sizeof greeting);
  Greeting confirmation{};
  try {
    s.recv_all(&confirmation, sizeof confirmation, deadline, "the confirmation that every rank has come");
  } catch (const TimeoutError&) {
    throw std::runtime_error(fmt::format("{}: rank 0 took this rank in, but not every rank of -pn {} came within {} s "
                                         "(see rank 0's messages; LLMC_RENDEZVOUS_TIMEOUT sets the wait)",
                                         where(plan), plan.layout.world_size, plan.rendezvous_timeout));
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(fmt::format("{}: {}", where(plan), e.what()));
  }
  if (std::memcmp(confirmation.magic, kMagic, sizeof kMagic) != 0 || confirmation.rank != 0 ||
      int(confirmation.world_size) != plan.layout.world_size)
    throw std::runtime_error(fmt::format("{}: what answered there is not rank 0 of this trainer with -pn {}",
                                         where(plan), plan.layout.world_size));
  std::vector<TcpSocket> peers(1);
  peers[0] = std::move(s);
  return peers;
}

}  // namespace

std::vector<TcpSocket> rendezvous(const RankPlan& plan) {
  return plan.layout.rank == 0 ? gather_ranks(plan) : join_rank_zero(plan);
}

}  // namespace llmc
