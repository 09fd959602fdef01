// Text <-> typed value conversion for configuration keys, with errors that name the key and the value.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "config/config.hpp"
#include "core/error.hpp"

namespace zt::config::value {

// Text as a message may show it: control bytes (a NUL from a UTF-16 file, a terminal escape from a binary
// one) as \xNN, and a long text cut at 200 bytes with its length; "''" for the empty text.
std::string printable(std::string_view text);

[[noreturn]] inline void reject(std::string_view key, std::string_view text, std::string_view why) {
  throw ConfigError(cat(key, "=", printable(text), ": ", why));
}

// An integer in [lo, hi]: one outside it, or beyond 64 bits, is rejected naming the range.
std::int64_t parse_int(std::string_view key, std::string_view text, std::int64_t lo, std::int64_t hi);
std::uint64_t parse_uint(std::string_view key, std::string_view text, std::uint64_t lo, std::uint64_t hi);
double parse_double(std::string_view key, std::string_view text);
bool parse_bool(std::string_view key, std::string_view text);
std::string format_double(double v);  // shortest text that parses back to the same double
// Levenshtein distance, for "did you mean" on an unknown key or flag.
std::size_t edit_distance(std::string_view a, std::string_view b);

// Enum names: one table per enum, used to parse, print and list the allowed values.
template <typename E> struct EnumNames;
template <> struct EnumNames<Device> {
  static constexpr std::array<std::pair<Device, const char*>, 3> kNames{
      {{Device::kAuto, "auto"}, {Device::kCpu, "cpu"}, {Device::kCuda, "cuda"}}};
};
template <> struct EnumNames<Precision> {
  static constexpr std::array<std::pair<Precision, const char*>, 3> kNames{
      {{Precision::kFp32, "fp32"}, {Precision::kBf16, "bf16"}, {Precision::kFp16, "fp16"}}};
};
template <> struct EnumNames<Recompute> {
  static constexpr std::array<std::pair<Recompute, const char*>, 3> kNames{
      {{Recompute::kNone, "none"}, {Recompute::kFull, "full"}, {Recompute::kSelective, "selective"}}};
};
template <> struct EnumNames<LoraBaseDtype> {
  static constexpr std::array<std::pair<LoraBaseDtype, const char*>, 4> kNames{
      {{LoraBaseDtype::kAuto, "auto"}, {LoraBaseDtype::kNf4, "nf4"}, {LoraBaseDtype::kBf16, "bf16"},
       {LoraBaseDtype::kFp32, "fp32"}}};
};
template <> struct EnumNames<Offload> {
  static constexpr std::array<std::pair<Offload, const char*>, 3> kNames{
      {{Offload::kNone, "none"}, {Offload::kOptimizer, "optimizer"}, {Offload::kParams, "params"}}};
};
template <> struct EnumNames<OffloadTo> {
  static constexpr std::array<std::pair<OffloadTo, const char*>, 2> kNames{
      {{OffloadTo::kHost, "host"}, {OffloadTo::kNvme, "nvme"}}};
};
template <> struct EnumNames<ReduceDtype> {
  static constexpr std::array<std::pair<ReduceDtype, const char*>, 2> kNames{
      {{ReduceDtype::kFp32, "fp32"}, {ReduceDtype::kCompute, "compute"}}};
};
template <> struct EnumNames<TiedReduce> {
  static constexpr std::array<std::pair<TiedReduce, const char*>, 3> kNames{
      {{TiedReduce::kAuto, "auto"}, {TiedReduce::kTrue, "true"}, {TiedReduce::kFalse, "false"}}};
};
template <> struct EnumNames<Attention> {
  static constexpr std::array<std::pair<Attention, const char*>, 3> kNames{
      {{Attention::kAuto, "auto"}, {Attention::kCudnn, "cudnn"}, {Attention::kNative, "native"}}};
};
template <> struct EnumNames<HangPhase> {
  static constexpr std::array<std::pair<HangPhase, const char*>, 9> kNames{
      {{HangPhase::kStepEnd, "step_end"}, {HangPhase::kForward, "forward"}, {HangPhase::kBackward, "backward"},
       {HangPhase::kReduce, "reduce"}, {HangPhase::kOptimizer, "optimizer"}, {HangPhase::kCkptWrite, "ckpt_write"},
       {HangPhase::kCkptCommit, "ckpt_commit"}, {HangPhase::kResume, "resume"}, {HangPhase::kGenerate, "generate"}}};
};
template <> struct EnumNames<HangMode> {
  static constexpr std::array<std::pair<HangMode, const char*>, 3> kNames{
      {{HangMode::kSleep, "sleep"}, {HangMode::kSigstop, "sigstop"}, {HangMode::kSigkill, "sigkill"}}};
};
template <> struct EnumNames<Schedule> {
  static constexpr std::array<std::pair<Schedule, const char*>, 4> kNames{
      {{Schedule::kCosine, "cosine"}, {Schedule::kLinear, "linear"}, {Schedule::kSqrt, "sqrt"}, {Schedule::kConstant, "constant"}}};
};
template <> struct EnumNames<CommBackend> {
  static constexpr std::array<std::pair<CommBackend, const char*>, 3> kNames{
      {{CommBackend::kAuto, "auto"}, {CommBackend::kNccl, "nccl"}, {CommBackend::kMpi, "mpi"}}};
};

template <> struct EnumNames<DataVerify> {
  static constexpr std::array<std::pair<DataVerify, const char*>, 2> kNames{
      {{DataVerify::kOnRead, "on_read"}, {DataVerify::kFull, "full"}}};
};
template <> struct EnumNames<Arch> {
  static constexpr std::array<std::pair<Arch, const char*>, 2> kNames{{{Arch::kGpt2, "gpt2"}, {Arch::kLlama, "llama"}}};
};
template <> struct EnumNames<PipeSchedule> {
  static constexpr std::array<std::pair<PipeSchedule, const char*>, 2> kNames{
      {{PipeSchedule::kOneFOneB, "1f1b"}, {PipeSchedule::kInterleaved, "interleaved"}}};
};
template <> struct EnumNames<RopeScaling> {
  static constexpr std::array<std::pair<RopeScaling, const char*>, 2> kNames{
      {{RopeScaling::kNone, "none"}, {RopeScaling::kLlama3, "llama3"}}};
};
template <> struct EnumNames<TieEmbeddings> {
  static constexpr std::array<std::pair<TieEmbeddings, const char*>, 3> kNames{
      {{TieEmbeddings::kAuto, "auto"}, {TieEmbeddings::kTrue, "true"}, {TieEmbeddings::kFalse, "false"}}};
};

template <> struct EnumNames<RlAlgorithm> {
  static constexpr std::array<std::pair<RlAlgorithm, const char*>, 3> kNames{
      {{RlAlgorithm::kGrpo, "grpo"}, {RlAlgorithm::kGspo, "gspo"}, {RlAlgorithm::kPpo, "ppo"}}};
};
template <> struct EnumNames<KlEstimator> {
  static constexpr std::array<std::pair<KlEstimator, const char*>, 2> kNames{{{KlEstimator::kK1, "k1"}, {KlEstimator::kK3, "k3"}}};
};
template <> struct EnumNames<LossAggregation> {
  static constexpr std::array<std::pair<LossAggregation, const char*>, 3> kNames{
      {{LossAggregation::kTokenMean, "token-mean"},
       {LossAggregation::kSeqMeanTokenMean, "seq-mean-token-mean"},
       {LossAggregation::kSeqMeanTokenSum, "seq-mean-token-sum"}}};
};

template <typename E>
std::string enum_choices() {
  std::string out;
  for (const auto& [v, name] : EnumNames<E>::kNames) {
    if (!out.empty()) out += '|';
    out += name;
  }
  return out;
}

template <typename E>
std::string enum_name(E v) {
  for (const auto& [value, name] : EnumNames<E>::kNames)
    if (value == v) return name;
  return "?";
}

template <typename E>
E parse_enum(std::string_view key, std::string_view text) {
  for (const auto& [value, name] : EnumNames<E>::kNames)
    if (text == name) return value;
  reject(key, text, cat("not one of ", enum_choices<E>()));
}

}  // namespace zt::config::value
