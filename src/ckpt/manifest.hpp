// MANIFEST.json and state.json as text, and the record each rank sends rank 0 before the commit.
// Parsers throw CheckpointError naming the file (`where`) and the field that is wrong.
#pragma once

#include <filesystem>
#include <string>

#include "ckpt/state.hpp"

namespace zt::ckpt {

std::string manifest_json(const Manifest& m);
Manifest parse_manifest(const std::string& text, const std::string& where);

std::string state_json(const TrainState& s);
TrainState parse_state(const std::string& text, const std::string& where);

std::string rank_record_json(const RankRecord& r);
RankRecord parse_rank_record(const std::string& text);

// A whole (small) file as text; throws CheckpointError naming it.
std::string read_text(const std::filesystem::path& path);

}  // namespace zt::ckpt
