// A small owner of cuDNN 9 backend-API objects (cudnn_graph.h): descriptors, an operation graph built
// from tensors and pointwise / matmul / reduction / reshape operations, the heuristics' engine configs,
// a finalised execution plan, and its execution through a variant pack. cudnn-frontend's C++ graph
// library does this in general; we need only what the SDPA graphs (cudnn_sdpa.cpp) use.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace zt::backend::cuda::cudnn {

// A failed cuDNN call throws zt::Error naming the call, cuDNN's status and its last error message.
[[noreturn]] void throw_cudnn_error(const char* call, cudnnStatus_t status, const char* file, int line);
#define ZT_CUDNN_CHECK(call)                                                                      \
  do {                                                                                            \
    const cudnnStatus_t zt_cudnn_rc_ = (call);                                                    \
    if (zt_cudnn_rc_ != CUDNN_STATUS_SUCCESS)                                                     \
      ::zt::backend::cuda::cudnn::throw_cudnn_error(#call, zt_cudnn_rc_, __FILE__, __LINE__);     \
  } while (0)

// One backend descriptor (cudnnBackendCreateDescriptor .. DestroyDescriptor). Move-only.
class Descriptor {
 public:
  Descriptor() = default;
  explicit Descriptor(cudnnBackendDescriptorType_t type);
  Descriptor(Descriptor&& other) noexcept : desc_(other.desc_) { other.desc_ = nullptr; }
  Descriptor& operator=(Descriptor&& other) noexcept;
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor();

  cudnnBackendDescriptor_t get() const { return desc_; }
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, std::int64_t count, const void* values);
  void set_i64(cudnnBackendAttributeName_t name, std::int64_t v) { set(name, CUDNN_TYPE_INT64, 1, &v); }
  void set_dtype(cudnnBackendAttributeName_t name, cudnnDataType_t v) { set(name, CUDNN_TYPE_DATA_TYPE, 1, &v); }
  void set_desc(cudnnBackendAttributeName_t name, const Descriptor& d);
  void finalize();

 private:
  cudnnBackendDescriptor_t desc_ = nullptr;
};

// 4-D dims and strides in elements, as cuDNN's SDPA graphs use them ([B, H, rows, cols]).
struct Shape {
  std::vector<std::int64_t> dims, strides;
};

using Uid = std::int64_t;

// A finalised execution plan and the device workspace its engine needs. It keeps the operation graph
// and the engine config it was made from alive as long as itself, as cudnn-frontend does (with the
// GraphBuilder's tensors and operations, which its owner keeps).
struct ExecutionPlan {
  Descriptor graph, config;  // declared first: destroyed after the plan
  Descriptor plan;
  std::int64_t workspace_bytes = 0;
  std::string engine;  // "engine config 1 of 4", for logs
};

// Tensors and operations added in order, then built into one operation graph and plan.
class GraphBuilder {
 public:
  // A tensor with this uid; virtual ones live only inside the fused kernel.
  void tensor(Uid uid, const Shape& shape, cudnnDataType_t dtype, bool is_virtual);
  // A scalar passed by value at execution (a host pointer in the variant pack): [1,1,1,1] f32.
  void scalar(Uid uid);
  // y = mode(x[, b[, t]]), computed in `compute` (f32 unless a comparison); axis for GEN_INDEX.
  void pointwise(cudnnPointwiseMode_t mode, Uid x, Uid y, Uid b = kNone, Uid t = kNone,
                 cudnnDataType_t compute = CUDNN_DATA_FLOAT, std::int64_t axis = -1);
  void matmul(Uid a, Uid b, Uid c);  // batched c = a @ b over the two last dims, f32 accumulation
  void reduction(cudnnReduceTensorOp_t op, Uid x, Uid y);  // over the dims where y has extent 1
  void reshape(Uid x, Uid y);                               // y is x seen with other dims/strides

  // The operation graph of everything added, finalised (cuDNN checks how the operations connect).
  // handle: the device's cuDNN handle, or null where there is none (the CPU-side graph tests).
  Descriptor operation_graph(cudnnHandle_t handle) const;
  // The operation graph, the heuristics' (mode A) engine configs in their order, and the first that
  // finalises. deterministic: skip configs cuDNN notes as non-deterministic. Throws zt::Error listing
  // what was tried when none does (the graph is not one cuDNN's fused engines take, or not on this GPU).
  ExecutionPlan build(cudnnHandle_t handle, bool deterministic) const;
  std::size_t operations() const { return ops_.size(); }

  static constexpr Uid kNone = -1;

 private:
  const Descriptor& at(Uid uid) const;
  std::map<Uid, Descriptor> tensors_;
  std::vector<Descriptor> ops_;  // the operation descriptors, each finalised
  std::vector<Descriptor> aux_;  // their pointwise / matmul / reduction descriptors (kept alive)
};

// Queues the plan on the handle's stream with the given tensors (uid -> device pointer; by-value
// scalars -> host pointer) and workspace. No host synchronisation.
void execute(cudnnHandle_t handle, const ExecutionPlan& plan, const std::vector<Uid>& uids,
             const std::vector<void*>& pointers, void* workspace);

}  // namespace zt::backend::cuda::cudnn
