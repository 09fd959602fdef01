// The one place exceptions are caught in a program (docs/STYLE.md §5). Start-up errors are agreed on by
// all ranks (so a bad config ends the job once, with exit 2, and rank 0's message); errors once work
// has begun print "rank N: ..." and abort the whole job, so no peer hangs in a collective.
#pragma once

#include <functional>
#include <string_view>

#include "dist/world.hpp"

namespace zt::apps {

// Runs `startup` on every rank and agrees on its outcome. Returns 0 if every rank succeeded; else
// the largest exit code over ranks, after the lowest failing rank printed its message. The agreement
// is under the world's watchdog: a rank that never arrives ends the job (exit 1) naming `what`.
int agree_on_startup(const dist::World& world, const std::function<void()>& startup,
                     std::string_view what = "configuration and checks");

// Runs `work`; any exception prints "rank N: what" and ends every rank of the job with its code.
int run_or_abort(const dist::World& world, const std::function<int()>& work);

// A program's main: starts MPI (a singleton without mpirun), then returns run(world). A failed start is
// "PROGRAM: MPI start-up failed: ..." on stderr and exit 1.
int main_with_world(const char* program, int argc, char** argv, const std::function<int(dist::World&)>& run);

}  // namespace zt::apps
