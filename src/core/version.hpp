// The program version and the git revision the binary was built from (printed in logs and
// --version, stored in checkpoints).
#pragma once

namespace zt {
const char* version();
const char* git_revision();  // short hash, "-dirty" if built from modified files, or "unknown"
}  // namespace zt
