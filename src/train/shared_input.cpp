// One message for a problem with an input every rank reads (shared_input.hpp).
#include "train/shared_input.hpp"

#include <string>

#include "core/error.hpp"
#include "core/log.hpp"

namespace zt::train {

void read_shared_input(const dist::World& world, const std::function<void()>& read, std::string_view what) {
  std::string message;
  int code = kExitOk;
  try {
    read();
  } catch (const ReportedError&) {
    throw;
  } catch (const Error& e) {
    message = e.what();
    code = e.exit_code();
  }
  const std::string context = cat("reading ", what, " (every rank)");
  const long long worst = world.max_over_ranks(code, context);
  if (worst == kExitOk) return;
  const long long first = world.min_over_ranks(code != kExitOk ? world.rank() : world.size(), context);
  if (world.rank() == first) log::fatal(message);
  throw ReportedError(static_cast<int>(worst));
}

}  // namespace zt::train
