// The polling loop of deadline.hpp.
#include "dist/deadline.hpp"

#include <thread>

#include "core/error.hpp"

namespace zt::dist {

std::string start_up_limit_words(double timeout_s) {
  return cat(kStartUpFactor * timeout_s, " s (start-up, until step 1 completes: ", kStartUpFactor, " x dist.timeout_s=",
             timeout_s, " s)");
}

std::string collective_timeout_message(const std::string& what, const std::string& limit, const std::string& issued_in,
                                       const std::string& waited_in) {
  return cat(what, " did not complete within ", limit, " (", waited_in,
             issued_in == waited_in ? "" : cat("; issued in ", issued_in), "): a peer rank is hung, stopped, dead or far ",
             "behind; aborting the job", abort_advice());
}

namespace {
std::string& advice_text() {
  static std::string text;
  return text;
}
}  // namespace

void set_abort_advice(std::string advice) { advice_text() = std::move(advice); }
const std::string& abort_advice() { return advice_text(); }

bool poll_until(Clock::time_point deadline, const std::function<bool()>& done, const Pacing& pacing) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point spin_until = deadline_after(start, pacing.spin_s);
  for (;;) {
    if (done()) return true;
    const Clock::time_point now = Clock::now();
    if (now >= deadline) return false;
    if (now < spin_until) {
      std::this_thread::yield();
      continue;
    }
    if (pacing.between) pacing.between();
    std::this_thread::sleep_for(std::chrono::duration<double>(pacing.sleep_s));
  }
}

}  // namespace zt::dist
