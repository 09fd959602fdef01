// Tensor parallelism on CPU ranks: for each grid (tp x dp over the launched ranks) with and without
// sequence parallelism, the bytes each rank hands its TP group per micro-batch by collective, measured
// by the Communicator and printed beside tp_comm_bytes' theory (#wrong counts mismatches), the rank's
// model-state and activation bytes, and the forward+backward time (median and spread over the timed
// micro-batches; the loss is checked equal to tp=1's within 1e-5). A fixed table, then one JSON line.
//   mpirun --oversubscribe -np 4 build/bench/bench_tp [--arch gpt2|llama] [--iters N]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "dist/grid.hpp"
#include "dist/world.hpp"
#include "model/init.hpp"
#include "model/tp_split.hpp"
#include "model/cost.hpp"

using namespace zt;

namespace {

struct Row {
  int tp = 1, dp = 1;
  bool sp = false;
  dist::CommStats measured;
  model::TpCommBytes theory;
  std::size_t state_bytes = 0, activation_bytes = 0;
  double ms_median = 0, ms_min = 0, ms_max = 0, loss = 0;
};

double mb(std::uint64_t bytes) { return static_cast<double>(bytes) / 1e6; }

// The cpu-tiny GPT-2 (inputs/configs/cpu-tiny.ini) or a Llama of the same width: 8 heads sharing 4 K/V
// heads (whole K/V heads per rank up to tp=4), SwiGLU 352 wide, untied head.
model::GptShape bench_shape(const std::string& arch) {
  if (arch == "llama") return model::GptShape::make_llama(4, 8, 128, 50257, 128, 4, 352, false, 1e-5, {});
  return model::GptShape::make(4, 4, 128, 50257, 128);
}

Row measure(dist::Communicator& world_comm, const dist::World& world, const model::ParamTable& table,
            const std::vector<float>& init, int tp, bool sp, int micro, int iters) {
  const dist::Grid g = dist::Grid::make(world.size(), tp, world.rank());
  dist::GridComms comms = dist::split_grid(world_comm, g);
  const model::ParamTable local = model::tp_local_table(table, tp);
  auto be = backend::make_cpu_backend(1);
  auto model = model::make_model(*be, local, {.micro_batch = micro, .tp_group = comms.tp.get(), .sequence_parallel = sp});
  std::vector<float> params = model::tp_cut_flat(table, local, init.data(), tp, g.tp_rank()), grads(params.size());
  model::FlatParams source(local, {params.data(), DType::kF32, {static_cast<std::int64_t>(params.size())}});
  model::FlatGrads sink(local, {grads.data(), DType::kF32, {static_cast<std::int64_t>(grads.size())}});
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(micro) * table.shape().seq_len + 1);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::int32_t>((i * 7919) % 50257);
  Row row{tp, g.dp, sp};
  std::vector<double> ms;
  for (int it = 0; it <= iters; ++it) {  // iteration 0 warms up and is not counted
    const dist::CommStats before = comms.tp->stats();
    world_comm.barrier();
    const auto t = std::chrono::steady_clock::now();
    row.loss = model->forward(tokens.data(), tokens.data() + 1, source) / (micro * table.shape().seq_len);
    model->backward(source, sink, 1.0f);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
    const dist::CommStats& after = comms.tp->stats();
    row.measured = {after.all_reduce_bytes - before.all_reduce_bytes, after.reduce_scatter_bytes - before.reduce_scatter_bytes,
                    after.all_gather_bytes - before.all_gather_bytes, after.broadcast_bytes - before.broadcast_bytes, 0};
  }
  ms.erase(ms.begin());
  std::sort(ms.begin(), ms.end());
  row.ms_median = ms[ms.size() / 2], row.ms_min = ms.front(), row.ms_max = ms.back();
  row.theory = model::tp_comm_bytes(table.shape(), micro, tp, sp);
  row.state_bytes = 4 * local.numel() * sizeof(float);  // parameters, gradients, AdamW m and v (ZeRO-0)
  row.activation_bytes = model->activation_bytes();
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  auto world = dist::World::init(argc, argv);
  std::string arch = "gpt2";
  int iters = 3, micro = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    if (key == "--arch") arch = argv[i + 1];
    else if (key == "--iters") iters = std::max(1, std::stoi(argv[i + 1]));
  }
  const model::ParamTable table(bench_shape(arch));
  std::vector<float> init(table.numel());
  model::init_params(table, 1, init.data());
  auto world_comm = dist::make_mpi_communicator(*world, 600);
  std::vector<Row> rows;
  for (int tp = 1; tp <= world->size(); tp *= 2)
    for (bool sp : {false, true})
      if (world->size() % tp == 0 && !(sp && tp == 1)) rows.push_back(measure(*world_comm, *world, table, init, tp, sp, micro, iters));
  if (!world->is_root()) return 0;
  std::printf("%s, %lld parameters, micro-batch %d x %d tokens, %d ranks, per rank per micro-batch (fwd+bwd):\n",
              arch.c_str(), static_cast<long long>(table.n_params_real()), micro, table.shape().seq_len, world->size());
  std::printf("| tp x dp | SP | all-reduce MB | theory | all-gather MB | theory | reduce-scatter MB | theory | state MiB | activations MiB | fwd+bwd ms median (min-max) | loss - tp1 | #wrong |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::string json = "{\"bench\": \"tp\", \"arch\": \"" + arch + "\", \"rows\": [";
  for (const Row& r : rows) {
    const int wrong = (r.measured.all_reduce_bytes != r.theory.all_reduce) + (r.measured.all_gather_bytes != r.theory.all_gather) +
                      (r.measured.reduce_scatter_bytes != r.theory.reduce_scatter) + (std::fabs(r.loss - rows[0].loss) > 1e-5);
    std::printf("| %d x %d | %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.1f | %.1f | %.0f (%.0f-%.0f) | %.1e | %d |\n", r.tp, r.dp,
                r.sp ? "yes" : "no", mb(r.measured.all_reduce_bytes), mb(r.theory.all_reduce), mb(r.measured.all_gather_bytes),
                mb(r.theory.all_gather), mb(r.measured.reduce_scatter_bytes), mb(r.theory.reduce_scatter),
                static_cast<double>(r.state_bytes) / (1 << 20), static_cast<double>(r.activation_bytes) / (1 << 20), r.ms_median,
                r.ms_min, r.ms_max, r.loss - rows[0].loss, wrong);
    json += cat(&r == &rows[0] ? "" : ", ", "{\"tp\": ", r.tp, ", \"sp\": ", r.sp ? "true" : "false", ", \"all_reduce\": ",
                r.measured.all_reduce_bytes, ", \"all_gather\": ", r.measured.all_gather_bytes, ", \"reduce_scatter\": ",
                r.measured.reduce_scatter_bytes, ", \"wrong\": ", wrong, ", \"ms\": ", r.ms_median, "}");
  }
  std::printf("%s]}\n", json.c_str());
  return 0;
}
