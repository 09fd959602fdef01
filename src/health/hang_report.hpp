// The notes one rank writes when a hang is diagnosed (ckpt.dir/diag/rank-N.txt: who it is, whether its
// own deadline fired, and its flight recorder), and the comparison of every rank's notes into the
// summary the job prints: which rank never entered, skipped or is ahead of which collective, which
// ranks waited in it and how long, and which ranks sent no notes (stopped, dead). Pure text in and
// out, so the comparison is tested without a job (tests/unit/health/test_hang_report.cpp).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/rank_list.hpp"
#include "dist/collective_ring.hpp"

namespace zt::health {

// How long a node's first rank waits for the other nodes to answer its TCP probe (dist/reach.hpp).
constexpr double kReachProbeS = 1.0;

struct RankNotes {
  std::string incident;  // the request answered ("start-up" for the notes written at start-up)
  int rank = 0, world_size = 1;
  std::string host;
  long long pid = 0;
  double written_s = 0;  // wall-clock seconds since the epoch
  bool failed = false;   // this rank's own deadline fired (or another error ended it)
  std::string failure;   // its message, one line
  // A node's first rank in a multi-node job: its TCP probe of every other node, (host, "ok" |
  // "refused" | "unreachable") in the order probed (reach.hpp). Empty on other ranks.
  std::vector<std::pair<std::string, std::string>> reach;
  std::vector<dist::CollRecord> ring;
};

// The rank-N.txt text (a header of "key value" lines, then one line per record, oldest first) and back.
std::string format_notes(const RankNotes& notes);
// nullopt for text that is not (a complete) notes file, e.g. a half-written one from another tool.
std::optional<RankNotes> parse_notes(const std::string& text);

// What the notes of one incident show: notes[r] is rank r's, or nullopt where rank r sent none in
// time; known[r] (same size) is rank r's "node HOST (pid P)" from any notes it ever wrote ("" if none).
// Where the nodes' probes show a node that no other node reaches (a cut link, a lost node), the
// headline names it first, with its ranks; each probing node gets a line.
// `waited_s` is how long the reporter waited for notes.
struct HangSummary {
  std::string headline;            // one line: the cause, the collective, who waited how long
  std::vector<std::string> lines;  // the details, one per rank that does not wait where the others do
};
HangSummary summarize_hang(const std::vector<std::optional<RankNotes>>& notes, const std::vector<std::string>& known,
                           double waited_s);

using zt::rank_list;  // core/rank_list.hpp

}  // namespace zt::health
