// Room for more open files: a run keeps every token shard open (HDF5's descriptor and the verified
// reads' one), and 500 shards pass the usual soft limit of 1024.
#pragma once

#include <cstdint>
#include <string>

namespace zt::io {

// Makes room for `more` descriptors beyond those open now: raises the soft RLIMIT_NOFILE (up to the hard
// limit) when it is short, saying so. When even the hard limit is short, throws InputError naming `what`
// (e.g. "data.train's 600 shards"), the limits and the fixes.
void make_room_for_files(std::uint64_t more, const std::string& what);

}  // namespace zt::io
