// The TCP reachability probe of reach.hpp.
#include "dist/reach.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <set>
#include <string_view>

#include "core/error.hpp"

namespace zt::dist {
namespace {

// This host's IPv4 addresses: interfaces up, loopback excepted.
std::vector<std::string> own_addresses() {
  std::vector<std::string> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (const ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET || !(a->ifa_flags & IFF_UP) || (a->ifa_flags & IFF_LOOPBACK))
      continue;
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
    out.emplace_back(text);
  }
  ::freeifaddrs(list);
  return out;
}

// One connection attempt in flight: which endpoint it is for, and its socket.
struct Attempt {
  std::size_t endpoint;
  int fd;
};

// Starts a non-blocking connect; returns the socket, or -1 with `now` set when it ended at once.
int start_connect(const std::string& address, int port, std::optional<Reach>& now) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::inet_pton(AF_INET, address.c_str(), &to.sin_addr) != 1) return -1;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) == 0) now = Reach::kOk;
  else if (errno == ECONNREFUSED) now = Reach::kRefused;
  else if (errno == EINPROGRESS) return fd;
  ::close(fd);
  return -1;
}

Reach better(Reach a, Reach b) { return static_cast<int>(a) < static_cast<int>(b) ? a : b; }
}  // namespace

const char* reach_name(Reach r) {
  switch (r) {
    case Reach::kOk: return "ok";
    case Reach::kRefused: return "refused";
    case Reach::kUnreachable: return "unreachable";
  }
  return "?";
}

ReachListener::ReachListener() {
  const std::vector<std::string> addresses = own_addresses();
  if (addresses.empty()) return;
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof any;
  if (fd_ < 0 || ::bind(fd_, reinterpret_cast<const sockaddr*>(&any), sizeof any) != 0 || ::listen(fd_, 256) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&any), &len) != 0) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    return;
  }
  for (const std::string& a : addresses) endpoint_ += cat(endpoint_.empty() ? "" : ",", a);
  endpoint_ += cat(":", ntohs(any.sin_port));
}

ReachListener::~ReachListener() {
  if (fd_ >= 0) ::close(fd_);
}

void ReachListener::accept_pending() const {
  if (fd_ < 0) return;
  for (int c; (c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC)) >= 0;) ::close(c);
}

std::vector<Reach> probe_reach(const std::vector<std::string>& endpoints, double timeout_s) {
  const std::vector<std::string> own_list = own_addresses();
  const std::set<std::string> own(own_list.begin(), own_list.end());
  std::vector<Reach> result(endpoints.size(), Reach::kUnreachable);
  std::vector<Attempt> attempts;
  for (std::size_t e = 0; e < endpoints.size(); ++e) {
    const std::string& ep = endpoints[e];
    const std::size_t colon = ep.rfind(':');
    if (colon == std::string::npos) continue;
    const int port = std::atoi(ep.c_str() + colon + 1);
    std::string_view list(ep.data(), colon);
    while (!list.empty()) {
      const std::size_t comma = list.find(',');
      const std::string address(list.substr(0, comma));
      list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
      if (own.count(address)) continue;
      std::optional<Reach> now;
      if (const int fd = start_connect(address, port, now); fd >= 0) attempts.push_back({e, fd});
      else if (now) result[e] = better(result[e], *now);
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!attempts.empty()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    std::vector<pollfd> fds;
    for (const Attempt& a : attempts) fds.push_back({a.fd, POLLOUT, 0});
    if (::poll(fds.data(), fds.size(), static_cast<int>(left.count())) < 0 && errno != EINTR) break;
    std::vector<Attempt> pending;
    for (std::size_t i = 0; i < attempts.size(); ++i) {
      if (fds[i].revents == 0) {
        pending.push_back(attempts[i]);
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(attempts[i].fd, SOL_SOCKET, SO_ERROR, &err, &len);
      const Reach r = err == 0 ? Reach::kOk : err == ECONNREFUSED ? Reach::kRefused : Reach::kUnreachable;
      result[attempts[i].endpoint] = better(result[attempts[i].endpoint], r);
      ::close(attempts[i].fd);
    }
    attempts.swap(pending);
  }
  for (const Attempt& a : attempts) ::close(a.fd);
  return result;
}

}  // namespace zt::dist
