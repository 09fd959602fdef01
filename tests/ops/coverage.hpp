// Which backend ops the registry covers: the ops are read from the Backend class in backend.hpp itself
// (its virtual methods, pure or with a default body, less the memory side), so the list cannot drift
// from the interface; the calls each case makes are recorded by running it dry through RecordingBackend.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "tests/ops/op_case.hpp"

namespace zt::backend::ops {

// backend.hpp's memory side (allocation, copies, synchronisation, statistics): tested by
// tests/unit/backend/test_memory.cpp and tests/gpu/test_cuda_memory.cpp, not by op cases; and the
// attention implementation's description (tests/unit/backend/test_attention_support.cpp).
inline const std::set<std::string> kMemoryMethods = {"name",         "allocate", "release",     "copy_from_host",
                                                     "copy_to_host", "copy",     "synchronize", "memory_stats",
                                                     "reset_peak",   "stream",   "attention_summary"};

// The virtual methods of `class Backend` in the header text, less kMemoryMethods.
std::set<std::string> interface_ops(const std::string& header_text);

// The ops the cases call, each case run once without computing anything (its values are still made).
std::set<std::string> ops_called(const std::vector<const OpCase*>& cases);

}  // namespace zt::backend::ops
