// Rank-aware logging. Lines are written whole (one fwrite under a mutex) so ranks' lines don't mix.
#include "core/log.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace zt::log {
namespace {
struct State {
  std::atomic<int> rank{0};
  std::atomic<int> world_size{1};
  std::atomic<bool> all_ranks{false};
  std::atomic<int> level{static_cast<int>(Level::kInfo)};
  std::mutex mutex;
};
State& state() {
  static State s;
  return s;
}

void emit(std::FILE* stream, const std::string& text) {
  std::lock_guard<std::mutex> lock(state().mutex);
  std::fwrite(text.data(), 1, text.size(), stream);
  std::fflush(stream);
}
}  // namespace

void set_rank(int rank, int world_size) {
  state().rank = rank;
  state().world_size = world_size;
}
void set_all_ranks(bool all_ranks) { state().all_ranks = all_ranks; }
void set_level(Level level) { state().level = static_cast<int>(level); }
int rank() { return state().rank; }

void write(Level level, const std::string& line) {
  State& s = state();
  if (static_cast<int>(level) < s.level) return;
  const bool everyone = s.all_ranks || level == Level::kError;
  if (!everyone && s.rank != 0) return;
  std::string text;
  if (s.all_ranks && s.world_size > 1) text = cat("[rank ", s.rank.load(), "] ");
  if (level == Level::kWarn) text += "warning: ";
  if (level == Level::kError) text += "error: ";
  text += line;
  text += '\n';
  emit(level >= Level::kWarn ? stderr : stdout, text);
}

void fatal(const std::string& message) {
  emit(stderr, cat("rank ", state().rank.load(), ": ", message, "\n"));
}

void warn_any_rank(const std::string& message) {
  emit(stderr, cat("rank ", state().rank.load(), ": warning: ", message, "\n"));
}

}  // namespace zt::log
