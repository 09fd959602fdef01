// The flag tables of ztok, zckpt and zgen (ztrain's keys are config/options.hpp's table, its general flags
// config/parse.hpp's): what --help lists and what the parser checks.
#pragma once

#include "config/command_line.hpp"

namespace zt::apps {

const config::cli::Spec& ztok_spec();
const config::cli::Spec& zckpt_spec();
const config::cli::Spec& zgen_spec();

}  // namespace zt::apps
