// ckpt.resume: auto | none | PATH.
#include "train/resume.hpp"

#include <cstring>
#include <ctime>
#include <sstream>

#include "ckpt/layout.hpp"
#include "ckpt/ownership.hpp"
#include "ckpt/reader.hpp"
#include "ckpt/verify.hpp"
#include "config/options.hpp"
#include "config/parse.hpp"
#include "core/log.hpp"
#include "model/checkpoint_desc.hpp"
#include "model/from_config.hpp"
#include "model/nf4_params.hpp"
#include "model/tp_split.hpp"
#include "plan/memory_plan.hpp"
#include "train/lora_base.hpp"
#include "train/train_blend.hpp"

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

// " (first difference: tensor NAME [shape] at offset N vs ...)": where two parameter tables part, which
// the hyper-parameters alone may not show (a manifest edited by hand, a table of another layout).
std::string first_difference(const std::vector<ckpt::ParamDesc>& saved, const std::vector<ckpt::ParamDesc>& mine) {
  const auto text = [](const ckpt::ParamDesc& p) {
    std::string shape;
    for (std::int64_t d : p.shape) shape += cat(shape.empty() ? "" : ", ", d);
    return cat(p.name, " [", shape, "] at offset ", p.flat_offset);
  };
  for (std::size_t i = 0; i < std::min(saved.size(), mine.size()); ++i)
    if (!(saved[i] == mine[i])) return cat(" (first difference, tensor ", i, ": ", text(saved[i]), " vs ", text(mine[i]), ")");
  return cat(" (", saved.size(), " tensors vs ", mine.size(), ")");
}

bool same_adapters(const model::LoraSpec& a, const model::LoraSpec& b) {
  return a.rank == b.rank && a.alpha == b.alpha && a.rslora == b.rslora && a.targets == b.targets &&
         a.dropout == b.dropout;
}

// The frozen base the adapters were trained on: NF4 (with its double quantization or not) is another
// function than the base in the compute dtype; bf16 and fp32 follow train.precision, which a resume may change.
bool same_base(const config::LoraConfig& a, const config::LoraConfig& b) {
  const bool nf4 = a.base_dtype == config::LoraBaseDtype::kNf4;
  return nf4 == (b.base_dtype == config::LoraBaseDtype::kNf4) && (!nf4 || a.base_double_quant == b.base_double_quant);
}

// Every key that changes the function the model computes must be the checkpoint's: the model.* keys (as
// the model's shape: `auto` and the value it resolves to are the same), and for a LoRA run the adapters'
// lora.* keys (lora.dropout too: the training function). docs/INTERFACE.md names the keys a resume may
// change (learning rate, schedule, length, data, batch, layout, precision, ...).
void check_model_keys(const fs::path& dir, const config::Config& then, const config::Config& now) {
  const model::GptShape shape = model::model_shape(now.model);
  for (const config::Option& o : config::options()) {
    const bool adapters = o.section() == "lora" && now.lora.rank > 0;
    if (o.section() != "model" && !adapters) continue;
    const std::string was = o.format(then), is = o.format(now);
    if (was == is) continue;
    config::Config alt = now;  // this run with only this key as the checkpoint had it
    bool same = false;
    try {
      o.assign(alt, was);
      same = adapters ? same_adapters(model::lora_spec(alt), model::lora_spec(now)) && same_base(alt.lora, now.lora)
                      : model::model_shape(alt.model) == shape;
    } catch (const Error&) {  // not even a valid combination with this run's other keys: a different model
    }
    // The way to a new run from it: its weights exported (a LoRA checkpoint's merged into its base), then a
    // new ckpt.dir (resume=none in this one is refused: its checkpoints are another run's).
    // (A LoRA checkpoint's adapters as a PEFT directory keep their lora.* keys: only the merged model
    // takes new ones, sweep 33 N6.)
    const std::string fresh = cat("zckpt export ", dir.string(), then.lora.rank > 0 ? " --merge" : "",
                                  " --out DIR, then init.from=DIR");
    if (!same)
      throw InputError(cat("checkpoint ", dir.string(), " was trained with ", o.key, "=", was, "; this run has ", o.key,
                           "=", is, ": the key changes the function the model computes, so a resume keeps it. Resume "
                           "with ", o.key, "=", was, ", or start a new run from the checkpoint's weights (", fresh,
                           ", in another ckpt.dir)"));
  }
}

// A LoRA checkpoint holds adapters on a frozen base, a full one the whole model: resuming one as the
// other is refused saying so, with the way forward either way (not as a mismatch of parameter tables).
// `then` is the checkpoint's configuration (config::from_ini), its keys printed as its state.json has them.
void check_lora_kind(const fs::path& dir, const ckpt::TrainState& s, const config::Config& then, const config::Config& c) {
  const bool saved_lora = !s.lora_base_sha256.empty();
  if (saved_lora == (c.lora.rank > 0)) return;
  auto recorded = [&](const char* key) { return config::find_option(key)->format(then); };
  const std::string& from = then.init.from;
  if (saved_lora)
    throw InputError(cat(
        "checkpoint ", dir.string(), " is a LoRA checkpoint (lora.rank=", recorded("lora.rank"), ", lora.alpha=",
        recorded("lora.alpha"), ", lora.targets=", recorded("lora.targets"), "): it holds the adapters only, "
        "on the frozen base init.from=", from.empty() ? "(random init from train.seed)" : from, ", but this run has "
        "lora.rank=0 (full training). To go on with the LoRA run, give it those lora.* keys and init.from; to train the "
        "whole fine-tuned model, export it merged (zckpt export ", dir.string(), " --merge --out MERGED) and start a new "
        "run with init.from=MERGED in another ckpt.dir"));
  throw InputError(cat("checkpoint ", dir.string(), " holds a full model (trained without LoRA: no adapters), but this "
                       "run has lora.rank=", c.lora.rank, " (LoRA). To go on training the whole model, drop lora.* "
                       "(lora.rank=0); to fine-tune it with LoRA, export it (zckpt export ", dir.string(),
                       " --out BASE) and start the LoRA run with init.from=BASE in another ckpt.dir"));
}

// PPO's checkpoint holds its critic (critic/), GRPO's and GSPO's none: a PPO run resumes only from a PPO
// checkpoint with its critic, and a PPO checkpoint only as PPO (a resume that silently dropped the critic
// would be a different run than the one asked for); either way the fix is a new run from the actor's weights.
void check_ppo_resume(const fs::path& dir, const config::Config& then, const config::Config& c, bool has_critic,
                      const std::string& fix) {
  const bool ppo_then = then.rl.algorithm == config::RlAlgorithm::kPpo, ppo_now = c.rl.algorithm == config::RlAlgorithm::kPpo;
  if (ppo_now && !ppo_then)
    throw InputError(cat("checkpoint ", dir.string(), " is of a ", config::to_string(then.rl.algorithm), " run: it holds no "
                         "critic, so it does not resume as rl.algorithm=ppo. Resume it with rl.algorithm=",
                         config::to_string(then.rl.algorithm), ", or start a new PPO run from its weights", fix));
  if (ppo_then && !ppo_now)
    throw InputError(cat("checkpoint ", dir.string(), " is of a PPO run (its critic in ", ckpt::kCriticDir, "/) and this ",
                         "run has rl.algorithm=", config::to_string(c.rl.algorithm), ": resume it with rl.algorithm=ppo, ",
                         "or start a new ", config::to_string(c.rl.algorithm), " run from its actor's weights", fix));
  if (ppo_now && !has_critic)
    throw InputError(cat("checkpoint ", dir.string(), " is of a PPO run but holds no critic (", ckpt::kCriticDir,
                         "/MANIFEST.json is not in its manifest: written by a ztrain that did not checkpoint the critic), ",
                         "so it does not resume; start a new PPO run from its actor's weights", fix));
}

// RL's prompt cursor is the iteration, counted in rl.batch prompts of rl.prompts' seeded order: a resume
// keeps rl.batch (refused otherwise), and is warned about other prompts. A training checkpoint does not
// resume as RL, nor an RL one as training: each is a new run from the other's exported weights.
void check_rl_resume(const fs::path& dir, const config::Config& then, const config::Config& c, bool has_critic) {
  const std::string fix = cat(" (zckpt export ", dir.string(), " --out DIR, then init.from=DIR in another ckpt.dir)");
  if (then.rl.enabled() != c.rl.enabled())
    throw InputError(cat("checkpoint ", dir.string(), then.rl.enabled() ? " is of an RL run (rl.prompts=" + then.rl.prompts + ")"
                                                                         : " is of a training run (no rl.prompts)",
                         " but this run ", c.rl.enabled() ? "is RL (rl.prompts=" + c.rl.prompts + ")" : "trains on data.train",
                         ": start a new run from its weights instead", fix));
  if (!c.rl.enabled()) return;
  check_ppo_resume(dir, then, c, has_critic, fix);
  if (then.rl.batch != c.rl.batch)
    throw InputError(cat("checkpoint ", dir.string(), " was trained with rl.batch=", then.rl.batch, "; this run has ",
                         c.rl.batch, ": the prompt cursor counts iterations of that many prompts, so resume with rl.batch=",
                         then.rl.batch, ", or start a new run from the checkpoint's weights", fix));
  if (then.rl.prompts != c.rl.prompts)
    log::warn(cat("checkpoint ", dir.string(), " was trained on rl.prompts=", then.rl.prompts, "; this run reads ",
                  c.rl.prompts, ": the iterations from here on take their prompts from the new file's order"));
}

// An NF4 base is quantized per TP shard where the shards are not whole blocks (train/lora_base.cpp): a
// QLoRA checkpoint resumed at another parallel.tp, where either degree cuts such shards, goes on with a
// slightly different frozen base. Said (outside sweep 33 N5: it went on without a word).
void warn_nf4_base_at_another_tp(const fs::path& dir, const config::Config& then, const config::Config& c,
                                 const model::ParamTable& base) {
  if (c.lora.rank == 0 || c.lora.base_dtype != config::LoraBaseDtype::kNf4 || then.parallel.tp == c.parallel.tp) return;
  const int block = model::nf4_options(c).block;
  const auto unaligned = [&](std::int64_t tp) {
    return tp > 1 && !model::nf4_unaligned_shards(base, model::tp_local_table(base, static_cast<int>(tp)), block).empty();
  };
  if (unaligned(then.parallel.tp) || unaligned(c.parallel.tp))
    log::warn(cat("checkpoint ", dir.string(), " was trained at parallel.tp=", then.parallel.tp, " and resumes at ",
                  c.parallel.tp, ", where the NF4 base's shards are not all whole ", block, "-blocks at one of them: ",
                  "each degree quantizes those shards its own way, so the frozen base differs slightly from here on"));
}

// The checkpoint must be of this model, and its data cursor must mean the same windows here.
void check_fits(const fs::path& dir, const config::Config& c) {
  const ckpt::Checkpoint cp(dir);
  const ckpt::TrainState s = cp.state();
  const config::Config then = config::from_ini(s.config_ini);
  check_lora_kind(dir, s, then, c);
  const model::ParamTable base(model::model_shape(c.model));
  // A LoRA run's checkpoint holds its adapters (lora_base.hpp): their table is what must match.
  const ckpt::ModelDesc mine =
      model::describe_model(c.lora.rank > 0 ? model::lora_table(base.shape(), model::lora_spec(c)) : base);
  const std::string fix = " (ckpt.resume=none starts afresh; another ckpt.dir keeps both runs)";
  if (cp.manifest().model.params != mine.params) {
    std::error_code ec;
    const bool from_gone = !c.init.from.empty() && !fs::exists(c.init.from, ec);
    throw InputError(cat("checkpoint ", dir.string(), " holds a model with ", describe(cp.manifest().model),
                         "; this run's is ", describe(mine), first_difference(cp.manifest().model.params, mine.params),
                         from_gone ? cat(": this run's model.* keys come from init.from=", c.init.from,
                                         "'s config.json, which is not there: put the directory back, or give the "
                                         "checkpoint's model.* keys")
                                   : cat(": use the same model.* keys",
                                         c.lora.rank > 0 ? " and the same lora.rank and lora.targets (a LoRA checkpoint holds its adapters)" : ""),
                         fix));
  }
  check_model_keys(dir, then, c);
  warn_nf4_base_at_another_tp(dir, then, c, base);
  check_rl_resume(dir, then, c, ckpt::has_critic(cp.manifest()));
  if (s.global_batch != static_cast<std::uint64_t>(c.train.global_batch))
    throw InputError(cat("checkpoint ", dir.string(), " was trained with train.global_batch=", s.global_batch,
                         "; this run has ", c.train.global_batch, ": the data cursor counts windows of that batch, so "
                         "resume with train.global_batch=", s.global_batch, fix));
  // A changed blend, or changed shards under it: refused here, before any work, unless data.reset_order.
  if (!c.rl.enabled()) blend_start_on_resume(s, c, dir, corpus_records(c));  // RL reads prompts, not data.train
  if (s.seed != c.train.seed)
    log::warn(cat("checkpoint ", dir.string(), " was trained with train.seed=", s.seed, "; this run has ", c.train.seed,
                  ": the shuffled data order from here on differs from the original run's"));
}

// "step_00000004 (run ...), step_00000006 (owner unknown ...)": the committed step_N in ckpt_dir.
std::string owned_list(const std::vector<fs::path>& dirs) {
  std::string out;
  for (const fs::path& d : dirs)
    out += cat(out.empty() ? "" : ", ", d.filename().string(), " (", ckpt::describe_owner(ckpt::run_id_of(d)), ")");
  return out;
}

std::vector<fs::path> committed_dirs(const fs::path& ckpt_dir) {
  std::vector<fs::path> out;
  for (const ckpt::StepDir& d : ckpt::list_step_dirs(ckpt_dir))
    if (!d.tmp) out.push_back(d.path);  // a .tmp directory is nobody's checkpoint: never resumable
  return out;
}

// A run that starts at step 0 is a new run: a new id.
ResumePoint fresh_start(const std::string& why) {
  ResumePoint p;
  p.run_id = ckpt::new_run_id();
  log::info(cat(why, ": starting at step 0 as the new run ", p.run_id));
  return p;
}

// A resumed run is the run that wrote the checkpoint, going on: it keeps its id (so a requeued job
// rotates its own older checkpoints). One written before run ids gets a new id for what follows.
ResumePoint resumed(const fs::path& dir, std::int64_t step) {
  ResumePoint p{dir, step, ckpt::Checkpoint(dir).manifest().run_id};
  if (p.run_id.empty()) {
    p.run_id = ckpt::new_run_id();
    log::warn(cat(dir.string(), " has no run id (written before run ids): this run goes on as run ", p.run_id,
                  "; the checkpoints without one stay, never rotated (delete them yourself once unneeded)"));
  } else {
    log::info(cat("run ", p.run_id, " goes on"));
  }
  return p;
}

// ckpt.resume=none is a new run: over other runs' checkpoints only with ckpt.overwrite.
ResumePoint start_afresh(const config::Config& c) {
  const std::vector<fs::path> others = committed_dirs(c.ckpt.dir);
  if (!others.empty() && !c.ckpt.overwrite)
    throw InputError(cat("ckpt.resume=none starts a new run, but ckpt.dir=", c.ckpt.dir, " holds ", others.size(),
                         " checkpoint(s) of other runs: ", owned_list(others), ". A new run there would replace those of "
                         "the steps it saves: give another ckpt.dir, ckpt.resume=auto to continue the newest, or "
                         "ckpt.overwrite=true to start over them anyway"));
  if (!others.empty())
    log::warn(cat("ckpt.overwrite=true: a new run in ckpt.dir=", c.ckpt.dir, " over ", others.size(),
                  " checkpoint(s) of other runs (", owned_list(others), "); those of the steps it saves are replaced, "
                  "the others kept"));
  return fresh_start("ckpt.resume=none");
}

// ckpt.resume=auto that found step_N directories of which none verifies: starting at step 0 over
// them would replace them one by one, so it is refused (unless ckpt.overwrite), each named with why.
ResumePoint none_verifies(const config::Config& c, const ckpt::ResumeSearch& found) {
  std::string list;
  for (const ckpt::Skipped& s : found.skipped)
    if (!s.path.string().ends_with(ckpt::kTmpSuffix)) list += cat("\n  ", s.path.string(), ": ", joined(s.problems));
  if (list.empty()) return fresh_start(cat("no checkpoint to resume from in ckpt.dir=", c.ckpt.dir));
  if (!c.ckpt.overwrite)
    throw InputError(cat("ckpt.resume=auto: no checkpoint in ckpt.dir=", c.ckpt.dir, " verifies:", list,
                         "\nStarting at step 0 would write over them. Repair or move them (zckpt verify DIR names each "
                         "problem), resume one with ckpt.resume=PATH, give another ckpt.dir, or set ckpt.overwrite=true "
                         "to start at step 0 anyway"));
  log::warn(cat("ckpt.overwrite=true: no checkpoint in ckpt.dir=", c.ckpt.dir, " verifies; starting over them"));
  return fresh_start("ckpt.resume=auto");
}

// A skipped step_N of another run (or none readable) would be replaced when this run saves step N;
// a save refuses that (exit 1) unless ckpt.overwrite, so say so before training rather than then.
void warn_in_the_way(const config::Config& c, const ckpt::ResumeSearch& found, const std::string& run_id) {
  if (c.ckpt.overwrite) return;
  for (const ckpt::Skipped& s : found.skipped) {
    if (s.path.string().ends_with(ckpt::kTmpSuffix) || !fs::exists(s.path)) continue;  // (set aside above)
    const std::string owner = ckpt::run_id_of(s.path);
    if (owner == run_id) continue;
    log::warn(cat(s.path.string(), " (", ckpt::describe_owner(owner), ") is not this run's: if this run saves that "
                  "step it stops there (exit 1) rather than replace it; move it away or set ckpt.overwrite=true"));
  }
}

// ckpt.dir/abandoned/NAME_<UTC time>/, created: where checkpoints set aside go, never deleted.
fs::path aside_dir(const config::Config& c, const std::string& name) {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
  const fs::path aside = fs::path(c.ckpt.dir) / "abandoned" / cat(name, "_", stamp);
  std::error_code ec;
  fs::create_directories(aside, ec);
  if (ec) throw IoError(cat("cannot create ", aside.string(), " to set checkpoints aside: ", ec.message()));
  return aside;
}

// Moves the directories into `aside`; returns their names, joined.
std::string move_into(const fs::path& aside, const std::vector<fs::path>& dirs) {
  std::string moved;
  for (const fs::path& d : dirs) {
    std::error_code ec;
    fs::rename(d, aside / d.filename(), ec);
    if (ec) throw IoError(cat("cannot move ", d.string(), " into ", aside.string(), ": ", ec.message()));
    moved += cat(moved.empty() ? "" : ", ", d.filename().string());
  }
  return moved;
}

// A rollback: resuming step K while ckpt.dir holds committed checkpoints of later steps (the timeline the
// user rolled back from). Left there, the next ckpt.resume=auto (every requeue) would pick them up again and
// rotation would count them as this run's newest, deleting step K first; so they are moved, whole, to
// ckpt.dir/abandoned/after_step_K_<UTC time>/ and named. Nothing is deleted.
void set_aside_later_steps(const config::Config& c, std::int64_t step) {
  std::vector<fs::path> later;
  for (const ckpt::StepDir& d : ckpt::list_step_dirs(c.ckpt.dir))
    if (!d.tmp && d.step > step) later.push_back(d.path);
  if (later.empty()) return;
  const fs::path aside = aside_dir(c, cat("after_step_", step));
  const std::string moved = move_into(aside, later);
  log::warn(cat("rolled back to step ", step, ": the later checkpoints of ckpt.dir (", moved, ") are moved to ",
                aside.string(), ", so that ckpt.resume=auto and rotation follow this run from step ", step,
                " (delete them once unneeded)"));
}

// ckpt.resume=auto skipped newer step_N directories whose manifest is damaged or missing: nobody can say
// whose they are, so this run's save of that step would refuse to replace one (exit 1, a whole ckpt.every
// interval trained for nothing) and rotation would never remove it. They are set aside, whole, as a
// rollback's later steps are (outside sweep 29 F3). Another run's (a manifest that names it) stay, warned.
void set_aside_unreadable_newer(const config::Config& c, const ckpt::ResumeSearch& found) {
  std::vector<fs::path> unreadable;
  for (const ckpt::StepDir& d : ckpt::list_step_dirs(c.ckpt.dir))
    if (!d.tmp && d.step > found.step && ckpt::run_id_of(d.path).empty()) unreadable.push_back(d.path);
  if (unreadable.empty()) return;
  const fs::path aside = aside_dir(c, cat("unreadable_after_step_", found.step));
  const std::string moved = move_into(aside, unreadable);
  log::warn(cat("the skipped checkpoints ", moved, " (their manifests damaged or missing: nobody can say whose they are) ",
                "are moved to ", aside.string(), ", so that this run saves its own in their place (delete them once unneeded)"));
}

// Rank 0's text on every rank (up to 255 bytes), over the one collective World has for it.
std::string text_from_root(const dist::World& world, const std::string& text) {
  constexpr std::size_t kWords = 32;
  ZT_CHECK_LE(text.size(), kWords * 8 - 1);
  std::vector<std::uint64_t> mine(kWords, 0);
  if (world.is_root()) std::memcpy(mine.data(), text.data(), text.size());
  const std::vector<std::uint64_t> all = world.all_gather(mine);
  return std::string(reinterpret_cast<const char*>(all.data()));  // rank 0's block comes first, 0-terminated
}

}  // namespace

ResumePoint pick_resume(const config::Config& c) {
  const std::string& how = c.ckpt.resume;
  if (how == "none") return start_afresh(c);
  if (how != "auto") {
    if (const std::vector<ckpt::StepDir> inside = ckpt::list_step_dirs(how);
        !inside.empty() && !fs::exists(fs::path(how) / ckpt::kManifestFile))
      throw InputError(cat("ckpt.resume=", how, " is a directory of checkpoints (", inside.front().path.filename().string(),
                           inside.size() > 1 ? ", ..." : "", "), not one: give one of them, e.g. ckpt.resume=",
                           inside.front().path.string(), ", or ckpt.dir=", how, " with ckpt.resume=auto for the newest that verifies"));
    const std::vector<std::string> problems = ckpt::verify(how);
    if (!problems.empty())
      throw InputError(cat("ckpt.resume=", how, " does not verify: ", joined(problems),
                           ". Give a sound checkpoint, or ckpt.resume=auto to take the newest that verifies"));
    check_fits(how, c);
    const std::int64_t step = ckpt::Checkpoint(how).manifest().step;
    log::info(cat("resuming from ", how, " (step ", step, ")"));
    ResumePoint p = resumed(how, step);
    set_aside_later_steps(c, step);
    return p;
  }
  const ckpt::ResumeSearch found = ckpt::find_newest_sound(c.ckpt.dir);
  for (const ckpt::Skipped& s : found.skipped)
    log::warn(cat("skipping checkpoint ", s.path.string(), ": ", joined(s.problems)));
  if (found.chosen.empty()) return none_verifies(c, found);
  check_fits(found.chosen, c);
  log::info(cat("resuming from ", found.chosen.string(), " (step ", found.step, "), the newest checkpoint that verifies"));
  const ResumePoint p = resumed(found.chosen, found.step);
  set_aside_unreadable_newer(c, found);
  warn_in_the_way(c, found, p.run_id);
  return p;
}

ResumePoint share_resume(const dist::World& world, const config::Config& c, const ResumePoint& root_choice) {
  const std::string run_id = text_from_root(world, root_choice.run_id);
  const long long step = world.max_over_ranks(world.is_root() && !root_choice.empty() ? root_choice.step : -1,
                                              "start-up: sharing the checkpoint to resume from");
  if (step < 0) return {{}, 0, run_id};
  if (world.is_root()) return root_choice;
  // Every rank sees the same ckpt.dir (it must be shared): the path follows from the step.
  const fs::path dir = c.ckpt.resume == "auto" ? fs::path(c.ckpt.dir) / ckpt::step_dir_name(step) : fs::path(c.ckpt.resume);
  return {dir, step, run_id};
}

}  // namespace zt::train
