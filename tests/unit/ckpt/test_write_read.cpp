// Writing a checkpoint for W ranks and reading it back for any other partition (the intersection of
// saved and wanted ranges), offline resharding, verification of damage, resume selection and pruning.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "ckpt/reader.hpp"
#include "ckpt/ownership.hpp"
#include "ckpt/reshard.hpp"
#include "ckpt/verify.hpp"
#include "ckpt_fixture.hpp"
#include "core/error.hpp"
#include "io/hdf5.hpp"

namespace zt::ckpt {
namespace {
using test::TempDir;

bool mentions(const std::vector<std::string>& problems, const std::string& text) {
  for (const std::string& p : problems)
    if (p.find(text) != std::string::npos) return true;
  return false;
}

TEST(CkptWriteRead, AnyRangeReadsBackFromAnyWorldSize) {
  for (int world : {1, 2, 3, 5, 20}) {  // 20 ranks: some own nothing of the smaller units
    TempDir tmp;
    const fs::path dir = test::write_checkpoint(tmp.path, 4, world);
    EXPECT_TRUE(verify(dir).empty()) << "world " << world;
    const Checkpoint c(dir);
    for (StateKind kind : kStateKinds)
      for (FlatRange want : {FlatRange{0, 17}, FlatRange{5, 3}, FlatRange{12, 2}, FlatRange{16, 1}}) {
        std::vector<float> got(want.numel);
        c.read(kind, want, got.data());
        for (std::int64_t i = 0; i < want.numel; ++i)
          ASSERT_EQ(got[i], test::value_of(kind, want.offset + i)) << "world " << world << " element " << want.offset + i;
      }
    EXPECT_EQ(c.state().tokens, 400u);
  }
}

// A checkpoint that verifies (its hashes are of the bytes it holds) but holds a NaN or an infinity: read
// refuses it, naming the rank file, the state and the tensor, before any value reaches a model.
TEST(CkptWriteRead, NonFiniteStateIsRefusedNamingFileAndTensor) {
  TempDir tmp;
  const fs::path dir = test::write_checkpoint(tmp.path, 4, 2, "", {StateKind::kMaster, 9, std::nanf("")});
  EXPECT_TRUE(verify(dir).empty());
  const Checkpoint c(dir);
  std::vector<float> flat(17);
  try {
    c.read(StateKind::kMaster, {0, 17}, flat.data());
    FAIL() << "a NaN master weight was read";
  } catch (const InputError& e) {
    const std::string m = e.what();
    // b.weight starts at flat 6: element 9 is its 4th; unit 1 [6, 13) is split 4 + 3: rank 0 holds 6-9
    EXPECT_NE(m.find("optim/rank_00000_of_00002.h5 holds nan in master of tensor b.weight (element 3)"),
              std::string::npos) << m;
  }
  std::vector<float> other(17);
  c.read(StateKind::kExpAvg, {0, 17}, other.data());  // the other states are sound
  const fs::path inf = test::write_checkpoint(tmp.path, 5, 1, "", {StateKind::kExpAvgSq, 16, INFINITY});
  EXPECT_THROW(Checkpoint(inf).read(StateKind::kExpAvgSq, {15, 2}, other.data()), InputError);
}

TEST(CkptWriteRead, ModelFileHoldsHfShapesWithoutPaddedRows) {
  TempDir tmp;
  const fs::path dir = test::write_checkpoint(tmp.path, 1, 2);
  const io::H5File f = io::H5File::open_read((dir / kModelFile).string());
  EXPECT_EQ(f.open_dataset("a.weight").dims(), (std::vector<std::uint64_t>{2, 3}));
  std::vector<float> b(5);  // b.weight: 7 flat elements, 5 real
  const io::H5Dataset ds = f.open_dataset("b.weight");
  ASSERT_EQ(ds.dims(), std::vector<std::uint64_t>{5});
  ds.read_all(b);
  EXPECT_EQ(b[4], test::value_of(StateKind::kMaster, 10));
}

TEST(CkptWriteRead, ReshardRoundTripIsByteIdentical) {
  TempDir tmp;
  const fs::path dir = test::write_checkpoint(tmp.path, 3, 2);
  const ModelDesc m = test::tiny_model();
  reshard(Checkpoint(dir), 3, [&](int r) { return test::ranges_for(m, 3, r); }, tmp.path / "w3");
  EXPECT_TRUE(verify(tmp.path / "w3").empty());
  reshard(Checkpoint(tmp.path / "w3"), 2, [&](int r) { return test::ranges_for(m, 2, r); }, tmp.path / "w2");
  for (int r = 0; r < 2; ++r) {
    const std::string name = optim_file_name(r, 2);
    EXPECT_EQ(file_record(dir, name).sha256, file_record(tmp.path / "w2", name).sha256) << name;
  }
}

TEST(CkptVerify, NamesEveryKindOfDamage) {
  TempDir tmp;
  const fs::path dir = test::write_checkpoint(tmp.path, 2, 2);
  const fs::path shard = dir / optim_file_name(1, 2);
  fs::resize_file(shard, fs::file_size(shard) - 10);
  {
    std::fstream f(dir / kModelFile, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(dir / kModelFile) / 2));
    f.put('\x7f');
  }
  const std::vector<std::string> problems = verify(dir);
  EXPECT_TRUE(mentions(problems, "optim/rank_00001_of_00002.h5: ")) << problems.size();
  EXPECT_TRUE(mentions(problems, "(truncated)"));
  EXPECT_TRUE(mentions(problems, "model.h5: SHA-256 differs"));
  fs::remove(dir / kStateFile);
  EXPECT_TRUE(mentions(verify(dir), "state.json: missing"));
  fs::remove(dir / kManifestFile);
  EXPECT_TRUE(mentions(verify(dir), "MANIFEST.json: missing"));
  EXPECT_TRUE(mentions(verify(tmp.path / "nothing"), "not a directory"));
}

// PPO's critic (critic/): a checkpoint of its own inside the step directory, listed in the outer manifest.
TEST(CkptCritic, VerifyChecksTheCriticsFilesAndStructure) {
  TempDir tmp;
  const fs::path dir = test::write_checkpoint(tmp.path, 2, 2, "run", {}, /*critic=*/true);
  EXPECT_TRUE(verify(dir).empty());
  EXPECT_TRUE(has_critic(Checkpoint(dir).manifest()));
  EXPECT_FALSE(has_critic(Checkpoint(test::write_checkpoint(tmp.path, 1, 2)).manifest()));
  EXPECT_TRUE(verify(dir / kCriticDir).empty());  // on its own too
  {
    std::fstream f(dir / kCriticDir / optim_file_name(1, 2), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(dir / kCriticDir / optim_file_name(1, 2)) / 2));
    f.put('\x7f');
  }
  EXPECT_TRUE(mentions(verify(dir), "critic/optim/rank_00001_of_00002.h5: SHA-256 differs"));
  fs::remove(dir / kCriticDir / kStateFile);
  EXPECT_TRUE(mentions(verify(dir), "critic/state.json: missing"));
}

TEST(CkptCritic, ReshardCarriesTheCriticInTheSameCommit) {
  TempDir tmp;
  const fs::path dir = test::write_checkpoint(tmp.path, 3, 2, "run", {}, /*critic=*/true);
  const ModelDesc m = test::tiny_model();
  const RangesOf three = [&](int r) { return test::ranges_for(m, 3, r); };
  EXPECT_THROW(reshard(Checkpoint(dir), 3, three, tmp.path / "none"), CheckpointError);  // no partition for it
  EXPECT_FALSE(fs::exists(tmp.path / "none"));
  reshard(Checkpoint(dir), 3, three, tmp.path / "w3", three);
  EXPECT_TRUE(verify(tmp.path / "w3").empty());
  EXPECT_TRUE(fs::exists(tmp.path / "w3" / kCriticDir / optim_file_name(2, 3)));
  const Checkpoint critic(tmp.path / "w3" / kCriticDir);
  EXPECT_EQ(critic.manifest().world_size, 3);
  EXPECT_EQ(critic.read_master(), Checkpoint(dir / kCriticDir).read_master());
}

TEST(CkptVerify, NewestSoundSkipsDamagedAndUncommitted) {
  TempDir tmp;
  test::write_checkpoint(tmp.path, 2, 1);
  test::write_checkpoint(tmp.path, 4, 1);
  const fs::path bad = test::write_checkpoint(tmp.path, 6, 1);
  fs::remove(bad / kModelFile);
  fs::create_directories(tmp.path / "step_00000008.tmp");
  fs::create_directories(tmp.path / "unrelated");
  const ResumeSearch s = find_newest_sound(tmp.path);
  EXPECT_EQ(s.step, 4);
  EXPECT_EQ(s.chosen.filename(), "step_00000004");
  ASSERT_EQ(s.skipped.size(), 2u);
  EXPECT_EQ(s.skipped[0].path.filename(), "step_00000008.tmp");
  EXPECT_TRUE(mentions(s.skipped[0].problems, "never committed"));
  EXPECT_TRUE(mentions(s.skipped[1].problems, "model.h5: missing"));
  EXPECT_TRUE(find_newest_sound(tmp.path / "none").chosen.empty());
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const StepDir& d : list_step_dirs(dir)) out.push_back(d.path.filename().string());
  return out;
}

TEST(CkptPrune, KeepsTheNewestAndNeverTheOneJustWritten) {
  TempDir tmp;
  for (int step : {1, 2, 3, 4, 5}) test::write_checkpoint(tmp.path, step, 1, "run-a");
  fs::create_directories(tmp.path / "step_00000009.tmp");
  // The one just written (step 3: a run resumed from an older checkpoint) is kept whatever its age.
  const Pruned gone = prune(tmp.path, 2, tmp.path / "step_00000003", "run-a");
  EXPECT_EQ(gone.deleted.size(), 4u);
  EXPECT_TRUE(gone.foreign.empty());
  EXPECT_EQ(names_in(tmp.path), (std::vector<std::string>{"step_00000005", "step_00000003"}));
  EXPECT_TRUE(prune(tmp.path, 0, tmp.path / "step_00000005", "run-a").deleted.empty());  // keep=0: keep all
}

TEST(CkptPrune, DeletesOnlyTheCurrentRunsCheckpoints) {
  TempDir tmp;
  test::write_checkpoint(tmp.path, 1, 1, "run-b");
  test::write_checkpoint(tmp.path, 2, 1);  // before run ids: owner unknown
  for (int step : {3, 4, 5, 6}) test::write_checkpoint(tmp.path, step, 1, "run-a");
  test::write_checkpoint(tmp.path, 7, 1, "run-b");
  const Pruned p = prune(tmp.path, 2, tmp.path / "step_00000006", "run-a");
  EXPECT_EQ(p.deleted.size(), 2u);  // steps 3 and 4: run-a's beyond the 2 newest
  ASSERT_EQ(p.foreign.size(), 3u);  // steps 7, 2 and 1, whatever their age
  EXPECT_EQ(p.foreign[0].filename(), "step_00000007");
  EXPECT_EQ(names_in(tmp.path),
            (std::vector<std::string>{"step_00000007", "step_00000006", "step_00000005", "step_00000002", "step_00000001"}));
  for (const char* kept : {"step_00000001", "step_00000002", "step_00000007"}) EXPECT_TRUE(verify(tmp.path / kept).empty());
  EXPECT_EQ(run_id_of(tmp.path / "step_00000007"), "run-b");
  EXPECT_EQ(run_id_of(tmp.path / "step_00000002"), "");
  EXPECT_EQ(run_id_of(tmp.path / "missing"), "");
}

TEST(CkptWriteRead, CommitReplacesAnOlderDirectoryOfTheSameStep) {
  TempDir tmp;
  const fs::path dir = test::write_checkpoint(tmp.path, 2, 2);
  fs::remove(dir / kManifestFile);  // a damaged step_2, e.g. from a run that resumed before it
  test::write_checkpoint(tmp.path, 2, 3);
  EXPECT_TRUE(verify(dir).empty());
  EXPECT_EQ(Checkpoint(dir).manifest().world_size, 3);
}

}  // namespace
}  // namespace zt::ckpt
