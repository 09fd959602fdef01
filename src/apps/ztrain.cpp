// ztrain: parse -> place ranks -> (print config | pick the checkpoint to resume from, train) -> exit code
// (INTERFACE.md).
#include <cstdio>
#include <iostream>
#include <memory>

#include "apps/boundary.hpp"
#include "config/derived.hpp"
#include "config/options.hpp"
#include "config/parse.hpp"
#include "core/log.hpp"
#include "core/version.hpp"
#include "dist/placement.hpp"
#include "dist/world.hpp"
#include "train/run.hpp"

namespace zt::apps {
namespace {

struct Startup {
  config::CommandLine cl;
  config::Derived derived;
  dist::Placement placement;
};

// The resolved configuration as INI, preceded by '#' lines with the world layout and derived values.
void print_config(const dist::World& world, const Startup& s) {
  const std::string mine = cat("# rank ", world.rank(), ": host=", world.host(), " local_rank=", world.local_rank(),
                               " local_size=", world.local_size(), " device=", s.placement.device_name(),
                               " threads=", s.placement.threads);
  const std::vector<std::string> ranks = world.gather_to_root(mine);
  if (!world.is_root()) return;
  const config::Config& c = s.cl.config;
  std::cout << "# ztrain " << version() << " (git " << git_revision() << "): resolved configuration; loads again with --config\n"
            << "# world_size = " << world.size() << " (data-parallel ranks), nodes = " << world.n_nodes()
            << ", dist.backend resolved = " << config::to_string(s.placement.comm) << "\n";
  for (const std::string& line : ranks) std::cout << line << "\n";
  std::cout << "# grad_accum = " << s.derived.grad_accum << " (train.global_batch " << c.train.global_batch
            << " = micro_batch " << c.train.micro_batch << " x grad_accum " << s.derived.grad_accum << " x ranks "
            << s.derived.dp_size << ")\n"
            << "# tokens_per_step = " << s.derived.tokens_per_step << " (global_batch x seq_len)\n\n"
            << config::to_ini(c) << std::flush;
}

int run(dist::World& world, int argc, char** argv) {
  Startup s;
  const int code = agree_on_startup(world, [&] {
    s.cl = config::parse_command_line(argc, argv);
    if (s.cl.help || s.cl.help_markdown || s.cl.version) return;
    log::set_all_ranks(s.cl.config.log.all_ranks);
    s.placement = dist::place_rank(world, s.cl.config, train::cuda_backend_built());
    s.derived = config::derive(s.cl.config, world.size());
  });
  if (code != kExitOk) return code;
  if (s.cl.help || s.cl.help_markdown || s.cl.version) {
    if (!world.is_root()) return kExitOk;
    if (s.cl.help) std::cout << config::help_text("ztrain");
    if (s.cl.help_markdown) std::cout << config::reference_markdown();
    if (s.cl.version) std::cout << "ztrain " << version() << " (git " << git_revision() << ")\n";
    return kExitOk;
  }
  if (s.cl.print_config) {
    print_config(world, s);
    return kExitOk;
  }
  // The checkpoint to resume from is a start-up decision too: one that does not verify is exit 2.
  train::ResumePoint resume;
  const int resume_code = agree_on_startup(world, [&] {
    if (world.is_root()) resume = train::pick_resume(s.cl.config);
  });
  if (resume_code != kExitOk) return resume_code;
  resume = train::share_resume(world, s.cl.config, resume);
  return run_or_abort(world, [&] { return train::run(world, s.cl, s.derived, s.placement, resume); });
}

}  // namespace
}  // namespace zt::apps

int main(int argc, char** argv) {
  std::unique_ptr<zt::dist::World> world;
  try {
    world = zt::dist::World::init(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ztrain: MPI start-up failed: %s\n", e.what());
    return zt::kExitRuntime;
  }
  return zt::apps::run(*world, argc, argv);
}
