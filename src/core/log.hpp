// The one global: a rank-aware logger. Rank 0 prints by default; with all_ranks every rank prints
// and each line starts with "[rank r]". Errors from any rank always print, prefixed "rank N:".
#pragma once

#include <string>

#include "core/error.hpp"

namespace zt::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// Set once the rank is known (dist::World does it); before that, the process logs as rank 0.
void set_rank(int rank, int world_size);
void set_all_ranks(bool all_ranks);
void set_level(Level level);
int rank();

// Writes one line (to stdout for debug/info, stderr for warn/error) if this rank should.
void write(Level level, const std::string& line);
// Writes "rank N: message" to stderr from any rank, whatever the settings: for fatal errors.
void fatal(const std::string& message);
// Writes "rank N: warning: message" to stderr from any rank (events a test or operator must see).
void warn_any_rank(const std::string& message);

template <typename... Args> void debug(Args&&... args) { write(Level::kDebug, cat(args...)); }
template <typename... Args> void info(Args&&... args) { write(Level::kInfo, cat(args...)); }
template <typename... Args> void warn(Args&&... args) { write(Level::kWarn, cat(args...)); }
template <typename... Args> void error(Args&&... args) { write(Level::kError, cat(args...)); }

}  // namespace zt::log
