// A whole file's bytes, the one way every module reads a small file (manifests, locks, notes, vocabularies).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace zt {

// The file's bytes, or nullopt when it cannot be opened or read through (absent, unreadable, a
// directory): the caller says whether that is an error and what fixes it.
std::optional<std::string> read_file(const std::filesystem::path& path);

}  // namespace zt
