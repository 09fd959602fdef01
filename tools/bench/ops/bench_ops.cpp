// The op-case registry's perf mode (tests/ops/op_case.hpp; ggml test-backend-ops' "perf"): every case
// timed on every backend available (the CPU, and CUDA where a device is), in each of its compute dtypes,
// forward and backward apart (median over --reps calls, each synchronised, after two warm-up calls;
// spread = (max - min) / median). Each row is first checked against the CPU reference: #wrong counts its
// failures, so wrong results are never reported as fast. A fixed table, then one JSON line.
//   build/bench/bench_ops [--filter REGEX] [--backend cpu|cuda|all] [--reps N] [--threads N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "tests/ops/case_tensors.hpp"
#include "tests/ops/registry.hpp"
#include "tests/ops/runner.hpp"

using namespace zt;
using namespace zt::backend;
using namespace zt::backend::ops;

namespace {

struct Options {
  std::string filter = ".*", backend = "all";
  int reps = 10, threads = 0;
};

struct Stat {
  double median_ms = 0.0, spread = 0.0;
};

// Times `step` reps times on the case's own tensors (they keep whatever the step leaves: timing only).
Stat time_step(const Step& step, Call& call, int reps) {
  std::vector<double> ms;
  for (int i = -2; i < reps; ++i) {  // two warm-up calls
    call.be.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    step(call);
    call.be.synchronize();
    const double d = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (i >= 0) ms.push_back(d);
  }
  std::sort(ms.begin(), ms.end());
  const double median = ms[ms.size() / 2];
  return {median, median > 0.0 ? (ms.back() - ms.front()) / median : 0.0};
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--filter" && has_value)
      o.filter = argv[++i];
    else if (a == "--backend" && has_value)
      o.backend = argv[++i];
    else if (a == "--reps" && has_value)
      o.reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--threads" && has_value)
      o.threads = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr,
                   "bench_ops: unknown argument '%s'\nusage: bench_ops [--filter REGEX] "
                   "[--backend cpu|cuda|all] [--reps N] [--threads N]\n",
                   a.c_str());
      std::exit(2);
    }
  }
  return o;
}

std::vector<std::pair<std::string, std::unique_ptr<Backend>>> backends(const Options& o) {
  std::vector<std::pair<std::string, std::unique_ptr<Backend>>> all;
  if (o.backend != "cuda") all.emplace_back("cpu", make_cpu_backend(o.threads));
  if (o.backend != "cpu" && cuda_backend_built()) {
    try {
      all.emplace_back("cuda", make_cuda_backend(0));
    } catch (const ConfigError& e) {
      std::fprintf(stderr, "bench_ops: CUDA skipped: %s\n", e.what());
    }
  }
  return all;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const std::regex filter(o.filter);
  auto ref = make_cpu_backend(o.threads);
  std::printf("%-6s %-72s %-5s %10s %7s %10s %7s %7s\n", "backend", "case", "dtype", "fwd_ms", "spread", "bwd_ms",
              "spread", "#wrong");
  std::string json = "{\"bench\":\"ops\",\"rows\":[";
  for (auto& [kind, be] : backends(o)) {
    for (const OpCase* c : all_cases()) {
      if (!std::regex_search(c->name, filter) || (kind == "cpu" && c->where == Where::kDeviceOnly) ||
          (kind == "cuda" && c->where == Where::kCpuOnly))
        continue;
      for (const DType x : c->dtypes) {
        const std::size_t wrong = compare(*c, *ref, *be, x).size();
        CaseTensors t(*be, *c, x, x);
        Call call = t.call();
        const Stat fwd = time_step(c->forward, call, o.reps);
        const Stat bwd = c->backward ? time_step(c->backward, call, o.reps) : Stat{};
        std::printf("%-6s %-72s %-5s %10.4f %7.2f %10.4f %7.2f %7zu\n", kind.c_str(), c->name.substr(0, 72).c_str(),
                    std::string(dtype_name(x)).c_str(), fwd.median_ms, fwd.spread, bwd.median_ms, bwd.spread, wrong);
        json += cat(json.back() == '[' ? "" : ",", "{\"backend\":\"", kind, "\",\"case\":\"", c->name,
                    "\",\"dtype\":\"", dtype_name(x), "\",\"fwd_ms\":", fwd.median_ms, ",\"bwd_ms\":", bwd.median_ms,
                    ",\"wrong\":", wrong, "}");
      }
    }
  }
  std::printf("%s]}\n", json.c_str());
  return 0;
}
