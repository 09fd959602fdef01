// ckpt.resume: auto | none | PATH.
#include "train/resume.hpp"

#include "ckpt/layout.hpp"
#include "ckpt/reader.hpp"
#include "ckpt/verify.hpp"
#include "core/log.hpp"
#include "plan/memory_plan.hpp"
#include "train/checkpointer.hpp"

namespace zt::train {
namespace fs = std::filesystem;

namespace {

std::string joined(const std::vector<std::string>& problems) {
  std::string out;
  for (const std::string& p : problems) out += (out.empty() ? "" : "; ") + p;
  return out;
}

std::string describe(const ckpt::ModelDesc& m) {
  std::string out;
  for (const auto& [k, v] : m.hyper) out += cat(out.empty() ? "" : " ", k, "=", v);
  return out;
}

// The checkpoint must be of this model, and its data cursor must mean the same windows here.
void check_fits(const fs::path& dir, const config::Config& c) {
  const ckpt::Checkpoint cp(dir);
  const model::ParamTable table(plan::model_shape(c.model));
  const ckpt::ModelDesc mine = describe_model(table);
  const std::string fix = " (ckpt.resume=none starts afresh; another ckpt.dir keeps both runs)";
  if (cp.manifest().model.params != mine.params)
    throw InputError(cat("checkpoint ", dir.string(), " holds a model with ", describe(cp.manifest().model),
                         "; this run's is ", describe(mine), ": use the same model.* keys", fix));
  const ckpt::TrainState s = cp.state();
  if (s.global_batch != static_cast<std::uint64_t>(c.train.global_batch))
    throw InputError(cat("checkpoint ", dir.string(), " was trained with train.global_batch=", s.global_batch,
                         "; this run has ", c.train.global_batch, ": the data cursor counts windows of that batch, so "
                         "resume with train.global_batch=", s.global_batch, fix));
  if (s.seed != c.train.seed)
    log::warn(cat("checkpoint ", dir.string(), " was trained with train.seed=", s.seed, "; this run has ", c.train.seed,
                  ": the shuffled data order from here on differs from the original run's"));
}

}  // namespace

ResumePoint pick_resume(const config::Config& c) {
  const std::string& how = c.ckpt.resume;
  if (how == "none") return {};
  if (how != "auto") {
    const std::vector<std::string> problems = ckpt::verify(how);
    if (!problems.empty())
      throw InputError(cat("ckpt.resume=", how, " does not verify: ", joined(problems),
                           ". Give a sound checkpoint, or ckpt.resume=auto to take the newest that verifies"));
    check_fits(how, c);
    const ResumePoint p{how, ckpt::Checkpoint(how).manifest().step};
    log::info(cat("resuming from ", how, " (step ", p.step, ")"));
    return p;
  }
  const ckpt::ResumeSearch found = ckpt::find_newest_sound(c.ckpt.dir);
  for (const ckpt::Skipped& s : found.skipped)
    log::warn(cat("skipping checkpoint ", s.path.string(), ": ", joined(s.problems)));
  if (found.chosen.empty()) {
    log::info(cat("no checkpoint to resume from in ckpt.dir=", c.ckpt.dir, ": starting at step 0"));
    return {};
  }
  check_fits(found.chosen, c);
  log::info(cat("resuming from ", found.chosen.string(), " (step ", found.step, "), the newest checkpoint that verifies"));
  return {found.chosen, found.step};
}

ResumePoint share_resume(const dist::World& world, const config::Config& c, const ResumePoint& root_choice) {
  const long long step = world.max_over_ranks(world.is_root() && !root_choice.empty() ? root_choice.step : -1);
  if (step < 0) return {};
  if (world.is_root()) return root_choice;
  // Every rank sees the same ckpt.dir (it must be shared): the path follows from the step.
  const fs::path dir = c.ckpt.resume == "auto" ? fs::path(c.ckpt.dir) / ckpt::step_dir_name(step) : fs::path(c.ckpt.resume);
  return {dir, step};
}

}  // namespace zt::train
