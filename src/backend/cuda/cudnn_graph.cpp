// cuDNN backend-API objects (cudnn_graph.hpp): descriptors, the operation graph, heuristics, the plan.
#include "backend/cuda/cudnn_graph.hpp"

#include <array>
#include <utility>

namespace zt::backend::cuda::cudnn {
namespace {

// The operation graph's and the plan's handle attributes are deprecated as of cuDNN 9.19 (a device
// property descriptor replaces them) but the 9.x releases before need them; cudnn-frontend still sets
// both. Setting them through this one function keeps the deprecation warning in one place.
void set_handle(Descriptor& d, cudnnBackendAttributeName_t name, cudnnHandle_t handle) {
  d.set(name, CUDNN_TYPE_HANDLE, 1, &handle);
}
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
constexpr cudnnBackendAttributeName_t kGraphHandle = CUDNN_ATTR_OPERATIONGRAPH_HANDLE;
constexpr cudnnBackendAttributeName_t kPlanHandle = CUDNN_ATTR_EXECUTION_PLAN_HANDLE;
#pragma GCC diagnostic pop

std::string last_error() {
  std::array<char, 512> message{};
  cudnnGetLastErrorString(message.data(), message.size());
  return message[0] != '\0' ? cat(" (", message.data(), ")") : std::string();
}

// Whether cuDNN notes the engine behind an engine config as non-deterministic (atomics).
bool is_nondeterministic(cudnnBackendDescriptor_t config) {
  Descriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t raw = engine.get();
  std::int64_t count = 0;
  ZT_CUDNN_CHECK(cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count,
                                          &raw));
  std::array<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT> notes{};
  ZT_CUDNN_CHECK(cudnnBackendGetAttribute(raw, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                          static_cast<std::int64_t>(notes.size()), &count, notes.data()));
  for (std::int64_t i = 0; i < count; ++i)
    if (notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) return true;
  return false;
}

// The heuristics' engine configs for a finalised operation graph, best first.
std::vector<Descriptor> engine_configs(const Descriptor& graph) {
  Descriptor heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  heur.finalize();
  std::int64_t count = 0;
  ZT_CUDNN_CHECK(
      cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr));
  std::vector<Descriptor> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (std::int64_t i = 0; i < count; ++i) {
    configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    raw.push_back(configs.back().get());
  }
  std::int64_t got = 0;
  if (count > 0)
    ZT_CUDNN_CHECK(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                            count, &got, raw.data()));
  configs.resize(static_cast<std::size_t>(got));
  return configs;
}

}  // namespace

void throw_cudnn_error(const char* call, cudnnStatus_t status, const char* file, int line) {
  throw Error(cat("cuDNN: ", call, " failed: ", cudnnGetErrorString(status), last_error(), " (", file, ":", line, ")"));
}

Descriptor::Descriptor(cudnnBackendDescriptorType_t type) { ZT_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &desc_)); }

Descriptor& Descriptor::operator=(Descriptor&& other) noexcept {
  if (this != &other) {
    if (desc_) cudnnBackendDestroyDescriptor(desc_);
    desc_ = std::exchange(other.desc_, nullptr);
  }
  return *this;
}

Descriptor::~Descriptor() {
  if (desc_) cudnnBackendDestroyDescriptor(desc_);  // fails only on a bad descriptor; destructors do not throw
}

void Descriptor::set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, std::int64_t count,
                     const void* values) {
  ZT_CUDNN_CHECK(cudnnBackendSetAttribute(desc_, name, type, count, values));
}

void Descriptor::set_desc(cudnnBackendAttributeName_t name, const Descriptor& d) {
  cudnnBackendDescriptor_t raw = d.get();
  set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
}

void Descriptor::finalize() { ZT_CUDNN_CHECK(cudnnBackendFinalize(desc_)); }

const Descriptor& GraphBuilder::at(Uid uid) const {
  const auto it = tensors_.find(uid);
  ZT_CHECK(it != tensors_.end(), "cuDNN graph: tensor uid ", uid, " used before it was added");
  return it->second;
}

void GraphBuilder::tensor(Uid uid, const Shape& shape, cudnnDataType_t dtype, bool is_virtual) {
  ZT_CHECK(!tensors_.contains(uid), "cuDNN graph: tensor uid ", uid, " added twice");
  ZT_CHECK(shape.dims.size() == shape.strides.size(), "cuDNN graph: dims and strides differ in rank");
  Descriptor t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  t.set_dtype(CUDNN_ATTR_TENSOR_DATA_TYPE, dtype);
  const auto rank = static_cast<std::int64_t>(shape.dims.size());
  t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, rank, shape.dims.data());
  t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, rank, shape.strides.data());
  t.set_i64(CUDNN_ATTR_TENSOR_UNIQUE_ID, uid);
  t.set_i64(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, 16);  // every pointer is checked for it before execution
  if (is_virtual) {
    const bool yes = true;
    t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &yes);
  }
  t.finalize();
  tensors_.emplace(uid, std::move(t));
}

void GraphBuilder::scalar(Uid uid) {
  ZT_CHECK(!tensors_.contains(uid), "cuDNN graph: tensor uid ", uid, " added twice");
  Descriptor t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const std::vector<std::int64_t> ones(4, 1);
  t.set_dtype(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_DATA_FLOAT);
  t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, ones.data());
  t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, ones.data());
  t.set_i64(CUDNN_ATTR_TENSOR_UNIQUE_ID, uid);
  t.set_i64(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, 16);
  const bool yes = true;
  t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &yes);
  t.finalize();
  tensors_.emplace(uid, std::move(t));
}

void GraphBuilder::pointwise(cudnnPointwiseMode_t mode, Uid x, Uid y, Uid b, Uid t, cudnnDataType_t compute,
                             std::int64_t axis) {
  Descriptor pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
  pw.set_dtype(CUDNN_ATTR_POINTWISE_MATH_PREC, compute);
  if (mode == CUDNN_POINTWISE_GEN_INDEX) pw.set_i64(CUDNN_ATTR_POINTWISE_AXIS, axis);
  pw.finalize();
  Descriptor op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
  op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, at(x));
  if (b != kNone) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, at(b));
  if (t != kNone) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, at(t));
  op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, at(y));
  const float one = 1.0f;  // y = op(alpha1 x, alpha2 b): both 1, as cudnn-frontend sets them
  op.set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one);
  op.set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one);
  op.finalize();
  aux_.push_back(std::move(pw));
  ops_.push_back(std::move(op));
}

void GraphBuilder::matmul(Uid a, Uid b, Uid c) {
  Descriptor mm(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
  mm.set_dtype(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_DATA_FLOAT);
  mm.finalize();
  Descriptor op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
  op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_ADESC, at(a));
  op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_BDESC, at(b));
  op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_CDESC, at(c));
  op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_DESC, mm);
  op.finalize();
  aux_.push_back(std::move(mm));
  ops_.push_back(std::move(op));
}

void GraphBuilder::reduction(cudnnReduceTensorOp_t mode, Uid x, Uid y) {
  Descriptor rd(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
  rd.set_dtype(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_DATA_FLOAT);
  rd.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode);
  rd.finalize();
  Descriptor op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
  op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, rd);
  op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, at(x));
  op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, at(y));
  op.finalize();
  aux_.push_back(std::move(rd));
  ops_.push_back(std::move(op));
}

void GraphBuilder::reshape(Uid x, Uid y) {
  Descriptor op(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
  op.set_desc(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, at(x));
  op.set_desc(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, at(y));
  op.finalize();
  ops_.push_back(std::move(op));
}

Descriptor GraphBuilder::operation_graph(cudnnHandle_t handle) const {
  Descriptor graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  std::vector<cudnnBackendDescriptor_t> ops;
  for (const Descriptor& op : ops_) ops.push_back(op.get());
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<std::int64_t>(ops.size()),
            ops.data());
  if (handle != nullptr) set_handle(graph, kGraphHandle, handle);
  graph.finalize();
  return graph;
}

ExecutionPlan GraphBuilder::build(cudnnHandle_t handle, bool deterministic) const {
  Descriptor graph = operation_graph(handle);
  std::vector<Descriptor> configs = engine_configs(graph);
  std::string tried;
  for (std::size_t i = 0; i < configs.size(); ++i) {
    if (deterministic && is_nondeterministic(configs[i].get())) {
      tried += cat("; config ", i, ": non-deterministic, skipped");
      continue;
    }
    Descriptor plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    set_handle(plan, kPlanHandle, handle);
    plan.set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, configs[i]);
    const cudnnStatus_t status = cudnnBackendFinalize(plan.get());
    if (status != CUDNN_STATUS_SUCCESS) {
      tried += cat("; config ", i, ": ", cudnnGetErrorString(status), last_error());
      continue;
    }
    ExecutionPlan out;
    std::int64_t count = 0;
    ZT_CUDNN_CHECK(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                            &count, &out.workspace_bytes));
    out.plan = std::move(plan);
    out.engine = cat("engine config ", i + 1, " of ", configs.size());
    out.graph = std::move(graph);
    out.config = std::move(configs[i]);
    return out;
  }
  throw Error(cat("cuDNN: none of the heuristics' ", configs.size(), " engine configs runs this graph", tried));
}

void execute(cudnnHandle_t handle, const ExecutionPlan& plan, const std::vector<Uid>& uids,
             const std::vector<void*>& pointers, void* workspace) {
  ZT_CHECK_EQ(uids.size(), pointers.size(), "cuDNN variant pack: one pointer per uid");
  Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  const auto n = static_cast<std::int64_t>(uids.size());
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, pointers.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  pack.finalize();
  ZT_CUDNN_CHECK(cudnnBackendExecute(handle, plan.plan.get(), pack.get()));
}

}  // namespace zt::backend::cuda::cudnn
