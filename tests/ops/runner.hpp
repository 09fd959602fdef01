// The drivers of the op-case registry: each runs one case and returns what is wrong (an empty list when
// nothing is), so the tests report every difference and the driver's own tests can see it fail.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tests/ops/op_case.hpp"

namespace zt::backend::ops {

using Failures = std::vector<std::string>;

// The case on `be` in compute dtype x against the CPU reference `ref` (f32 on X's values): the forward
// outputs, then the backward's (which reads the reference's forward results unless the case says
// kOwnForward), each within its tolerance (or `tol`, when given), the host scalars, the guard bytes
// after every tensor, and the case's own property (OpCase::also).
Failures compare(const OpCase& c, Backend& ref, Backend& be, DType x, std::optional<Tol> tol = std::nullopt);

// The case twice on `be`: the same bytes in every output and the same scalars.
Failures repeat(const OpCase& c, Backend& be, DType x);

// The finite-difference check of the case's backward (OpCase::fd) on the CPU backend `cpu`, in f32.
// Two forward passes per differentiated element: cases whose differentiated inputs exceed
// kFdMaxElements are not differenced (fd_fits says so; the CPU-only cases are made small for it).
inline constexpr std::int64_t kFdMaxElements = 1200;
bool fd_fits(const OpCase& c);
Failures finite_differences(const OpCase& c, Backend& cpu);

// A refusal on `be`: the call throws zt::Error naming what it must.
Failures refuses(const Refusal& r, Backend& be);

// "layernorm N=7 C=96 [bf16]"
std::string label(const OpCase& c, DType x);

}  // namespace zt::backend::ops
