// read_file.hpp's one reader.
#include "core/read_file.hpp"

#include <fstream>
#include <sstream>

namespace zt {

std::optional<std::string> read_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return std::nullopt;  // Linux opens one; its read yields ""
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream bytes;
  bytes << in.rdbuf();
  // An empty file leaves failbit set on `bytes` (nothing was inserted): only a read error on `in` counts.
  if (in.bad()) return std::nullopt;
  return std::move(bytes).str();
}

}  // namespace zt
