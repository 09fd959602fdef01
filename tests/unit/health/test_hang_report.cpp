// The flight recorder (dist/collective_ring.hpp) and the hang report's comparison of the ranks' notes
// (health/hang_report.hpp): which rank never entered, skipped, is ahead of or disagrees on the
// collective the others wait in, and which sent no notes.
#include <gtest/gtest.h>

#include "dist/collective_ring.hpp"
#include "health/hang_report.hpp"

namespace zt::health {
namespace {
using dist::CollGroup;
using dist::CollKind;
using dist::CollState;

TEST(CollectiveRing, NumbersPerGroupAndCallsPerContextKeepsTheLast) {
  dist::CollectiveRing ring;
  auto a = ring.enter(CollGroup::kDp, CollKind::kAllReduce, 40, "step 1 micro-batch 1/1");
  ring.enter(CollGroup::kWorld, CollKind::kAgreement, 8, "step 1 micro-batch 1/1");
  ring.enter(CollGroup::kDp, CollKind::kAllGather, 16, "step 1 optimizer");
  ring.leave(a);
  ring.leave(a, CollState::kTimedOut);  // already left: unchanged
  const auto r = ring.snapshot();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].seq, 1u);
  EXPECT_EQ(r[0].state, CollState::kDone);
  EXPECT_GE(r[0].leave_s, r[0].enter_s);
  EXPECT_EQ(r[1].seq, 1u);  // the world's own numbering
  EXPECT_EQ(r[1].call, 2u);
  EXPECT_EQ(r[2].seq, 2u);
  EXPECT_EQ(r[2].call, 1u);  // a new context
  EXPECT_EQ(r[2].state, CollState::kOpen);
  EXPECT_STREQ(r[2].context, "step 1 optimizer");
  for (int i = 0; i < 2000; ++i) ring.enter(CollGroup::kDp, CollKind::kBroadcast, 4, std::string(300, 'x'));
  const auto full = ring.snapshot();
  ASSERT_EQ(full.size(), dist::CollectiveRing::kCapacity);
  EXPECT_EQ(full.back().seq, 2002u);
  EXPECT_EQ(full.front().seq, 2002u - dist::CollectiveRing::kCapacity + 1);
  EXPECT_EQ(std::string(full.back().context).size(), dist::CollRecord::kContextChars);
}

// Rank notes from a script of collectives: each {group, kind, bytes, context, left?}.
struct Step {
  CollGroup group;
  CollKind kind;
  std::uint64_t bytes;
  const char* context;
  bool left;
  std::uint32_t comm = 0;  // the communicator's label (0: the root's)
};
RankNotes notes_of(int rank, const std::vector<Step>& steps) {
  dist::CollectiveRing ring;
  for (const Step& s : steps) {
    auto t = ring.enter(s.group, s.kind, s.bytes, s.context, s.comm);
    if (s.left) ring.leave(t);
  }
  RankNotes n;
  n.incident = "rank 0 pid 1 at 5";
  n.rank = rank, n.world_size = 4, n.host = "n0" + std::to_string(rank), n.pid = 100 + rank;
  n.written_s = dist::wall_seconds();
  n.ring = ring.snapshot();
  return n;
}

const Step kBoundary{CollGroup::kDp, CollKind::kAllReduce, 12, "step 3 start", true};
const Step kBucket{CollGroup::kDp, CollKind::kAllReduce, 4096, "step 3 micro-batch 1/1", false};
const Step kLoss{CollGroup::kDp, CollKind::kAllReduce, 8, "step 3 gradient reduction", false};
const Step kCommit{CollGroup::kWorld, CollKind::kAgreement, 8, "step 3 checkpoint start", false};

std::vector<std::string> known() { return {"node n00", "node n01", "node n02", "node n03"}; }

TEST(HangReport, NotesSurviveTheirFile) {
  RankNotes n = notes_of(2, {kBoundary, kBucket});
  n.failed = true;
  n.failure = "all_reduce did not complete\nwithin 3 s";
  const auto back = parse_notes(format_notes(n));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->incident, n.incident);
  EXPECT_EQ(back->rank, 2);
  EXPECT_EQ(back->host, "n02");
  EXPECT_TRUE(back->failed);
  EXPECT_EQ(back->failure, "all_reduce did not complete within 3 s");
  ASSERT_EQ(back->ring.size(), 2u);
  EXPECT_EQ(back->ring[1].bytes, 4096u);
  EXPECT_EQ(back->ring[1].state, CollState::kOpen);
  EXPECT_STREQ(back->ring[1].context, "step 3 micro-batch 1/1");
  const std::string text = format_notes(n);
  EXPECT_FALSE(parse_notes(text.substr(0, text.size() - 10)));  // cut short while written
  RankNotes empty = notes_of(1, {});
  EXPECT_TRUE(parse_notes(format_notes(empty)));
}

TEST(HangReport, NamesTheRankThatNeverEntered) {
  std::vector<std::optional<RankNotes>> n;
  for (int r = 0; r < 4; ++r) n.push_back(notes_of(r, r == 1 ? std::vector<Step>{kBoundary} : std::vector<Step>{kBoundary, kBucket}));
  const HangSummary s = summarize_hang(n, known(), 0.2);
  EXPECT_NE(s.headline.find("rank 1 on node n01 never entered all_reduce #2 (step 3 micro-batch 1/1, call 1; 4096 B); "
                            "3 ranks (0, 2, 3) waited"),
            std::string::npos)
      << s.headline;
  ASSERT_EQ(s.lines.size(), 1u);
  EXPECT_NE(s.lines[0].find("it last left all_reduce #1 (step 3 start"), std::string::npos) << s.lines[0];
}

// parallel.tp=2 on 4 ranks (sweep 19 F2): TP groups {0, 1} and {2, 3} are communicators A and B; rank 1
// never enters A's all-reduce #2 that rank 0 waits in. Ranks 2 and 3 are in B's #2: outside A, they are
// listed with where they wait, never said to have "left" or "disagreed on" A's collective.
TEST(HangReport, ComparesAWaiterOnlyWithItsCommunicatorsRanks) {
  const std::uint32_t a = dist::split_label(0, 1, 0), b = dist::split_label(0, 1, 1);
  EXPECT_NE(a, b);
  EXPECT_NE(dist::split_label(0, 2, 0), a);  // another split of the same parent, the same color
  const Step tp_a{CollGroup::kDp, CollKind::kAllReduce, 4096, "step 3 micro-batch 1/2", false, a};
  const Step tp_b_done{CollGroup::kDp, CollKind::kAllReduce, 4096, "step 3 micro-batch 1/2", true, b};
  const Step tp_b_next{CollGroup::kDp, CollKind::kAllReduce, 4096, "step 3 micro-batch 2/2", false, b};
  const Step boundary_a{CollGroup::kDp, CollKind::kAllReduce, 12, "step 3 start", true, a};
  const Step boundary_b{CollGroup::kDp, CollKind::kAllReduce, 12, "step 3 start", true, b};
  std::vector<std::optional<RankNotes>> n;
  n.push_back(notes_of(0, {boundary_a, tp_a}));
  n.push_back(notes_of(1, {boundary_a}));
  n.push_back(notes_of(2, {boundary_b, tp_b_done, tp_b_next}));
  n.push_back(notes_of(3, {boundary_b, tp_b_done, tp_b_next}));
  const HangSummary s = summarize_hang(n, known(), 0.2);
  EXPECT_NE(s.headline.find("rank 1 on node n01 never entered all_reduce #2 (step 3 micro-batch 1/2"), std::string::npos)
      << s.headline;
  EXPECT_EQ(s.headline.find("rank 2"), std::string::npos) << s.headline;
  EXPECT_EQ(s.headline.find("rank 3"), std::string::npos) << s.headline;
  bool listed = false;
  for (const std::string& line : s.lines)
    listed = listed || line.find("rank 2 on node n02 waits in all_reduce #3 (step 3 micro-batch 2/2") != std::string::npos;
  EXPECT_TRUE(listed) << (s.lines.empty() ? "" : s.lines.back());
  const auto back = parse_notes(format_notes(*n[2]));  // the label survives the notes file
  ASSERT_TRUE(back);
  EXPECT_EQ(back->ring.back().comm, b);
}

TEST(HangReport, NamesARankWithoutNotes) {
  std::vector<std::optional<RankNotes>> n;
  for (int r = 0; r < 4; ++r) n.push_back(notes_of(r, {kBoundary, kBucket}));
  n[3].reset();
  const HangSummary s = summarize_hang(n, known(), 2.0);
  EXPECT_NE(s.headline.find("rank 3 on node n03 sent no notes within 2.0 s"), std::string::npos) << s.headline;
  EXPECT_NE(s.headline.find("3 ranks (0-2) waited"), std::string::npos) << s.headline;
}

// Pipeline stages (parallel.pp) wait in point-to-point transfers, recorded in their own group: the
// stage its neighbours wait for is named first, then each waiter with its transfer; notes keep them.
TEST(HangReport, NamesTheStageThatNeverSent) {
  const Step recv{CollGroup::kP2p, CollKind::kRecv, 2048, "step 3 pipeline stage 2 forward micro-batch 1/4, from rank 1 of 4", false};
  const Step send{CollGroup::kP2p, CollKind::kSend, 2048, "step 3 pipeline stage 0 forward micro-batch 1/4, to rank 1 of 4", false};
  std::vector<std::optional<RankNotes>> n;
  n.push_back(notes_of(0, {kBoundary, send}));
  n.push_back(notes_of(1, {kBoundary}));
  n.push_back(notes_of(2, {kBoundary, recv}));
  n.push_back(std::nullopt);  // stage 3: dead
  const auto back = parse_notes(format_notes(*n[2]));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->ring[1].group, CollGroup::kP2p);
  EXPECT_EQ(back->ring[1].kind, CollKind::kRecv);
  const HangSummary s = summarize_hang(n, known(), 2.0);
  EXPECT_NE(s.headline.find("rank 1 on node n01 is in no transfer or collective"), std::string::npos) << s.headline;
  EXPECT_NE(s.headline.find("rank 3 on node n03 sent no notes within 2.0 s"), std::string::npos) << s.headline;
  EXPECT_NE(s.headline.find("2 ranks wait in pipeline transfers: rank 0 on node n00 waited"), std::string::npos) << s.headline;
  EXPECT_NE(s.headline.find("p2p recv #1 (step 3 pipeline stage 2 forward micro-batch 1/4, from rank 1 of 4, call 1; 2048 B)"),
            std::string::npos) << s.headline;
}

TEST(HangReport, NamesASkippedCollectiveAndARankAhead) {
  Step done_bucket = kBucket;
  done_bucket.left = true;
  std::vector<std::optional<RankNotes>> n;
  n.push_back(notes_of(0, {kBoundary, kCommit}));              // skipped #2, went on to the world's #1
  n.push_back(notes_of(1, {kBoundary, kBucket}));
  n.push_back(notes_of(2, {kBoundary, kBucket}));
  n.push_back(notes_of(3, {kBoundary, done_bucket, kLoss}));   // left #2 (a mismatched partner), in #3
  const HangSummary s = summarize_hang(n, known(), 0.1);
  EXPECT_NE(s.headline.find("rank 0 on node n00 skipped all_reduce #2 (step 3 micro-batch 1/1, call 1; 4096 B): it "
                            "went on to world agreement #1 (step 3 checkpoint start, call 1; 8 B), which no other rank entered"),
            std::string::npos)
      << s.headline;
  EXPECT_NE(s.headline.find("rank 3 on node n03 left all_reduce #2"), std::string::npos) << s.headline;
  EXPECT_NE(s.headline.find("2 ranks (1, 2) waited"), std::string::npos) << s.headline;
}

// Rank 0 collects the world's agreements: the ranks that gave it their part wait in the next one,
// and are not the cause; rank 0 waits in the earlier one for the rank that never entered it.
TEST(HangReport, AtTheWorldsAgreementsNamesWhoRankZeroWaitsFor) {
  const Step records{CollGroup::kWorld, CollKind::kGather, 400, "step 2 checkpoint commit (file records)", false};
  Step sent = records;
  sent.left = true;
  const Step commit{CollGroup::kWorld, CollKind::kAgreement, 8, "step 2 checkpoint commit", false};
  std::vector<std::optional<RankNotes>> n;
  n.push_back(notes_of(0, {kBoundary, records}));
  n.push_back(notes_of(1, {kBoundary}));
  n.push_back(notes_of(2, {kBoundary, sent, commit}));
  n.push_back(notes_of(3, {kBoundary, sent, commit}));
  const HangSummary s = summarize_hang(n, known(), 0.1);
  EXPECT_EQ(s.headline.rfind("rank 1 on node n01 never entered world gather #1 (step 2 checkpoint commit (file records), "
                             "call 1; 400 B); 1 rank (0) waited ", 0), 0u)
      << s.headline;
  EXPECT_NE(s.headline.find("; ranks 2, 3 gave rank 0 their part of it and wait in the next agreement"), std::string::npos)
      << s.headline;
  EXPECT_EQ(s.lines.size(), 1u);
}

TEST(HangReport, NamesDisagreeingCollectives) {
  const Step other{CollGroup::kDp, CollKind::kReduceScatter, 4096, "step 3 micro-batch 1/1", false};
  std::vector<std::optional<RankNotes>> n;
  for (int r = 0; r < 4; ++r) n.push_back(notes_of(r, {kBoundary, r == 2 ? other : kBucket}));
  const HangSummary s = summarize_hang(n, known(), 0.1);
  EXPECT_NE(s.headline.find("ranks disagree on dp collective #2: rank 2 on node n02 entered reduce_scatter #2"),
            std::string::npos)
      << s.headline;
  EXPECT_NE(s.headline.find("while ranks 0, 1, 3 wait in all_reduce #2"), std::string::npos) << s.headline;
}

TEST(HangReport, ListsRanksAsRanges) {
  EXPECT_EQ(rank_list({0, 2, 3}), "0, 2, 3");
  EXPECT_EQ(rank_list({1, 2, 3, 7}), "1-3, 7");
  EXPECT_EQ(rank_list({5}), "5");
}


// A cut link (issue 35): every rank waits in the same collective, and the nodes' TCP probes name the one
// node that answers no other (4 nodes of one rank each here: hosts n00..n03).
std::vector<std::optional<RankNotes>> all_waiting_with_probes(const std::vector<std::vector<const char*>>& verdicts) {
  std::vector<std::optional<RankNotes>> n;
  for (int r = 0; r < 4; ++r) {
    RankNotes notes = notes_of(r, {kBoundary, kBucket});
    for (std::size_t t = 0, i = 0; t < 4; ++t)
      if (static_cast<int>(t) != r) notes.reach.emplace_back("n0" + std::to_string(t), verdicts[static_cast<std::size_t>(r)][i++]);
    n.push_back(notes);
  }
  return n;
}

TEST(HangReport, NamesTheNodeNoOtherReaches) {
  const auto n = all_waiting_with_probes({{"ok", "unreachable", "ok"},
                                          {"ok", "unreachable", "ok"},
                                          {"unreachable", "unreachable", "unreachable"},
                                          {"ok", "ok", "unreachable"}});
  const auto back = parse_notes(format_notes(*n[2]));  // the probe survives the notes file
  ASSERT_TRUE(back);
  ASSERT_EQ(back->reach.size(), 3u);
  EXPECT_EQ(back->reach[1], (std::pair<std::string, std::string>("n01", "unreachable")));
  const HangSummary s = summarize_hang(n, known(), 1.5);
  EXPECT_EQ(s.headline.rfind("node n02 (rank 2) is unreachable: no TCP answer between it and any other node within 1.0 s, "
                             "while the others reach each other: its link, switch port or power is down; all_reduce #2 ", 0), 0u)
      << s.headline;
  EXPECT_NE(s.headline.find("4 ranks (0-3) waited"), std::string::npos) << s.headline;
  ASSERT_EQ(s.lines.size(), 4u);
  EXPECT_EQ(s.lines[2], "TCP probe from n02 (rank 2, 1.0 s): n00 unreachable, n01 unreachable, n03 unreachable");
}

TEST(HangReport, AllNodesAnsweringOrTwoCutApartNameNoCulpritOrBoth) {
  const auto fine = all_waiting_with_probes({{"ok", "ok", "ok"}, {"ok", "refused", "ok"}, {"ok", "ok", "ok"}, {"ok", "ok", "ok"}});
  const HangSummary s = summarize_hang(fine, known(), 1.5);
  EXPECT_EQ(s.headline.find("unreachable"), std::string::npos) << s.headline;
  EXPECT_EQ(s.headline.find("reaches no other"), std::string::npos) << s.headline;
  EXPECT_NE(s.lines[1].find("n02 refused"), std::string::npos) << s.lines[1];  // a live node, its process gone
  // Every pair cut: nobody can tell whose link failed; every node is named as reaching no other.
  const auto none = all_waiting_with_probes({{"unreachable", "unreachable", "unreachable"},
                                             {"unreachable", "unreachable", "unreachable"},
                                             {"unreachable", "unreachable", "unreachable"},
                                             {"unreachable", "unreachable", "unreachable"}});
  const HangSummary p = summarize_hang(none, known(), 1.5);
  EXPECT_NE(p.headline.find("node n00 (rank 0) reaches no other node and none reaches it"), std::string::npos) << p.headline;
  EXPECT_NE(p.headline.find("node n03 (rank 3) reaches no other node"), std::string::npos) << p.headline;
  // Single-node jobs (no probes): the report is as before, with no probe lines.
  std::vector<std::optional<RankNotes>> plain;
  for (int r = 0; r < 4; ++r) plain.push_back(notes_of(r, {kBoundary, kBucket}));
  EXPECT_TRUE(summarize_hang(plain, known(), 1.5).lines.empty());
}
}  // namespace
}  // namespace zt::health
