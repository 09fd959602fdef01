// Typed reads of the JSON files ztrain takes from other tools (a model's config.json, a PEFT
// adapter_config.json): a field of the wrong type is a ConfigError naming the file, the key, what is
// there and what was expected, never a JSON library exception; null reads as absent (transformers
// writes "n_inner": null for "the default").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace zt::config {

// The JSON object in `path`: a regular file (not a directory), valid JSON, an object. `what` says what the
// file is for the messages ("a Hugging Face model's config.json").
nlohmann::json read_json_object(const std::string& path, const std::string& what);

class JsonFields {
 public:
  // `incomplete`: why a required field's absence is fatal ("it is not a complete model config.json").
  // prefix: the object's path inside the file, for nested objects ("rope_scaling.").
  JsonFields(const nlohmann::json& object, std::string file, std::string incomplete, std::string prefix = "");

  bool has(const std::string& key) const;  // present and not null
  // Each returns the field, or `fallback` when absent (no fallback: required).
  std::int64_t integer(const std::string& key, std::optional<std::int64_t> fallback = {}) const;
  double number(const std::string& key, std::optional<double> fallback = {}) const;
  bool boolean(const std::string& key, std::optional<bool> fallback = {}) const;
  std::string string(const std::string& key, std::optional<std::string> fallback = {}) const;
  std::vector<std::string> strings(const std::string& key) const;  // a list of strings (required)
  JsonFields object(const std::string& key) const;                 // a nested object (required)
  // The field as JSON text, for messages ("null" when absent).
  std::string text(const std::string& key) const;
  const std::string& file() const { return file_; }
  std::string path(const std::string& key) const { return prefix_ + key; }  // "rope_scaling.factor"
  [[noreturn]] void wrong_type(const std::string& key, const char* expected) const;

 private:
  const nlohmann::json& need(const std::string& key) const;  // present, or the "incomplete" error

  const nlohmann::json& object_;
  std::string file_, incomplete_, prefix_;
};

}  // namespace zt::config
