// What an offline tool writes (zckpt's exports and reshards): checked before any work, built in a
// temporary sibling and renamed into place, so a failure leaves nothing half-written and an output never
// lands on what the tool reads (docs/INTERFACE.md "zckpt and the checkpoint": the output rule).
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace zt::io {

// A path an output may not be, lie inside, or contain, --overwrite or not: the tool's own inputs.
struct Guarded {
  std::filesystem::path path;
  std::string what;  // "the checkpoint being exported", "the LoRA run's base (init.from)"
};

class StagedOutput {
 public:
  // A directory the command fills (an export directory, a checkpoint): staging() is its content.
  static StagedOutput directory(const std::filesystem::path& out, const std::string& flag,
                                const std::vector<Guarded>& guarded, bool overwrite);
  // Files `names` in directory `dir` (FILE.safetensors and config.json beside it): staging() / name is
  // where each is written; the rest of `dir` is left alone. `known` gives the content of files known up
  // front (config.json): an existing file holding exactly that is no conflict (replacing it loses nothing).
  static StagedOutput files(const std::filesystem::path& dir, const std::vector<std::string>& names,
                            const std::string& flag, const std::vector<Guarded>& guarded, bool overwrite,
                            const std::vector<std::pair<std::string, std::string>>& known = {});

  StagedOutput(StagedOutput&&) noexcept;
  StagedOutput(const StagedOutput&) = delete;
  StagedOutput& operator=(const StagedOutput&) = delete;
  StagedOutput& operator=(StagedOutput&&) = delete;
  ~StagedOutput();  // without commit(): removes the staging directory and all in it

  // The temporary sibling to write into (created, empty): `OUT.<pid>.tmp`, or `DIR/.<first name>.<pid>.tmp`.
  const std::filesystem::path& staging() const { return staging_; }
  // fsyncs what was staged, then renames it into place (an existing output it replaces, with --overwrite,
  // is moved aside first and removed after). Throws IoError naming the path.
  void commit();
  // Removes the staging directory and all in it (what the destructor does without commit()).
  void discard() noexcept;

 private:
  StagedOutput() = default;
  std::filesystem::path target_;       // the directory (directory mode) or the files' directory
  std::vector<std::string> names_;     // files mode: the files' names; empty in directory mode
  std::filesystem::path staging_;
  std::filesystem::path created_;      // the outermost missing directory make_staging created ("" none)
  bool committed_ = false;
};

// Why `target` may not be written though `guarded` (equal, inside it or holding it, after resolving
// symlinks and `..`, also through hard links and bind mounts); "" when it may.
std::string guarded_conflict(const std::filesystem::path& target, const Guarded& guarded);

// For a tool whose outputs are StagedOutputs (zckpt): SIGTERM, SIGINT and SIGHUP remove every staging
// directory in progress (a killed export leaves no OUT.<pid>.tmp behind), then end the process as the
// signal would (a handler passes the signal to a thread of its own, which removes them). Call first in main.
void remove_staging_on_stop_signals();

}  // namespace zt::io
