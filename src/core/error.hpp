// Errors are exceptions with context: what failed, where (file, key, step, rank) and what to do.
// Each class maps to a process exit code (docs/INTERFACE.md): ConfigError -> 2, everything else -> 1.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace zt {

// Process exit codes of every ztrain program (docs/INTERFACE.md, "Programs and build").
enum ExitCode : int {
  kExitOk = 0,
  kExitRuntime = 1,    // anything that goes wrong once training (or the tool's work) has begun
  kExitUsage = 2,      // usage or configuration error: nothing was started
  kExitRequeue = 75,   // EX_TEMPFAIL: checkpointed on a signal or time limit, requeue me
};

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, int exit_code = kExitRuntime)
      : std::runtime_error(what), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// Bad configuration or usage, found before any work starts (exit 2).
class ConfigError : public Error {
 public:
  explicit ConfigError(const std::string& what) : Error(what, kExitUsage) {}
};

// Bad input found before training starts (missing shard, vocabulary, checkpoint chosen by path): exit 2.
class InputError : public Error {
 public:
  explicit InputError(const std::string& what) : Error(what, kExitUsage) {}
};

class IoError : public Error { using Error::Error; };
class DataError : public Error { using Error::Error; };
class CheckpointError : public Error { using Error::Error; };
class CommError : public Error { using Error::Error; };

namespace detail {
// Joins any streamable values into one string: cat("step ", 3, ": ", x).
template <typename... Args>
std::string cat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

[[noreturn]] void throw_check_failure(const char* file, int line, const std::string& condition,
                                      const std::string& message);
}  // namespace detail

using detail::cat;

// v with `digits` digits after the point ("%.*f"): the reports' and tables' numbers.
std::string fixed(double v, int digits);

}  // namespace zt

// Invariant checks that stay on in release builds; the message names both sides.
#define ZT_CHECK(cond, ...)                                                                   \
  do {                                                                                        \
    if (!(cond)) ::zt::detail::throw_check_failure(__FILE__, __LINE__, #cond,                 \
                                                   ::zt::cat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)

#define ZT_CHECK_OP_(a, b, op, ...)                                                              \
  do {                                                                                           \
    const auto& zt_a_ = (a);                                                                     \
    const auto& zt_b_ = (b);                                                                     \
    if (!(zt_a_ op zt_b_))                                                                       \
      ::zt::detail::throw_check_failure(                                                         \
          __FILE__, __LINE__, ::zt::cat(#a " " #op " " #b " (", zt_a_, " vs ", zt_b_, ")"),      \
          ::zt::cat("" __VA_OPT__(, ) __VA_ARGS__));                                             \
  } while (0)

#define ZT_CHECK_EQ(a, b, ...) ZT_CHECK_OP_(a, b, ==, __VA_ARGS__)
#define ZT_CHECK_NE(a, b, ...) ZT_CHECK_OP_(a, b, !=, __VA_ARGS__)
#define ZT_CHECK_LT(a, b, ...) ZT_CHECK_OP_(a, b, <, __VA_ARGS__)
#define ZT_CHECK_LE(a, b, ...) ZT_CHECK_OP_(a, b, <=, __VA_ARGS__)
#define ZT_CHECK_GE(a, b, ...) ZT_CHECK_OP_(a, b, >=, __VA_ARGS__)
#define ZT_CHECK_GT(a, b, ...) ZT_CHECK_OP_(a, b, >, __VA_ARGS__)
