// Notes files and their comparison (hang_report.hpp).
#include "health/hang_report.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <map>
#include <set>
#include <sstream>

#include "core/error.hpp"

namespace zt::health {
namespace {
using dist::CollGroup;
using dist::CollKind;
using dist::CollRecord;
using dist::CollState;

constexpr const char* kMagic = "ztrain hang notes v2";  // v2: the communicator label column

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

template <typename E, std::size_t N>
std::optional<E> enum_of(const std::string& name, const std::array<E, N>& all, const char* (*namer)(E)) {
  for (E e : all)
    if (name == namer(e)) return e;
  return std::nullopt;
}
constexpr std::array kGroups{CollGroup::kDp, CollGroup::kWorld, CollGroup::kP2p};
constexpr std::array kKinds{CollKind::kAllReduce, CollKind::kReduceScatter, CollKind::kAllGather, CollKind::kBroadcast,
                            CollKind::kBarrier,   CollKind::kAgreement,     CollKind::kGather,
                            CollKind::kSend,      CollKind::kRecv};
constexpr std::array kStates{CollState::kOpen, CollState::kDone, CollState::kTimedOut};

// "all_reduce #10 (step 3 micro-batch 1/1, call 1; 120320 B)"; the world's agreements say so.
std::string describe(const CollRecord& r) {
  return cat(r.group == CollGroup::kWorld ? "world " : r.group == CollGroup::kP2p ? "p2p " : "", dist::kind_name(r.kind), " #", r.seq, " (", r.context,
             ", call ", r.call, "; ", r.bytes, " B)");
}

// The same collective on two ranks. The world's agreements carry each rank's own payload (a gather's
// part, an empty one to a broadcast from rank 0): their sizes differ by design.
bool same_call(const CollRecord& a, const CollRecord& b) {
  return a.group == b.group && a.comm == b.comm && a.seq == b.seq && a.kind == b.kind &&
         (a.group == CollGroup::kWorld || a.bytes == b.bytes);
}

// One rank's notes, digested: the collective it is in (the oldest not completed: with several in
// flight, the one it waits on first) and the last sequence number it entered per group.
struct View {
  const RankNotes* notes = nullptr;
  std::optional<CollRecord> current;
  std::array<std::uint64_t, 3> last_seq{};

  explicit View(const RankNotes* n) : notes(n) {
    if (!n) return;
    for (const CollRecord& r : n->ring) {
      std::uint64_t& last = last_seq[static_cast<std::size_t>(r.group)];
      last = std::max(last, r.seq);
      if (r.state != CollState::kDone && (!current || r.enter_s < current->enter_s)) current = r;
    }
  }
  const CollRecord* find(CollGroup g, std::uint64_t seq) const {
    for (const CollRecord& r : notes->ring)
      if (r.group == g && r.seq == seq) return &r;
    return nullptr;
  }
  // A member of communicator `comm` of `group`: it entered one of its collectives (the ring holds the last
  // 1024; the training communicators' turn comes every step). The root's (0) has every rank.
  bool member_of(CollGroup group, std::uint32_t comm) const {
    if (comm == 0) return true;
    return std::any_of(notes->ring.begin(), notes->ring.end(),
                       [&](const CollRecord& r) { return r.group == group && r.comm == comm; });
  }
  const CollRecord* last_done() const {
    const CollRecord* out = nullptr;
    for (const CollRecord& r : notes->ring)
      if (r.state == CollState::kDone && (!out || r.leave_s > out->leave_s)) out = &r;
    return out;
  }
  // Until the deadline threw, or (still waiting) until the notes were written.
  double waited_s() const { return (current->state == CollState::kTimedOut ? current->leave_s : notes->written_s) - current->enter_s; }
};

std::string who(int rank, const std::vector<std::string>& known) {
  const std::string& k = known[static_cast<std::size_t>(rank)];
  return k.empty() ? cat("rank ", rank) : cat("rank ", rank, " on ", k);
}

// One rank that does not wait where the others do: {headline clause, detail line}.
std::pair<std::string, std::string> diagnose(int r, const std::vector<View>& views, const CollRecord& b,
                                             const std::vector<int>& waiters, const std::vector<std::string>& known,
                                             double waited_s) {
  const std::string name = who(r, known);
  const View& v = views[static_cast<std::size_t>(r)];
  if (!v.notes) {
    std::string s = cat(name, " sent no notes within ", fixed(waited_s, 1),
                        " s: it is stopped (SIGSTOP), dead, or cannot write ckpt.dir/diag/");
    return {s, s};
  }
  const std::string waits = cat(waiters.size() == 1 ? "rank " : "ranks ", rank_list(waiters), waiters.size() == 1 ? " waits" : " wait");
  const std::size_t g = static_cast<std::size_t>(b.group);
  if (const CollRecord* mine = v.find(b.group, b.seq)) {
    if (!same_call(*mine, b)) {
      std::string s = cat("ranks disagree on ", dist::group_name(b.group), " collective #", b.seq, ": ", name,
                          " entered ", dist::kind_name(mine->kind), " #", mine->seq, " (", mine->context, ", call ",
                          mine->call, "; ", mine->bytes, " B) while ", waits, " in ", describe(b));
      return {s, s};
    }
    std::string s = cat(name, " left ", describe(b), " while ", waits, " in it");
    if (v.current) s += cat("; it is now in ", describe(*v.current));
    return {s, s};
  }
  if (v.last_seq[g] > b.seq) {
    const std::uint64_t ahead = v.last_seq[g] - b.seq;
    std::string s = cat(name, " is ", ahead, " collective", ahead == 1 ? "" : "s", " ahead: it entered ",
                        v.current ? describe(*v.current) : cat(dist::group_name(b.group), " #", v.last_seq[g]), " while ",
                        waits, " in ", describe(b));
    return {s, s};
  }
  const std::string never = cat(name, " never entered ", describe(b));
  if (v.current) {
    const CollRecord& e = *v.current;
    bool first = true;  // did any other rank enter e?
    for (const View& o : views)
      if (o.notes && o.notes != v.notes && o.last_seq[static_cast<std::size_t>(e.group)] >= e.seq) first = false;
    if (first)
      return {cat(name, " skipped ", describe(b), ": it went on to ", describe(e), ", which no other rank entered"),
              cat(never, ": it went on to ", describe(e), " (", fixed(v.waited_s(), 1),
                  " s), which no other rank entered: a collective skipped on one rank, e.g. a collective behind a "
                  "condition that differs between ranks")};
    return {cat(never, ": it waits in ", describe(e)), cat(never, ": it waits in ", describe(e), " since ",
                                                            fixed(v.waited_s(), 1), " s")};
  }
  std::string detail = never;
  if (const CollRecord* last = v.last_done())
    detail += cat(": it last left ", describe(*last), " ", fixed(v.notes->written_s - last->leave_s, 1), " s before its notes");
  detail += cat(" (stuck or slow outside collectives: compute, I/O, a data read; `gdb -p ", v.notes->pid, "` on ",
                v.notes->host, " shows where)");
  return {never, detail};
}
}  // namespace

std::string format_notes(const RankNotes& n) {
  std::ostringstream out;
  out << kMagic << "\nincident " << n.incident << "\nrank " << n.rank << " of " << n.world_size << "\nhost " << n.host
      << "\npid " << n.pid << "\nwritten " << fixed(n.written_s, 3) << "\nfailed " << (n.failed ? 1 : 0)
      << "\nfailure " << one_line(n.failure);
  for (const auto& [host, verdict] : n.reach) out << "\nreach " << host << ' ' << verdict;
  out << "\nrecords " << n.ring.size()
      << "\n# seq group comm kind bytes call enter_s leave_s state context (oldest first)\n";
  for (const CollRecord& r : n.ring)
    out << r.seq << ' ' << dist::group_name(r.group) << ' ' << r.comm << ' ' << dist::kind_name(r.kind) << ' ' << r.bytes << ' ' << r.call
        << ' ' << fixed(r.enter_s, 6) << ' ' << fixed(r.leave_s, 6) << ' ' << dist::state_name(r.state) << ' '
        << r.context << '\n';
  out << "end\n";
  return out.str();
}

std::optional<RankNotes> parse_notes(const std::string& text) {
  std::istringstream in(text);
  std::string line, key;
  if (!std::getline(in, line) || line != kMagic) return std::nullopt;
  RankNotes n;
  std::size_t records = 0;
  auto rest = [](std::istringstream& s) {  // the rest of the line, possibly empty
    std::string r;
    if (!std::getline(s >> std::ws, r)) s.clear(std::ios::eofbit);
    return r;
  };
  while (std::getline(in, line) && line.rfind("#", 0) != 0) {
    std::istringstream f(line);
    f >> key;
    if (key == "incident") n.incident = rest(f);
    else if (key == "rank") f >> n.rank >> key >> n.world_size;
    else if (key == "host") n.host = rest(f);
    else if (key == "pid") f >> n.pid;
    else if (key == "written") f >> n.written_s;
    else if (key == "failed") { int v = 0; f >> v; n.failed = v != 0; }
    else if (key == "failure") n.failure = rest(f);
    else if (key == "reach") { std::string host, verdict; f >> host >> verdict; n.reach.emplace_back(host, verdict); }
    else if (key == "records") f >> records;
    if (f.fail()) return std::nullopt;
  }
  while (std::getline(in, line) && line != "end") {
    std::istringstream f(line);
    CollRecord r;
    std::string group, kind, state;
    f >> r.seq >> group >> r.comm >> kind >> r.bytes >> r.call >> r.enter_s >> r.leave_s >> state;
    const auto g = enum_of(group, kGroups, dist::group_name);
    const auto k = enum_of(kind, kKinds, dist::kind_name);
    const auto s = enum_of(state, kStates, dist::state_name);
    if (f.fail() || !g || !k || !s) return std::nullopt;
    r.group = *g, r.kind = *k, r.state = *s;
    const std::string context = rest(f);
    std::strncpy(r.context, context.c_str(), CollRecord::kContextChars);
    n.ring.push_back(r);
  }
  if (line != "end" || n.ring.size() != records) return std::nullopt;  // cut short: still being written
  return n;
}

// Every waiting rank waits in a point-to-point transfer (pipeline stages): names the ranks without
// notes (dead or stopped) first, then each waiter and its transfer.
static HangSummary summarize_p2p(const std::vector<View>& views, const std::vector<std::string>& known, double waited_s) {
  HangSummary out;
  std::vector<std::string> waiting;
  for (std::size_t r = 0; r < views.size(); ++r) {
    const View& v = views[r];
    if (!v.notes) {
      const std::string s = cat(who(static_cast<int>(r), known), " sent no notes within ", fixed(waited_s, 1),
                                " s: it is stopped (SIGSTOP), dead, or cannot write ckpt.dir/diag/");
      out.headline += s + "; ";
      out.lines.push_back(s);
    } else if (v.current) {
      const std::string s = cat(who(static_cast<int>(r), known), " waited ", fixed(v.waited_s(), 1), " s in ", describe(*v.current));
      waiting.push_back(s);
      out.lines.push_back(s);
    } else {  // the stage its neighbours wait for
      const std::string s = cat(who(static_cast<int>(r), known), " is in no transfer or collective (stuck or slow "
                                "outside them: compute, I/O; `gdb -p ", v.notes->pid, "` on ", v.notes->host, " shows where)");
      out.headline += s + "; ";
      out.lines.push_back(s);
    }
  }
  out.headline += cat(waiting.size(), waiting.size() == 1 ? " rank waits" : " ranks wait", " in pipeline transfers: ");
  for (std::size_t i = 0; i < waiting.size(); ++i) {
    if (i > 0) out.headline += "; ";
    out.headline += waiting[i];
  }
  return out;
}

// The nodes' TCP probes (reach lines of each node's first rank): a node that no other node reaches and
// that reaches none, while some nodes still reach each other, is cut off (its link, switch port or
// power). Two nodes that cannot reach each other cannot tell whose link failed: both are named.
namespace {
std::string host_of(int r, const std::vector<View>& views, const std::vector<std::string>& known) {
  if (const RankNotes* n = views[static_cast<std::size_t>(r)].notes) return n->host;
  const std::string& k = known[static_cast<std::size_t>(r)];  // "node HOST (pid P)"
  if (k.rfind("node ", 0) != 0) return "";
  return k.substr(5, k.find(" (pid") == std::string::npos ? std::string::npos : k.find(" (pid") - 5);
}

HangSummary network_view(const std::vector<View>& views, const std::vector<std::string>& known) {
  std::map<std::string, std::map<std::string, bool>> answered;  // prober host -> target host -> answered
  HangSummary out;
  for (const View& v : views) {
    if (!v.notes || v.notes->reach.empty()) continue;
    std::string line = cat("TCP probe from ", v.notes->host, " (rank ", v.notes->rank, ", ", fixed(kReachProbeS, 1), " s):");
    for (const auto& [host, verdict] : v.notes->reach) {
      answered[v.notes->host][host] = verdict != "unreachable";
      line += cat(" ", host, " ", verdict, ",");
    }
    line.pop_back();
    out.lines.push_back(line);
  }
  if (answered.empty()) return out;
  std::set<std::string> hosts;
  for (const auto& [from, row] : answered) {
    hosts.insert(from);
    for (const auto& [to, ok] : row) hosts.insert(to);
  }
  auto talks = [&](const std::string& x) {  // x reached, or was reached by, some other node
    for (const auto& [from, row] : answered)
      for (const auto& [to, ok] : row)
        if (ok && (from == x || to == x)) return true;
    return false;
  };
  std::vector<std::string> cut;
  bool others_talk = false;
  for (const std::string& h : hosts) {
    if (talks(h)) others_talk = true;
    else cut.push_back(h);
  }
  for (const std::string& h : cut) {
    std::vector<int> ranks;
    for (std::size_t r = 0; r < views.size(); ++r)
      if (host_of(static_cast<int>(r), views, known) == h) ranks.push_back(static_cast<int>(r));
    const std::string on = ranks.empty() ? "" : cat(" (rank", ranks.size() > 1 ? "s " : " ", rank_list(ranks), ")");
    out.headline += cat(out.headline.empty() ? "" : "; ", "node ", h, on,
                        others_talk ? " is unreachable: no TCP answer between it and any other node within "
                                    : " reaches no other node and none reaches it: no TCP answer either way within ",
                        fixed(kReachProbeS, 1), " s",
                        others_talk ? ", while the others reach each other: its link, switch port or power is down"
                                    : ": a partition, or the link of one of them");
  }
  return out;
}
}  // namespace

static HangSummary summarize_collectives(const std::vector<View>& views, const std::vector<std::string>& known,
                                         double waited_s);

HangSummary summarize_hang(const std::vector<std::optional<RankNotes>>& notes, const std::vector<std::string>& known,
                           double waited_s) {
  std::vector<View> views;
  for (const auto& n : notes) views.emplace_back(n ? &*n : nullptr);
  HangSummary out = summarize_collectives(views, known, waited_s);
  HangSummary net = network_view(views, known);
  if (!net.headline.empty()) out.headline = net.headline + "; " + out.headline;
  out.lines.insert(out.lines.end(), net.lines.begin(), net.lines.end());
  return out;
}

static HangSummary summarize_collectives(const std::vector<View>& views, const std::vector<std::string>& known,
                                         double waited_s) {
  // Where the job stopped: in the group most ranks wait in, the earliest collective one waits in. (At
  // the world's agreements rank 0 collects: the others may leave one and wait in the next.)
  std::array<int, 3> in_group{};
  for (const View& v : views)
    if (v.current) ++in_group[static_cast<std::size_t>(v.current->group)];
  HangSummary out;
  // Pipeline stages wait on their neighbours' sends and receives, which no other rank shares: each
  // waiter is named with its transfer (the peer in its context), and the ranks outside are diagnosed.
  if (in_group[0] + in_group[1] == 0 && in_group[2] > 0) return summarize_p2p(views, known, waited_s);
  if (in_group[0] + in_group[1] == 0) {
    out.headline = "no rank is waiting in a collective (the deadline passed in a wait that is not recorded)";
    for (std::size_t r = 0; r < views.size(); ++r)
      if (!views[r].notes) out.lines.push_back(diagnose(static_cast<int>(r), views, {}, {}, known, waited_s).second);
    return out;
  }
  const CollGroup group = in_group[1] > in_group[0] ? CollGroup::kWorld : CollGroup::kDp;
  std::uint64_t first_seq = UINT64_MAX;
  for (const View& v : views)
    if (v.current && v.current->group == group) first_seq = std::min(first_seq, v.current->seq);
  std::optional<CollRecord> b;
  std::vector<int> waiters, others, went_on;
  double waited = 0;
  for (std::size_t r = 0; r < views.size(); ++r) {
    const View& v = views[r];
    const bool in_it = v.current && v.current->group == group && v.current->seq == first_seq &&
                       (!b || same_call(*v.current, *b));
    if (!in_it) {
      others.push_back(static_cast<int>(r));
      continue;
    }
    if (!b) b = v.current;
    waiters.push_back(static_cast<int>(r));
    waited = std::max(waited, v.waited_s());
  }
  std::vector<std::string> clauses;
  for (int r : others) {
    const View& v = views[static_cast<std::size_t>(r)];
    if (v.notes && !v.member_of(b->group, b->comm)) {  // another TP group's or stage's rank: its #n is not b
      out.lines.push_back(cat(who(r, known), v.current ? cat(" waits in ", describe(*v.current), " since ", fixed(v.waited_s(), 1), " s")
                                                        : " is in no collective",
                              ", outside the communicator of ", describe(*b)));
      continue;
    }
    const CollRecord* mine = v.notes ? v.find(b->group, b->seq) : nullptr;
    if (group == CollGroup::kWorld && mine && same_call(*mine, *b) && mine->state == CollState::kDone) {
      went_on.push_back(r);  // gave rank 0 its part and waits for the next agreement: not a cause
      continue;
    }
    auto [clause, detail] = diagnose(r, views, *b, waiters, known, waited_s);
    clauses.push_back(clause);
    out.lines.push_back(detail);
  }
  const std::string waiting = cat(waiters.size(), waiters.size() == 1 ? " rank (" : " ranks (", rank_list(waiters),
                                  ") waited ", fixed(waited, 1), " s in ", describe(*b));
  if (clauses.empty()) {
    out.headline = cat(describe(*b), " did not complete though no rank stays out of it: ", waiting);
  } else {
    for (const std::string& c : clauses) out.headline += c + "; ";
    // "... never entered all_reduce #10 (...); 3 ranks (0, 2, 3) waited 3.0 s in it"
    const std::string in_b = cat(" in ", describe(*b)), tail = describe(*b) + "; ";
    const bool named = out.headline.size() >= tail.size() &&
                       out.headline.compare(out.headline.size() - tail.size(), tail.size(), tail) == 0;
    out.headline += named ? waiting.substr(0, waiting.size() - in_b.size()) + " in it" : waiting;
  }
  if (!went_on.empty()) {
    out.headline += cat("; ", went_on.size() == 1 ? "rank " : "ranks ", rank_list(went_on),
                        " gave rank 0 their part of it and wait in the next agreement");
  }
  return out;
}

}  // namespace zt::health
