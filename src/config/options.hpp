// The option table: every configuration key once, with its type, default (the Config member's
// initializer), help text and check. It generates --help, --print-config and the configuration reference.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"

namespace zt::config {

struct Option {
  std::string key;         // dotted: "optim.lr" is [optim] lr=... in the INI file
  std::string value_kind;  // what the value looks like in --help: INT, NUM, BOOL, STR, or a|b|c
  std::string help;
  // Parses text into the field, checking it; throws ConfigError naming key, value and what is allowed.
  std::function<void(Config&, const std::string& text)> assign;
  // The field's value as text that assign() reads back to the same value.
  std::function<std::string(const Config&)> format;
  // A model key only one family reads: model.arch's value ("llama"); empty: every family's. validate()
  // refuses it for another family unless it is at its default or `computes_nothing` says its value is
  // what that family computes anyway (n_kv_head = n_head is GPT-2's attention).
  std::string family;
  std::function<bool(const Config&)> computes_nothing;

  std::string section() const { return key.substr(0, key.find('.')); }
  std::string name() const { return key.substr(key.find('.') + 1); }
};

const std::vector<Option>& options();
const Option* find_option(std::string_view key);
// The known key closest to an unknown one (for "did you mean"), or "" if none is close.
std::string nearest_key(std::string_view key);

// Text forms of the enums, shared by parsing, printing and error messages.
std::string to_string(Device v);
std::string to_string(Precision v);
std::string to_string(Recompute v);
std::string to_string(Offload v);
std::string to_string(OffloadTo v);
std::string to_string(ReduceDtype v);
std::string to_string(TiedReduce v);
std::string to_string(Attention v);
std::string to_string(Schedule v);
std::string to_string(CommBackend v);
std::string to_string(Arch v);
std::string to_string(PipeSchedule v);
std::string to_string(RlAlgorithm v);

}  // namespace zt::config
