// Check-failure reporting shared by the ZT_CHECK macros.
#include "core/error.hpp"

#include <cstdio>

namespace zt::detail {

void throw_check_failure(const char* file, int line, const std::string& condition,
                         const std::string& message) {
  std::string what = cat("internal check failed: ", condition, " at ", file, ":", line);
  if (!message.empty()) what += cat(": ", message);
  throw Error(what, kExitRuntime);
}

}  // namespace zt::detail

namespace zt {
std::string fixed(double v, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, v);
  return text;
}
}  // namespace zt
