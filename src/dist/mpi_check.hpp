// ZT_MPI: every MPI call is checked; a failure throws CommError naming the call. Internal to dist/.
#pragma once

#include <mpi.h>

#include "core/error.hpp"

namespace zt::dist {
[[noreturn]] void throw_mpi_error(const char* call, int rc, const char* file, int line);
}

#define ZT_MPI(call)                                                                                  \
  do {                                                                                                \
    int zt_mpi_rc_ = (call);                                                                          \
    if (zt_mpi_rc_ != MPI_SUCCESS) ::zt::dist::throw_mpi_error(#call, zt_mpi_rc_, __FILE__, __LINE__); \
  } while (0)
