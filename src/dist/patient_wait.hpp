// A wait for every rank that lasts as long as the ranks still working prove they are alive: for work whose
// time differs per rank by more than a collective's deadline (zgen's data-parallel groups generate their
// shares of the prompts for different times: a fixed deadline from the first arrival lost every rank's
// samples when one group needed longer; outside sweep 36 F6). Each rank calls beat() from its work's loop
// (a message to rank 0 at most every interval, and rank 0's to the others); arrive() then waits until
// every rank has arrived, and throws CommError naming a rank that was silent for timeout_s (stopped, hung
// or dead), as a collective's deadline would. A stalled rank is found; a slow one is waited for.
// Plain C++ header: mpi.h stays in patient_wait.cpp.
#pragma once

#include <memory>
#include <string>

#include "dist/world.hpp"

namespace zt::dist {

class PatientWait {
 public:
  // Collective over the world: a communicator of its own. what: the wait's name in errors ("zgen's ranks
  // finishing their samples"); limit_words: what timeout_s is in them ("--timeout-s=600 s"). lockstep:
  // the ranks working in collectives together (a tensor-parallel group: consecutive blocks of that many
  // ranks, dist::Grid's order), named with a silent rank, since a stopped rank's partners fall silent in
  // the collective they wait in and the ranks that still hear nothing cannot tell which of them stopped.
  PatientWait(const World& world, double timeout_s, std::string what, std::string limit_words, int lockstep = 1);
  ~PatientWait();
  PatientWait(const PatientWait&) = delete;
  PatientWait& operator=(const PatientWait&) = delete;

  // Cheap: a heartbeat when one is due, and the peers' messages read. Call often from the work's loop.
  void beat();
  // Every rank calls it once, when its work is done; returns once all have.
  void arrive();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zt::dist
