// Inputs every rank reads (init.from, a LoRA run's base, a PEFT adapter directory): a problem with one is
// every rank's, so it is printed once, by the lowest rank that found it, and every rank then ends with
// its exit code (ReportedError: the program's boundary prints nothing more). Before, each rank printed
// it and aborted the job: the same error once per rank, in any order.
#pragma once

#include <functional>
#include <string_view>

#include "core/error.hpp"
#include "dist/world.hpp"

namespace zt::train {

// An error the job has already printed, once, for every rank: ends this rank with its exit code, and the
// program's boundary (apps/boundary.cpp) prints nothing more.
class ReportedError : public Error {
 public:
  explicit ReportedError(int exit_code) : Error("(printed once, by the lowest rank that found it)", exit_code) {}
};

// Runs `read` (file reads and local work: it must join no collective, since a rank that fails skips the
// rest of it), then agrees over the ranks (World's agreement, under its deadline) on how it went. A
// zt::Error on any rank: the lowest failing rank prints its message and every rank throws ReportedError
// with the largest exit code.
void read_shared_input(const dist::World& world, const std::function<void()>& read, std::string_view what);

}  // namespace zt::train
