// One rank's pipeline stage (pipeline_stage.hpp).
#include "train/pipeline_stage.hpp"

#include <algorithm>
#include <chrono>

#include "config/options.hpp"
#include "core/error.hpp"
#include "model/stage_split.hpp"
#include "train/shard_map.hpp"

namespace zt::train {

PipelineStage::PipelineStage(backend::Backend& backend, const model::ParamTable& global, const dist::Grid& grid, int vpp,
                             std::int64_t micro_batches, const model::ModelOptions& models,
                             const std::vector<int>& blocks)
    : be_(backend), grid_(grid), cut_(model::PipelineCut::make(global.shape(), grid.pp, vpp, blocks)),
      table_(model::part_table(global, cut_, grid.pp_rank(), grid.tp)),
      micro_batches_(micro_batches),
      models_options_(models),
      ops_(model::pipeline_ops({grid.pp, vpp, static_cast<int>(micro_batches)}, grid.pp_rank())) {
  ZT_CHECK(grid.tp == 1 || (models.tp_group && models.tp_group->size() == grid.tp),
           "pipeline: parallel.tp > 1 needs the TP group");
  if (grid.tp == 1) models_options_.tp_group = nullptr;
  const std::vector<model::Stage> chunks = cut_.chunks(grid.pp_rank());
  for (int c = 0; c < vpp; ++c) {  // as many activation sets per chunk as its micro-batches in flight
    auto& slots = models_.emplace_back();
    for (int k = 0; k < model::in_flight(ops_, c); ++k) slots.push_back(new_model(chunks[static_cast<std::size_t>(c)]));
  }
}

// A chunk's blocks on the rank's table: the tensor-parallel model of its TP shard when grid.tp > 1 (its
// boundary tensors are then this rank's part of the residual stream, the same size on both sides of
// every send: TP rank r of one stage talks to TP rank r of the next).
std::unique_ptr<model::Model> PipelineStage::new_model(const model::Stage& chunk) {
  model::ModelOptions options = models_options_;
  options.stage = chunk;
  return model::make_model(be_, table_, options);
}

std::size_t PipelineStage::activation_bytes() const {
  std::size_t bytes = 0;
  for (const auto& chunk : models_)
    for (const auto& m : chunk) bytes += m->activation_bytes();
  return bytes;
}

void PipelineStage::connect(dist::Communicator& pipeline, dist::Communicator* embedding) {
  ZT_CHECK(pipeline.size() == grid_.pp && pipeline.rank() == grid_.pp_rank(), "pipeline: the group is not this pipeline");
  pipeline_ = &pipeline;
  embedding_ = embedding;
}

void PipelineStage::set_lora(model::Lora& lora, const model::ParamTable& adapters,
                             std::function<std::uint64_t(int micro)> first_row) {
  for (auto& chunk : models_)
    for (auto& m : chunk) m->set_lora(&lora);
  lora_ = &lora, trained_ = &adapters, lora_first_row_ = std::move(first_row);
}

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }
}  // namespace

void PipelineStage::timed_wait(dist::Work& work) {
  const auto t = Clock::now();
  work.wait();
  wait_ms_ += ms_since(t);
}

// Within a chunk micro-batches start and finish in order, so micro % slots never names one in flight.
PipelineStage::Slot PipelineStage::slot_of(const PipeOp& op) const {
  return {op.chunk, op.micro % static_cast<int>(models_[static_cast<std::size_t>(op.chunk)].size())};
}

void PipelineStage::receive(const PipeOp& op, model::Model& m) {
  if (op.recv_from < 0) return;
  const backend::Tensor into = op.kind == PipeOp::Kind::kForward ? m.stage_input() : m.stage_output_grad();
  const int stream = model::stream(op.kind, model::recv_chunk(op, grid_.pp, grid_.pp_rank()));
  timed_wait(*pipeline_->recv(dist::span_of(into), op.recv_from, stream));
}

void PipelineStage::send(const PipeOp& op, Slot slot, model::Model& m) {
  if (op.send_to < 0) return;
  const backend::Tensor from = op.kind == PipeOp::Kind::kForward ? m.stage_output() : m.stage_input_grad();
  be_.synchronize();  // the pass that wrote it has finished (a device backend computes on a stream)
  sends_.push_back({slot, pipeline_->send(dist::span_of(from), op.send_to, model::stream(op.kind, op.chunk))});
}

void PipelineStage::wait_sends(Slot slot) {
  for (Pending& p : sends_)
    if (p.slot == slot && p.work) timed_wait(*std::exchange(p.work, nullptr));
  std::erase_if(sends_, [](const Pending& p) { return !p.work; });
}

void PipelineStage::wait_all_sends() {
  for (Pending& p : sends_) timed_wait(*p.work);
  sends_.clear();
}

double PipelineStage::transfer_around(const PipeOp& op, const std::string& context, const std::string& detail,
                                      const std::function<double(model::Model&)>& pass) {
  pipeline_->set_context(cat(context, " pipeline stage ", grid_.pp_rank(), cut_.vpp > 1 ? cat(" chunk ", op.chunk) : "",
                             op.kind == PipeOp::Kind::kForward ? " forward" : " backward", detail));
  const Slot slot = slot_of(op);
  model::Model& m = model(slot);
  wait_sends(slot);  // the slot's buffers are free again
  receive(op, m);
  const double result = pass(m);
  send(op, slot, m);
  return result;
}

double PipelineStage::run(const PipeOp& op, const data::StepBatch& batch, model::ParamSource& params,
                          model::GradSink* grads, float dloss, const std::string& context) {
  const std::string micro = cat(" micro-batch ", op.micro + 1, "/", batch.grad_accum);
  return transfer_around(op, context, micro, [&](model::Model& m) {
    if (lora_) lora_->set_dropout(grads != nullptr, grads ? lora_first_row_(op.micro) : 0);
    if (op.kind == PipeOp::Kind::kBackward) {
      m.backward(params, *grads, dloss);
      return 0.0;
    }
    batch.split(op.micro, inputs_, targets_);
    m.set_segment_starts(batch.segments(op.micro));  // data.document_mask, else null
    m.set_positions(batch.positions(op.micro));      // data.reset_positions, else null
    return m.forward(inputs_.data(), targets_.data(), params);
  });
}

double PipelineStage::train(const data::StepBatch& batch, model::ParamSource& params, model::GradSink& grads,
                            float dloss, const std::string& context) {
  ZT_CHECK(pipeline_, "pipeline: connect() first");
  ZT_CHECK_EQ(batch.grad_accum, micro_batches_, "pipeline: micro-batches per step");
  const auto started = Clock::now();
  double loss = 0;
  for (const PipeOp& op : ops_) loss += run(op, batch, params, &grads, dloss, context);
  wait_all_sends();
  run_ms_ += ms_since(started);
  return loss;
}

double PipelineStage::evaluate(const data::StepBatch& batch, model::ParamSource& params, const std::string& context) {
  ZT_CHECK(pipeline_, "pipeline: connect() first");
  const double training_wait_ms = wait_ms_;  // an evaluation's waits are not the training step's bubble
  double loss = 0;
  const model::PipeShape shape{grid_.pp, cut_.vpp, static_cast<int>(batch.grad_accum)};
  for (const PipeOp& op : model::forward_ops(shape, grid_.pp_rank())) loss += run(op, batch, params, nullptr, 0, context);
  wait_all_sends();
  wait_ms_ = training_wait_ms;
  return loss;
}

std::vector<float> PipelineStage::next_token_logits(const std::int32_t* window, int n, model::ParamSource& params,
                                                   const std::string& context) {
  ZT_CHECK(pipeline_, "pipeline: connect() first");
  const double training_wait_ms = wait_ms_;  // a sample's waits are not the training step's bubble
  const std::size_t V = static_cast<std::size_t>(table_.shape().vocab_size);
  std::vector<double> row(V, 0.0);
  for (const PipeOp& op : model::forward_ops({grid_.pp, cut_.vpp, 1}, grid_.pp_rank())) {
    transfer_around(op, context, "", [&](model::Model& m) {
      m.set_segment_starts(nullptr);  // one prompt: no document mask
      const std::vector<float> logits = m.forward_row_logits(window, params, n - 1);  // [V] on the last stage, else {}
      if (!logits.empty()) std::copy_n(logits.begin(), V, row.begin());
      return 0.0;
    });
  }
  wait_all_sends();
  wait_ms_ = training_wait_ms;
  pipeline_->all_reduce_values(row, dist::ReduceOp::kSum);
  return {row.begin(), row.end()};
}

// The tied head's copy is parameter 0 of unit 0 on both the first and the last stage (stage_split.hpp).
void PipelineStage::reduce_gradients(optim::ZeroEngine& engine) {
  const bool holds_copy = cut_.holds_tied_head_copy(table_.shape(), grid_.pp_rank());
  const bool tied_end =
      !lora_ && grid_.pp > 1 && table_.shape().tie_embeddings && (grid_.pp_rank() == 0 || holds_copy);
  if (tied_end) {
    ZT_CHECK(embedding_ && embedding_->size() == 2, "pipeline: the embedding group must hold the first and last stage");
    const model::ParamInfo& emb = table_.params()[table_.first_param(0)];
    const backend::Tensor g = engine.grad_unit(0);
    embedding_->all_reduce({g.data, emb.numel, DType::kF32}, dist::ReduceOp::kSum)->wait();
  }
  engine.begin_backward(true);  // every unit once, in the model's backward order (stage 0's buckets)
  for (int u = trained_->n_units() - 1; u >= 0; --u)
    if (trained_->units()[static_cast<std::size_t>(u)].numel > 0) engine.grad_unit_done(u);
  engine.end_backward();
}

}  // namespace zt::train
