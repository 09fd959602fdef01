// Reading backend.hpp's op list and recording the ops the cases call (coverage.hpp).
#include "tests/ops/coverage.hpp"

#include <regex>

#include "tests/ops/case_tensors.hpp"
#include "tests/ops/recording_backend.hpp"

namespace zt::backend::ops {

std::set<std::string> interface_ops(const std::string& header_text) {
  const std::string text = std::regex_replace(header_text, std::regex("//[^\n]*"), "");
  const std::size_t begin = text.find("class Backend {");
  ZT_CHECK(begin != std::string::npos, "backend.hpp: no 'class Backend {' found");
  const std::string body = text.substr(begin, text.find("\n};", begin) - begin);
  // virtual <return type> <name>(<parameters>) [const] = 0;  or ... { <default body>
  const std::regex pure(R"(virtual\s[^;{}]*?\b(\w+)\s*\([^;{}]*\)\s*(const\s*)?(=\s*0\s*;|\{))");
  std::set<std::string> ops;
  for (auto it = std::sregex_iterator(body.begin(), body.end(), pure); it != std::sregex_iterator(); ++it)
    if (!kMemoryMethods.count((*it)[1].str())) ops.insert((*it)[1].str());
  return ops;
}

std::set<std::string> ops_called(const std::vector<const OpCase*>& cases) {
  auto cpu = make_cpu_backend(1);
  RecordingBackend dry(*cpu, /*run_ops=*/false);
  for (const OpCase* c : cases) {
    CaseTensors t(dry, *c, DType::kF32, DType::kF32);
    Call call = t.call();
    c->forward(call);
    if (c->backward) c->backward(call);
  }
  return dry.called();
}

}  // namespace zt::backend::ops
