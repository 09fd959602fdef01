// Can the nodes still reach each other? A TCP probe for the hang report (health/hang_notes.hpp): every
// rank of a multi-node job listens on a port of its own; when a hang is reported, each node's first
// rank tries to connect to the other nodes' first ranks. Plain sockets, no MPI: it answers while the
// communicator is stuck, and a cut link (silence: no answer within the time) reads differently from a
// dead process on a live node (the node's kernel refuses the connection) and from a stopped or busy
// one (its kernel accepts the connection: the listener needs no thread to answer).
#pragma once

#include <string>
#include <vector>

namespace zt::dist {

// A listening TCP socket on every IPv4 address of this host, on a port the kernel picks. Connections
// are accepted by the kernel; accept_pending() (the hang watcher's poll) closes them.
class ReachListener {
 public:
  ReachListener();  // never throws: where no socket can be had, endpoint() is ""
  ~ReachListener();
  ReachListener(const ReachListener&) = delete;
  ReachListener& operator=(const ReachListener&) = delete;

  // "ADDR[,ADDR...]:PORT": this host's IPv4 addresses (up, not loopback) and the port; "" if none.
  const std::string& endpoint() const { return endpoint_; }
  void accept_pending() const;  // accepts and closes every waiting connection; never blocks

 private:
  int fd_ = -1;
  std::string endpoint_;
};

enum class Reach { kOk, kRefused, kUnreachable };
// "ok" (a connection), "refused" (the host answered: no process on that port), "unreachable" (no
// answer within the time, or no route).
const char* reach_name(Reach r);

// Connects to every endpoint at once (each of its addresses, except this host's own: a bridge address
// that every node has, such as docker0's, would answer locally) and waits up to timeout_s. Per
// endpoint, the best of its addresses: ok, else refused, else unreachable (also for "" or no address).
std::vector<Reach> probe_reach(const std::vector<std::string>& endpoints, double timeout_s);

}  // namespace zt::dist
