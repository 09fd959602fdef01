// Start-up checks of a directory a run will write to: a probe file proves it writable (created,
// fsynced, removed), statvfs tells the free space. Plain POSIX; nothing collective.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace zt::io {

// Creates `dir` (and its parents) if missing, then writes, fsyncs and removes a uniquely named probe
// file `.probe.<host>.<pid>` in it. Returns "" if all of that worked, else what failed with the errno
// text ("cannot create /ckpt/.probe.n1.42: Read-only file system").
std::string probe_writable_dir(const std::filesystem::path& dir, const std::string& host);
// Opens an existing file for appending (without writing): "" if that works, else why not.
std::string probe_appendable_file(const std::filesystem::path& file);
// Bytes an unprivileged writer may still use on the file system holding `dir` (statvfs f_bavail).
std::uint64_t free_bytes(const std::filesystem::path& dir);

}  // namespace zt::io
