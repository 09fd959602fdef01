// Checkpoint names, the JSON of the manifest and training state, and the background write job.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ckpt/layout.hpp"
#include "ckpt/manifest.hpp"
#include "ckpt/write_job.hpp"
#include "core/error.hpp"
#include "ckpt_fixture.hpp"

namespace zt::ckpt {
namespace {

TEST(CkptLayout, NamesRoundTrip) {
  EXPECT_EQ(step_dir_name(12), "step_00000012");
  EXPECT_EQ(step_dir_name(123456789), "step_123456789");
  EXPECT_EQ(optim_file_name(3, 4), "optim/rank_00003_of_00004.h5");
  EXPECT_EQ(parse_step_dir("step_00000012"), 12);
  EXPECT_EQ(parse_step_dir("step_00000012.tmp", true), 12);
  EXPECT_FALSE(parse_step_dir("step_00000012.tmp"));
  EXPECT_FALSE(parse_step_dir("step_"));
  EXPECT_FALSE(parse_step_dir("step_12a"));
  EXPECT_FALSE(parse_step_dir("latest"));
}

TEST(CkptLayout, IntersectIsEmptyWithoutOverlap) {
  EXPECT_EQ(intersect({0, 10}, {5, 10}), (FlatRange{5, 5}));
  EXPECT_EQ(intersect({0, 10}, {10, 3}).numel, 0);
  EXPECT_EQ(intersect({4, 2}, {0, 100}), (FlatRange{4, 2}));
}

TEST(CkptManifest, JsonRoundTrip) {
  Manifest m{kFormatVersion, 7, 2, 3, test::tiny_model(), {}, {{"model.h5", 123, "ab"}, {"state.json", 9, "cd"}}};
  m.rank_ranges = {test::ranges_for(m.model, 2, 0), test::ranges_for(m.model, 2, 1)};
  const Manifest back = parse_manifest(manifest_json(m), "test");
  EXPECT_EQ(back.step, 7);
  EXPECT_EQ(back.world_size, 2);
  EXPECT_EQ(back.zero_stage, 3);
  EXPECT_EQ(back.model.params, m.model.params);
  EXPECT_EQ(back.model.units, m.model.units);
  EXPECT_EQ(back.model.hyper_value("n_layer"), 1);
  EXPECT_EQ(back.rank_ranges, m.rank_ranges);
  ASSERT_EQ(back.files.size(), 2u);
  EXPECT_EQ(back.files[1].path, "state.json");
  EXPECT_EQ(back.total_bytes(), 132u);
  EXPECT_EQ(manifest_json(back), manifest_json(m));
}

// The manifest carries a checksum of itself: one changed digit of an offset (which the files' SHA-256s do
// not cover) is refused as a damaged manifest; a manifest without one (an older writer) still reads.
TEST(CkptManifest, ItsOwnChecksumCatchesAChangedField) {
  Manifest m{kFormatVersion, 7, 2, 3, test::tiny_model(), {}, {{"model.h5", 123, "ab"}}};
  m.rank_ranges = {test::ranges_for(m.model, 2, 0), test::ranges_for(m.model, 2, 1)};
  const std::string text = manifest_json(m);
  ASSERT_NE(text.find("\"manifest_sha256\""), std::string::npos);
  std::string flipped = text;
  const std::size_t at = flipped.find("\"zero_stage\": 3");
  ASSERT_NE(at, std::string::npos);
  flipped[at + 14] = '2';
  try {
    parse_manifest(flipped, "MANIFEST.json");
    ADD_FAILURE() << "a changed zero_stage read as sound";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("MANIFEST.json: its content does not match its manifest_sha256"), std::string::npos)
        << e.what();
  }
  std::string older = text;
  const std::size_t line = older.find(" \"manifest_sha256\"");
  older.erase(line, older.find('\n', line) + 1 - line);
  EXPECT_EQ(parse_manifest(older, "MANIFEST.json").zero_stage, 3);
}

// A tensor-parallel shard of a row-parallel matrix is one range per row: the manifest writes each run
// of equal ranges at equal strides as one [offset, numel, stride, count] group (format_version 2), and
// a manifest without such a run stays version 1, range for range.
TEST(CkptManifest, StridedRunsOfRangesAreWrittenAsOneGroup) {
  Manifest m{kFormatVersion, 5, 2, 1, test::tiny_model(), {}, {}};
  std::vector<FlatRange> rows;
  for (std::int64_t row = 0; row < 1000; ++row) rows.push_back({100 + row * 64, 32});  // the left half of each row
  rows.push_back({64100, 7});
  m.rank_ranges = {rows, {{0, 50}, {60, 10}}};
  const std::string text = manifest_json(m);
  EXPECT_NE(text.find("\"format_version\": 2"), std::string::npos);
  EXPECT_LT(text.size(), 2000u) << "1000 rows should take one group, not 1000 entries";
  const Manifest back = parse_manifest(text, "test");
  EXPECT_EQ(back.rank_ranges, m.rank_ranges);
  EXPECT_EQ(manifest_json(back), text);

  m.rank_ranges = {{{0, 50}, {60, 10}, {70, 10}}, {{100, 4}}};  // only two at one stride: no group
  const std::string plain = manifest_json(m);
  EXPECT_NE(plain.find("\"format_version\": 1"), std::string::npos);
  EXPECT_EQ(parse_manifest(plain, "test").rank_ranges, m.rank_ranges);

  std::string overlapping = text;  // stride below numel: the group would overlap itself
  const std::size_t stride_at = overlapping.find("64,", overlapping.find("\"ranks\""));
  ASSERT_NE(stride_at, std::string::npos);
  overlapping.replace(stride_at, 3, "16,");
  EXPECT_EQ(nlohmann::json::parse(overlapping)["ranks"][0]["ranges"][0][2], 16);  // the group's stride, nothing else
  EXPECT_THROW(parse_manifest(overlapping, "x/MANIFEST.json"), CheckpointError);
}

TEST(CkptManifest, RunIdRoundTripsAndIsOptional) {
  Manifest m{kFormatVersion, 3, 1, 0, test::tiny_model(), {{{0, 17}}}, {}, "20261124T161410Z-node7-4242-9f3a06c1"};
  const std::string text = manifest_json(m);
  EXPECT_NE(text.find("\"run_id\": \"20261124T161410Z-node7-4242-9f3a06c1\""), std::string::npos);
  EXPECT_EQ(parse_manifest(text, "test").run_id, m.run_id);
  // A manifest from before run ids (no such field) still loads: owner unknown.
  m.run_id.clear();
  const std::string old_text = manifest_json(m);
  EXPECT_EQ(old_text.find("run_id"), std::string::npos);
  EXPECT_EQ(parse_manifest(old_text, "test").run_id, "");
}

TEST(CkptManifest, RejectsOtherFormatsAndNewerVersionsByName) {
  Manifest m{kFormatVersion, 1, 1, 0, test::tiny_model(), {{{0, 17}}}, {}};
  std::string text = manifest_json(m);
  std::string newer = text;
  newer.replace(newer.find("\"format_version\": 1"), 19, "\"format_version\": 9");
  EXPECT_THROW(
      {
        try {
          parse_manifest(newer, "x/MANIFEST.json");
        } catch (const CheckpointError& e) {
          EXPECT_NE(std::string(e.what()).find("x/MANIFEST.json: format_version 9 is newer"), std::string::npos);
          throw;
        }
      },
      CheckpointError);
  EXPECT_THROW(parse_manifest("{\"format\": \"ztrain-checkpoint\"", "x"), CheckpointError);
  EXPECT_THROW(parse_manifest("{\"format\": \"other\"}", "x"), CheckpointError);
}

TEST(CkptManifest, StateRoundTrip) {
  TrainState s;
  s.step = 5;
  s.tokens = 640;
  s.windows_consumed = 40;
  s.windows_per_epoch = 30;
  s.global_batch = 8;
  s.seq_len = 16;
  s.seed = 1337;
  s.loss_scale = {true, 1024, 17};
  s.config_ini = "[train]\nseed = 1337\n";
  s.git_revision = "abc";
  const TrainState b = parse_state(state_json(s), "state.json");
  EXPECT_EQ(b.step, 5);
  EXPECT_EQ(b.tokens, 640u);
  EXPECT_EQ(b.windows_consumed, 40u);
  EXPECT_EQ(b.windows_per_epoch, 30u);
  EXPECT_EQ(b.seed, 1337u);
  EXPECT_TRUE(b.loss_scale.enabled);
  EXPECT_EQ(b.loss_scale.scale, 1024);
  EXPECT_EQ(b.loss_scale.good_steps, 17);
  EXPECT_EQ(b.config_ini, s.config_ini);
  EXPECT_NE(state_json(s).find("\"epoch\": 1"), std::string::npos);
}

TEST(CkptManifest, RankRecordWithPartsRoundTrips) {
  RankRecord r{1, {{0, 4}}, {{"optim/rank_00001_of_00002.h5", 10, "ab"}}, 0.5};
  RankRecord critic{1, {{0, 3}, {7, 2}}, {{"optim/rank_00001_of_00002.h5", 8, "cd"}}, 0};
  critic.dir = "critic";
  r.parts.push_back(critic);
  const RankRecord back = parse_rank_record(rank_record_json(r));
  EXPECT_EQ(back.rank, 1);
  EXPECT_TRUE(back.dir.empty());
  ASSERT_EQ(back.parts.size(), 1u);
  EXPECT_EQ(back.parts[0].dir, "critic");
  EXPECT_EQ(back.parts[0].ranges.size(), 2u);
  EXPECT_EQ(back.parts[0].files.at(0).sha256, "cd");
  EXPECT_TRUE(parse_rank_record(rank_record_json(RankRecord{0, {}, {}, 0})).parts.empty());
}

TEST(CkptWriteJob, HandsBackTheRecordOrTheException) {
  WriteJob ok([] { return RankRecord{3, {{0, 1}}, {}, 0.5}; });
  EXPECT_EQ(ok.wait().rank, 3);
  EXPECT_TRUE(ok.done());
  WriteJob bad([]() -> RankRecord { throw IoError("disk full"); });
  EXPECT_THROW(bad.wait(), IoError);
}

}  // namespace
}  // namespace zt::ckpt
