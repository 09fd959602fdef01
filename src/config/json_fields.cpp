// Typed JSON fields with errors naming file and key (json_fields.hpp).
#include "config/json_fields.hpp"

#include <filesystem>
#include <fstream>

#include "core/error.hpp"

namespace zt::config {

nlohmann::json read_json_object(const std::string& path, const std::string& what) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (std::filesystem::is_directory(status))
    throw ConfigError(cat(path, " is a directory, not a file: ", what, " is a JSON file"));
  std::ifstream in(path);
  if (!std::filesystem::is_regular_file(status) || !in)
    throw ConfigError(cat(path, " cannot be read (", std::filesystem::exists(status) ? "not a regular file" : "no such file",
                          "): ", what, " is a JSON file"));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(cat(path, ": not valid JSON (", e.what(), "); ", what, " is a JSON object"));
  }
  if (!j.is_object()) throw ConfigError(cat(path, ": holds a JSON ", j.type_name(), ", not an object; ", what, " is a JSON object"));
  return j;
}

JsonFields::JsonFields(const nlohmann::json& object, std::string file, std::string incomplete, std::string prefix)
    : object_(object), file_(std::move(file)), incomplete_(std::move(incomplete)), prefix_(std::move(prefix)) {}

bool JsonFields::has(const std::string& key) const {
  const auto it = object_.find(key);
  return it != object_.end() && !it->is_null();
}

void JsonFields::wrong_type(const std::string& key, const char* expected) const {
  std::string shown = object_.at(key).dump();
  if (shown.size() > 80) shown = shown.substr(0, 77) + "...";
  throw ConfigError(cat(file_, ": \"", path(key), "\" is ", shown, " (a JSON ", object_.at(key).type_name(),
                        "); expected ", expected, ". Fix the file (the model's own config.json has the right types)"));
}

const nlohmann::json& JsonFields::need(const std::string& key) const {
  if (!has(key)) throw ConfigError(cat(file_, ": has no \"", path(key), "\"; ", incomplete_));
  return object_.at(key);
}

std::int64_t JsonFields::integer(const std::string& key, std::optional<std::int64_t> fallback) const {
  if (!has(key) && fallback) return *fallback;
  const nlohmann::json& v = need(key);
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
    wrong_type(key, "an integer below 2^63");
  if (!v.is_number_integer()) wrong_type(key, "an integer");
  return v.get<std::int64_t>();
}

double JsonFields::number(const std::string& key, std::optional<double> fallback) const {
  if (!has(key) && fallback) return *fallback;
  const nlohmann::json& v = need(key);
  if (!v.is_number()) wrong_type(key, "a number");
  return v.get<double>();
}

bool JsonFields::boolean(const std::string& key, std::optional<bool> fallback) const {
  if (!has(key) && fallback) return *fallback;
  const nlohmann::json& v = need(key);
  if (!v.is_boolean()) wrong_type(key, "true or false");
  return v.get<bool>();
}

std::string JsonFields::string(const std::string& key, std::optional<std::string> fallback) const {
  if (!has(key) && fallback) return *fallback;
  const nlohmann::json& v = need(key);
  if (!v.is_string()) wrong_type(key, "a string");
  return v.get<std::string>();
}

std::vector<std::string> JsonFields::strings(const std::string& key) const {
  const nlohmann::json& v = need(key);
  if (!v.is_array()) wrong_type(key, "a list of strings");
  std::vector<std::string> out;
  for (const nlohmann::json& s : v) {
    if (!s.is_string()) wrong_type(key, "a list of strings");
    out.push_back(s.get<std::string>());
  }
  return out;
}

JsonFields JsonFields::object(const std::string& key) const {
  const nlohmann::json& v = need(key);
  if (!v.is_object()) wrong_type(key, "an object");
  return JsonFields(v, file_, incomplete_, prefix_ + key + ".");
}

std::string JsonFields::text(const std::string& key) const { return has(key) ? object_.at(key).dump() : "null"; }

}  // namespace zt::config
