// Connects the ZeRO engine's state to the checkpoint format (ckpt/): which flat ranges this rank
// saves (its slices of the W-rank partition, at every stage), the snapshot to host memory, the write
// (here or on a background thread, ckpt.async), the collective commit and pruning; and resume, which
// loads any checkpoint's master weights and moments into this run's partition.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/state.hpp"
#include "ckpt/write_job.hpp"
#include "ckpt/writer.hpp"
#include "config/config.hpp"
#include "dist/world.hpp"
#include "model/param_table.hpp"
#include "optim/zero/engine.hpp"
#include "train/shard_map.hpp"

namespace zt::train {

class Checkpointer {
 public:
  // run_id: this run's identity, recorded in every manifest; rotation deletes only its checkpoints.
  // shards: parallel.tp > 1 or parallel.pp > 1, the engine holds this rank's part of the model (its TP
  // shard, its pipeline stage or both: shard_map.hpp), saved and loaded in the global shape, so any
  // grid resumes any checkpoint. Null: the engine holds the whole table.
  Checkpointer(const dist::World& world, const config::Config& config, const model::ParamTable& table,
               optim::ZeroEngine& engine, std::string run_id, const ShardMap* shards = nullptr);
  ~Checkpointer();

  // Collective. Checkpoints the state after state.step steps into ckpt.dir. Synchronous: written and
  // committed on return. Asynchronous: returns once the state is in host memory (the stall); the
  // commit follows in finish(). Waits for (and commits) the previous write first.
  void save(const ckpt::TrainState& state);
  // Whether the state after `step` is saved on its own account: every ckpt.every steps and after
  // `last_step` (a stop saves whatever the step).
  bool due(std::int64_t step, std::int64_t last_step) const;
  // Whether this rank has no write in flight (the loop agrees on it over ranks before finish()).
  bool idle() const;
  // Collective: waits for the write in flight, if any, and commits it. Throws CheckpointError if a
  // rank's write or the commit failed (the .tmp directory is removed; older checkpoints stay).
  void finish();
  // Collective: finish() before an error every rank meets at the same point (an agreed failure), so the
  // newest checkpoint survives the exit 1 (outside sweep 37 F8); a commit that fails is said (`when`: "before
  // stopping") and the first error stays the one reported.
  void commit_before_failing(std::string_view when);
  // Collective: sets master weights and moments from the checkpoint at dir (any world size or stage)
  // and returns its training state.
  ckpt::TrainState load(const std::filesystem::path& dir);

  // rl.algorithm=ppo: the critic's engine (its table, and its ShardMap as `shards` above) is saved with
  // every checkpoint from here on, in its subdirectory ckpt::kCriticDir: written with the actor's files
  // (in the same background write when asynchronous), sealed with its own manifest, listed in the
  // checkpoint's and committed by the same rename; rotation deletes them together.
  void add_critic(const model::ParamTable& table, optim::ZeroEngine& engine, const ShardMap* shards);
  // Collective: the critic's master weights and moments from the checkpoint at dir (its critic/).
  void load_critic(const std::filesystem::path& dir);

 private:
  // One model's state in the checkpoint: the actor's (the checkpoint's own), or the critic's (subdir).
  struct Part {
    std::string subdir;  // "" for the checkpoint's own model
    optim::ZeroEngine* engine = nullptr;
    ckpt::ModelDesc desc;
    std::vector<ckpt::FlatRange> ranges;
    const ShardMap* shards = nullptr;
    std::vector<model::TpRun> runs;  // the engine's ranges (local offsets) behind ranges, pairwise
    std::shared_ptr<ckpt::RankShard> shard;    // host copies the writer reads; reused across saves
    std::shared_ptr<std::vector<float>> full;  // rank 0: the full parameters for model.h5
    bool streamed = false;                     // this save's writer reads the engine's offloaded state itself
  };
  Part make_part(std::string subdir, const model::ParamTable& table, optim::ZeroEngine& engine, const ShardMap* shards) const;
  void snapshot(Part& part);  // this rank's state of one part (and, on rank 0, its full parameters)
  static ckpt::ShardReader streamed_reader(const Part& part);  // Part::streamed: the writer's reads
  void load_part(const Part& part, const std::filesystem::path& dir);
  ckpt::Manifest part_manifest(const Part& part, std::int64_t step, const std::vector<const ckpt::RankRecord*>& records) const;

  struct Pending {
    std::int64_t step = 0;
    std::filesystem::path tmp, final;
    std::unique_ptr<ckpt::WriteJob> job;  // asynchronous
    ckpt::RankRecord record;              // synchronous: already written
    std::string error;                    // synchronous: what failed
    std::chrono::steady_clock::time_point started;
    double stall_ms = 0;                  // asynchronous: the snapshot
  };
  std::unique_ptr<Pending> begin(std::int64_t step);  // collective: step_N.tmp/ exists on return
  void commit_on_root(const Pending& p, const std::vector<std::string>& texts, double finish_ms);
  void check_ownership_on_root(const Pending& p) const;  // the lock is ours; step_N is not another run's
  void rotate_on_root(const Pending& p);
  [[noreturn]] void fail(const Pending& p, const std::string& error) const;

  const dist::World& world_;
  const config::Config& config_;
  std::vector<Part> parts_;  // the actor first; PPO's critic after it
  bool async_;
  std::unique_ptr<Pending> pending_;
  std::string run_id_;
  std::vector<std::filesystem::path> foreign_noted_;  // other runs' checkpoints rotation last said it kept
};

}  // namespace zt::train
