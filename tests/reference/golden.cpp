// Golden-file reading and reference-script running for the PyTorch reference tests (see golden.hpp).
#include "golden.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace zt::reference {

Golden Golden::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open golden file " + path);
  std::uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  const std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Golden g;
  const nlohmann::json header = nlohmann::json::parse(text);  // named: items() must not outlive it
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    Array a;
    a.dtype = info.at("dtype").get<std::string>();
    a.shape = info.at("shape").get<std::vector<std::int64_t>>();
    const auto off = info.at("data_offsets").get<std::vector<std::size_t>>();
    a.raw.assign(data.begin() + static_cast<std::ptrdiff_t>(off[0]), data.begin() + static_cast<std::ptrdiff_t>(off[1]));
    g.arrays_[name] = std::move(a);
  }
  return g;
}

const Golden::Array& Golden::at(const std::string& name) const {
  auto it = arrays_.find(name);
  if (it == arrays_.end()) throw std::runtime_error("golden file has no array " + name);
  return it->second;
}

template <typename T>
static std::vector<T> as(const std::vector<char>& raw) {
  std::vector<T> v(raw.size() / sizeof(T));
  std::memcpy(v.data(), raw.data(), v.size() * sizeof(T));
  return v;
}

std::vector<double> Golden::f64(const std::string& name) const {
  const Array& a = at(name);
  if (a.dtype == "F64") return as<double>(a.raw);
  if (a.dtype != "F32") throw std::runtime_error(name + " is " + a.dtype + ", not a float array");
  const std::vector<float> f = as<float>(a.raw);
  return std::vector<double>(f.begin(), f.end());
}

std::vector<float> Golden::f32(const std::string& name) const {
  const Array& a = at(name);
  if (a.dtype != "F32") throw std::runtime_error(name + " is " + a.dtype + ", not F32");
  return as<float>(a.raw);
}

std::vector<std::int32_t> Golden::i32(const std::string& name) const {
  const Array& a = at(name);
  if (a.dtype != "I32") throw std::runtime_error(name + " is " + a.dtype + ", not I32");
  return as<std::int32_t>(a.raw);
}

std::string run_reference_script(const std::string& script, const std::string& args) {
  const std::string python = ZT_TORCH_PYTHON;
  if (python.empty() || python.find("NOTFOUND") != std::string::npos)
    return "no python3 with PyTorch found at configure time (looked in /usr/bin)";
  const std::string cmd = python + " " + std::string(ZT_REFERENCE_SCRIPTS) + "/" + script + " " + args;
  const int status = std::system(cmd.c_str());
  if (status == -1 || !WIFEXITED(status)) throw std::runtime_error("could not run: " + cmd);
  if (WEXITSTATUS(status) == 77) return "PyTorch is not installed for " + python + " (" + script + " exited 77)";
  if (WEXITSTATUS(status) != 0)
    throw std::runtime_error(cmd + " failed with exit code " + std::to_string(WEXITSTATUS(status)));
  return "";
}

std::string ensure_golden(const std::string& script, const std::string& out_path) {
  namespace fs = std::filesystem;
  const int lock = ::open((out_path + ".lock").c_str(), O_CREAT | O_RDWR, 0644);
  if (lock < 0 || ::flock(lock, LOCK_EX) != 0) throw std::runtime_error("cannot lock " + out_path + ".lock");
  struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }  // closing releases the lock
  } unlock{lock};
  const fs::path dir = ZT_REFERENCE_SCRIPTS;
  std::error_code ec;
  const auto made = fs::last_write_time(out_path, ec);
  if (!ec && made >= fs::last_write_time(dir / script) && made >= fs::last_write_time(dir / "st_io.py")) return "";
  const std::string tmp = out_path + ".tmp" + std::to_string(::getpid());
  const std::string reason = run_reference_script(script, tmp);
  if (reason.empty()) fs::rename(tmp, out_path);
  return reason;
}

const Golden* golden_of(const std::string& script, const std::string& out_path, std::string& skip) {
  struct Loaded {
    std::string skip, error;
    std::unique_ptr<Golden> golden;
  };
  static std::map<std::string, Loaded> loaded;
  auto [it, fresh] = loaded.try_emplace(out_path);
  Loaded& l = it->second;
  if (fresh) {
    try {
      l.skip = ensure_golden(script, out_path);
      if (l.skip.empty()) l.golden = std::make_unique<Golden>(Golden::load(out_path));
    } catch (const std::exception& e) {
      l.error = e.what();
    }
  }
  if (!l.error.empty()) throw std::runtime_error(l.error);
  skip = l.skip;
  return l.golden.get();
}

double norm_error(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return INFINITY;
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return den == 0.0 ? std::sqrt(num) : std::sqrt(num / den);
}

}  // namespace zt::reference
