// Golden files for the PyTorch reference tests: running the Python script that writes them (skipping
// cleanly when PyTorch is missing) and reading the safetensors-format result.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace zt::reference {

class Golden {
 public:
  static Golden load(const std::string& path);
  bool has(const std::string& name) const { return arrays_.count(name) != 0; }
  const std::vector<std::int64_t>& shape(const std::string& name) const { return at(name).shape; }
  const std::string& dtype(const std::string& name) const { return at(name).dtype; }  // "F32", "I32", ...
  std::vector<double> f64(const std::string& name) const;  // F32 or F64 widened to double
  std::vector<float> f32(const std::string& name) const;   // F32 only (inputs)
  std::vector<std::int32_t> i32(const std::string& name) const;

 private:
  struct Array {
    std::string dtype;
    std::vector<std::int64_t> shape;
    std::vector<char> raw;
  };
  const Array& at(const std::string& name) const;
  std::map<std::string, Array> arrays_;
};

// Runs `python script args` with the PyTorch interpreter CMake found. Returns "" when it succeeded, or why
// the test should be skipped (no interpreter, or the script exited 77 because torch is missing); throws
// on any other failure.
std::string run_reference_script(const std::string& script, const std::string& args);

// Like run_reference_script(script, out_path), but reuses out_path when it is newer than the script
// (and st_io.py): ctest runs every TEST in its own process, so the first one writes the golden file and
// the rest read it. A file lock keeps parallel ctest processes from writing it together.
std::string ensure_golden(const std::string& script, const std::string& out_path);

// For a fixture's SetUp: the golden file of `script` at out_path, written once (ensure_golden) and loaded
// once per process. Null, with `skip` saying why, when the test is to be skipped (no PyTorch); throws,
// again for every test that asks, when writing it failed.
const Golden* golden_of(const std::string& script, const std::string& out_path, std::string& skip);

// ||got - want|| / ||want||, the error every reference comparison uses.
double norm_error(const std::vector<double>& got, const std::vector<double>& want);

}  // namespace zt::reference
