// The training data as a start-up check: every shard's header against the model (and data.vocab),
// and with data.verify=full every token chunk's checksum, before any work, so a bad shard is a
// start-up error (exit 2, printed once) rather than a failure on every rank once training runs.
#pragma once

#include <string>

#include "config/config.hpp"
#include "data/shard.hpp"
#include "tok/tokenizer.hpp"

namespace zt::train {

// The tokenizer of data.vocab (a GPT-2 vocabulary directory, a tiktoken rank file of a known encoding
// or a tokenizer.json), its errors naming that key (the loader speaks of ztok's --vocab). Loaded once
// per process and path (the start-up data check, the trainer's readers and its text samples all ask:
// a Llama 3 tokenizer.json takes 0.43 s to load, GPT-2's files 0.06 s); it lives until the process ends.
const tok::Tokenizer& load_tokenizer(const std::string& vocab);

// What every shard must say about its ids: the model's vocab_size, and data.vocab's hash and eot.
data::ShardExpectation expected_shards(const config::Config& c);

// Opens data.train (and data.valid) as the trainer will; with data.verify=full, reads this rank's
// share of every chunk (blocks of the stream round robin over `world_size` ranks). Throws InputError
// (or ConfigError) naming the shard, the token range and the fix.
void check_data(const config::Config& c, int rank, int world_size);

}  // namespace zt::train
