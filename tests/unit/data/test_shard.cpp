// Shard writer and reader: the schema, round trips, determinism and every validation the reader does.
#include <gtest/gtest.h>

#include <algorithm>

#include <hdf5.h>

#include "core/error.hpp"
#include "data/shard_set.hpp"
#include "io/hdf5.hpp"
#include "shard_test_util.hpp"

namespace zt::data {
namespace {

using namespace testing;

std::vector<std::uint32_t> ramp(std::size_t n, std::uint32_t modulo = 50257) {
  std::vector<std::uint32_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint32_t>((i * 7919) % modulo);
  return v;
}

TEST(Shard, WritesTheSchemaAndReadsAnyRange) {
  TempDir dir("shard");
  const auto tokens = ramp(kShardChunkTokens + 12345);  // more than one chunk
  write_shard(dir.path / "s.h5", tokens, {0, 10, kShardChunkTokens + 1});
  const ShardReader r = ShardReader::open(dir.path / "s.h5", {std::string(64, 'a'), 50257, 50256});
  EXPECT_EQ(r.info().n_tokens, tokens.size());
  EXPECT_EQ(r.info().n_docs, 3u);
  EXPECT_FALSE(r.info().wide_tokens);
  EXPECT_EQ(r.info().sources, (std::vector<std::string>{"a.txt", "b/c.txt"}));
  EXPECT_EQ(r.doc_offsets(), (std::vector<std::uint64_t>{0, 10, kShardChunkTokens + 1}));
  std::vector<std::uint32_t> got(1025);
  for (std::uint64_t start : {std::uint64_t{0}, kShardChunkTokens - 500, tokens.size() - 1025}) {
    r.read(start, std::span(got));
    EXPECT_TRUE(std::equal(got.begin(), got.end(), tokens.begin() + start)) << start;
  }
  std::vector<std::int32_t> signed_ids(3);
  r.read(5, std::span(signed_ids));
  EXPECT_EQ(signed_ids[0], static_cast<std::int32_t>(tokens[5]));
  EXPECT_THROW(r.read(tokens.size() - 2, std::span(signed_ids)), DataError);

  io::H5File raw = io::H5File::open_read((dir.path / "s.h5").string());  // attributes per docs/INTERFACE.md
  EXPECT_EQ(raw.attr_string("format"), "ztrain-tokens");
  EXPECT_EQ(raw.attr_u64("format_version"), 1u);
  EXPECT_EQ(raw.attr_string("tokenizer"), "gpt2");
  EXPECT_EQ(raw.open_dataset("tokens").type(), io::H5Type::kU16);
  EXPECT_EQ(raw.open_dataset("doc_offsets").type(), io::H5Type::kU64);
}

TEST(Shard, LargeVocabulariesStoreUint32) {
  TempDir dir("shard");
  const TokenizerInfo big{"custom", "h", 100000, 99999};
  write_shard(dir.path / "w.h5", {1, 70000, 99999}, {0}, big);
  const ShardReader r = ShardReader::open(dir.path / "w.h5");
  EXPECT_TRUE(r.info().wide_tokens);
  std::vector<std::uint32_t> got(3);
  r.read(0, std::span(got));
  EXPECT_EQ(got, (std::vector<std::uint32_t>{1, 70000, 99999}));
}

// The width rule, and what a tokenizer.json shard records: its kind and the BOS every document starts with.
TEST(Shard, RecordsTokenizerKindAndBos) {
  EXPECT_FALSE(shard_ids_are_wide(65536));  // ids 0..65535 fit uint16
  EXPECT_TRUE(shard_ids_are_wide(65537));
  TempDir dir("shard");
  const TokenizerInfo llama{"hf-bpe", std::string(64, 'c'), 128256, 128001, 128000};
  write_shard(dir.path / "l.h5", {128000, 9906, 128001}, {0}, llama);
  const ShardInfo info = ShardReader::validate(dir.path / "l.h5", {.vocab_size = 128256});
  EXPECT_EQ(info.tokenizer.name, "hf-bpe");
  EXPECT_EQ(info.tokenizer.bos, std::optional<std::uint64_t>(128000));
  EXPECT_TRUE(info.wide_tokens);
  EXPECT_FALSE(ShardReader::validate(dir.path / "l.h5", {.vocab_size = 128512}).tokenizer.name.empty());  // padded
  write_shard(dir.path / "g.h5", {1, 2}, {0});
  EXPECT_FALSE(ShardReader::validate(dir.path / "g.h5").tokenizer.bos.has_value());  // GPT-2: no BOS
}

TEST(Shard, EqualContentGivesByteIdenticalFilesWhateverTheBlockSize) {
  TempDir dir("shard");
  const auto tokens = ramp(3 * kShardChunkTokens + 7);
  write_shard(dir.path / "a.h5", tokens, {0, 5}, gpt2_info(), 1);  // element by element... slow but tiny path
  write_shard(dir.path / "b.h5", tokens, {0, 5}, gpt2_info(), 100003);
  write_shard(dir.path / "c.h5", tokens, {0, 5}, gpt2_info(), tokens.size());
  EXPECT_EQ(slurp(dir.path / "a.h5"), slurp(dir.path / "b.h5"));
  EXPECT_EQ(slurp(dir.path / "a.h5"), slurp(dir.path / "c.h5"));
  EXPECT_FALSE(fs::exists(dir.path / "a.h5.tmp"));
}

TEST(Shard, UncommittedWriterLeavesNothing) {
  TempDir dir("shard");
  {
    ShardWriter w(dir.path / "x.h5", gpt2_info(), 10, 0, {});
    w.append_tokens(std::vector<std::uint32_t>{1, 2, 3});
  }
  EXPECT_FALSE(fs::exists(dir.path / "x.h5"));
  EXPECT_FALSE(fs::exists(dir.path / "x.h5.tmp"));
  ShardWriter w(dir.path / "y.h5", gpt2_info(), 2, 0, {});
  EXPECT_THROW(w.append_tokens(std::vector<std::uint32_t>{50257}), DataError);
}

void expect_input_error(const fs::path& path, const ShardExpectation& expect, const std::string& needle) {
  try {
    ShardReader::open(path, expect);
    ADD_FAILURE() << path << " opened; expected an error containing " << needle;
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path.filename().string()), std::string::npos) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << what;
  }
}

// The schema's header attributes (a forged shard's; n_tokens is the caller's).
void header_attrs(io::H5File& f, std::uint64_t n_docs, const std::vector<std::string>& sources) {
  f.set_attr("format", std::string("ztrain-tokens"));
  f.set_attr("format_version", std::uint64_t{1});
  for (const char* s : {"tokenizer", "vocab_hash"}) f.set_attr(s, std::string("gpt2"));
  f.set_attr("vocab_size", std::uint64_t{50257});
  f.set_attr("eot", std::uint64_t{50256});
  f.set_attr("n_docs", n_docs);
  f.set_attr("sources", sources);
}

TEST(Shard, ReaderRefusesOtherVocabulariesAndSchemas) {
  TempDir dir("shard");
  const fs::path good = dir.path / "good.h5";
  write_shard(good, ramp(100), {0});
  expect_input_error(good, {.vocab_hash = std::string(64, 'b')}, "data.vocab");
  expect_input_error(good, {.vocab_size = 50000}, "model.vocab_size to at least 50257");
  expect_input_error(good, {.eot = 0}, "eot");
  expect_input_error(dir.path / "missing.h5", {}, "does not exist");
  EXPECT_EQ(ShardReader::validate(good, {.vocab_size = 50257}).n_tokens, 100u);
  EXPECT_EQ(ShardReader::validate(good, {.vocab_size = 50304}).n_tokens, 100u);  // a padded model vocabulary

  auto forge = [&](const char* name, auto&& edit) {  // a shard with one thing wrong
    io::H5File f = io::H5File::create((dir.path / name).string());
    header_attrs(f, 0, {});
    edit(f);
    return dir.path / name;
  };
  auto tokens10 = [](io::H5File& f) {
    f.create_dataset("tokens", io::H5Type::kU16, 10);
    f.create_dataset("doc_offsets", io::H5Type::kU64, 0);
  };
  expect_input_error(forge("count.h5", [&](io::H5File& f) { f.set_attr("n_tokens", std::uint64_t{11}); tokens10(f); }),
                     {}, "n_tokens says 11");
  expect_input_error(forge("nods.h5", [&](io::H5File& f) { f.set_attr("n_tokens", std::uint64_t{10}); }), {},
                     "no dataset `tokens`");
  expect_input_error(forge("noattr.h5", [&](io::H5File& f) { tokens10(f); }), {}, "no attribute `n_tokens`");
  expect_input_error(forge("type.h5", [&](io::H5File& f) {
    f.set_attr("n_tokens", std::uint64_t{10});
    f.create_dataset("tokens", io::H5Type::kF32, 10);
    f.create_dataset("doc_offsets", io::H5Type::kU64, 0);
  }), {}, "`tokens` holds float32; the schema's is little-endian uint16 or uint32");
  put(dir.path / "text.h5", "hello");
  expect_input_error(dir.path / "text.h5", {}, "cannot be read");
}

// Shards another tool wrote (h5py from a converter): what the schema allows is read; what would train on
// zeros or fail hours in is refused at open, naming the dataset and the problem.
TEST(Shard, ForeignWritersShardsAreReadOrRefusedAtOpen) {
  TempDir dir("shard");
  const auto forge = [&](const char* name, std::uint64_t n, const io::H5DatasetOptions& options, std::uint64_t written) {
    io::H5File f = io::H5File::create((dir.path / name).string());
    header_attrs(f, 1, {"x"});
    f.set_attr("n_tokens", n);
    io::H5Dataset tokens = f.create_dataset("tokens", io::H5Type::kU16, n, options);
    const std::vector<std::uint16_t> ids(written, 7);
    tokens.write(0, std::span<const std::uint16_t>(ids));
    f.create_dataset("doc_offsets", io::H5Type::kU64, 1).write_all(std::span<const std::uint64_t>(std::vector<std::uint64_t>{0}));
    return dir.path / name;
  };
  // A converter that stopped part way: the unwritten chunks (or storage) would read as zeros.
  expect_input_error(forge("part.h5", 1000, {.chunk = 100, .checksum = true}, 300), {}, "only 3 of its 10 chunks were ever written");
  expect_input_error(forge("bare.h5", 1000, {.chunk = 100}, 250), {}, "only 3 of its 10 chunks");
  expect_input_error(forge("flat.h5", 1000, {}, 0), {}, "`tokens`: its storage was never written");
  // Whole, without checksums (h5py's default): read, and said to be unchecksummed.
  const ShardReader plain = ShardReader::open(forge("plain.h5", 1000, {.chunk = 100}, 1000), {});
  EXPECT_FALSE(plain.info().checksummed);
  EXPECT_TRUE(ShardReader::open(forge("ztok.h5", 1000, {.chunk = 100, .checksum = true}, 1000), {}).info().checksummed);

  // h5py's own forms: a variable-length UTF-8 string attribute is read; a negative integer is named.
  const fs::path utf8 = forge("utf8.h5", 10, {}, 10);
  {
    const hid_t file = H5Fopen(utf8.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, H5T_VARIABLE);
    H5Tset_cset(type, H5T_CSET_UTF8);
    const hid_t space = H5Screate(H5S_SCALAR);
    H5Adelete(file, "tokenizer");
    const hid_t attr = H5Acreate2(file, "tokenizer", type, space, H5P_DEFAULT, H5P_DEFAULT);
    const char* text = "gpt2";
    ASSERT_GE(H5Awrite(attr, type, &text), 0);
    const std::int64_t minus_one = -1;
    H5Adelete(file, "eot");
    const hid_t eot = H5Acreate2(file, "eot", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(H5Awrite(eot, H5T_NATIVE_INT64, &minus_one), 0);
    for (hid_t h : {attr, eot}) H5Aclose(h);
    H5Sclose(space), H5Tclose(type), H5Fclose(file);
  }
  expect_input_error(utf8, {}, "attribute eot is -1: negative");
  // A type outside the schema is named, with the conversion that fixes it.
  const fs::path wide = dir.path / "int64.h5";
  {
    io::H5File f = io::H5File::create(wide.string());
    header_attrs(f, 0, {});
    f.set_attr("n_tokens", std::uint64_t{4});
    const hsize_t n = 4;
    const hid_t space = H5Screate_simple(1, &n, nullptr);
    const hid_t d = H5Dcreate2(f.id(), "tokens", H5T_STD_I64BE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(d), H5Sclose(space);
    f.create_dataset("doc_offsets", io::H5Type::kU64, 0);
  }
  expect_input_error(wide, {}, "`tokens` holds int64 big-endian; the schema's is little-endian uint16 or uint32 (numpy: astype('<u2')");
}

// doc_offsets that go back or past the end: the document starts (data.document_mask, reset_positions)
// refuse them naming the shard and the fix (the trainer asks at start-up: exit 2).
TEST(Shard, BadDocumentOffsetsAreRefusedNamingTheFix) {
  TempDir dir("shard");
  write_shard(dir.path / "back.h5", ramp(1000), {0, 500, 400});
  const ShardSet set({(dir.path / "back.h5").string()}, {});
  try {
    set.document_starts(0, 1);
    ADD_FAILURE() << "offsets that go back were read";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("doc_offsets[2] = 400 is not increasing"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("write it again with ztok"), std::string::npos) << e.what();
  }
}

TEST(Shard, FormatVersionIsChecked) {
  TempDir dir("shard");
  io::H5File f = io::H5File::create((dir.path / "v2.h5").string());
  f.set_attr("format", std::string("ztrain-tokens"));
  f.set_attr("format_version", std::uint64_t{2});
  f.close();
  expect_input_error(dir.path / "v2.h5", {}, "format_version 2");
}

}  // namespace
}  // namespace zt::data

namespace zt::data {
namespace {

// Instruction shards: the loss mask and window come back as written (mask across a chunk boundary), a
// stream does not mix them with plain shards or other windows, and a mask value other than 0/1 is refused.
TEST(Shard, InstructionShardsCarryTheLossMaskAndWindow) {
  testing::TempDir dir("instruct_shard");
  const std::uint64_t n = kShardChunkTokens + 17 * 3 - kShardChunkTokens % 17;  // whole windows of 17
  std::vector<std::uint32_t> tokens(n);
  std::vector<std::uint8_t> mask(n);
  for (std::uint64_t i = 0; i < n; ++i) tokens[i] = static_cast<std::uint32_t>(i % 50000), mask[i] = (i / 5) % 2;
  auto write = [&](const fs::path& path, std::uint64_t window) {
    ShardWriter w(path, testing::gpt2_info(), n, 1, {"set.jsonl"}, InstructLayout{true, "chatml", window});
    w.append_tokens(tokens);
    w.append_loss_mask(mask);
    const std::uint64_t docs[] = {0};
    w.append_doc_offsets(docs);
    w.commit();
  };
  write(dir.path / "a.h5", 17);
  const ShardReader r = ShardReader::open(dir.path / "a.h5");
  EXPECT_TRUE(r.info().has_loss_mask);
  EXPECT_EQ(r.info().window, 17u);
  std::vector<std::uint8_t> got(40);
  r.read_loss_mask(kShardChunkTokens - 20, got);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), mask.begin() + static_cast<std::ptrdiff_t>(kShardChunkTokens - 20)));
  testing::write_shard(dir.path / "plain.h5", {1, 2, 3}, {0});
  EXPECT_THROW(ShardSet({(dir.path / "a.h5").string(), (dir.path / "plain.h5").string()}, {}), InputError);
  write(dir.path / "b.h5", 0);
  EXPECT_THROW(ShardSet({(dir.path / "a.h5").string(), (dir.path / "b.h5").string()}, {}), InputError);
  ShardWriter w(dir.path / "bad.h5", testing::gpt2_info(), 1, 0, {}, InstructLayout{true, "chatml", 0});
  const std::uint8_t two[] = {2};
  EXPECT_THROW(w.append_loss_mask(two), Error);
}

// The ids ztok --special declared past the vocabulary are recorded (`specials`); shards of one vocabulary
// whose special ids mean other tokens (an id with two names, a name with two ids), or of which one records
// none (an older ztok), do not mix; one that adds a special to another's list does, and the set reads as
// their union (outside sweep 40 NEW-3: a superset was refused as "other meanings").
TEST(Shard, InstructionShardsWithOtherSpecialIdsDoNotMix) {
  testing::TempDir dir("instruct_specials");
  auto write = [&](const std::string& name, const std::string& specials) {
    TokenizerInfo info = testing::gpt2_info();
    info.vocab_size = 50261;
    info.specials = specials;
    ShardWriter w(dir.path / name, info, 3, 1, {"set.jsonl"}, InstructLayout{true, "chatml", 0});
    const std::uint32_t tokens[] = {50257, 10, 50258};
    const std::uint8_t mask[] = {0, 1, 1};
    const std::uint64_t docs[] = {0};
    w.append_tokens(tokens);
    w.append_loss_mask(mask);
    w.append_doc_offsets(docs);
    w.commit();
    return (dir.path / name).string();
  };
  const std::string chatml = "<|im_start|>=50257,<|im_end|>=50258";
  const std::string a = write("a.h5", chatml);
  const std::string a2 = write("a2.h5", chatml);
  const std::string pad = write("pad.h5", chatml + ",<|pad|>=50259");     // one special added
  const std::string tool = write("tool.h5", chatml + ",<|tool|>=50260");  // another one added
  const std::string tool_at_pad = write("tool2.h5", chatml + ",<|tool|>=50259");
  const std::string swapped = write("b.h5", "<|im_end|>=50257,<|im_start|>=50258");
  const std::string older = write("c.h5", "");
  EXPECT_EQ(ShardReader::open(a).info().tokenizer.specials, chatml);
  EXPECT_EQ(ShardReader::open(older).info().tokenizer.specials, "");
  EXPECT_NO_THROW(ShardSet({a, a2}, {}));
  EXPECT_NO_THROW(ShardSet({older}, {}));  // alone, a shard of an older ztok reads as before
  EXPECT_EQ(ShardSet({a, pad, tool}, {}).specials().text(), chatml + ",<|pad|>=50259,<|tool|>=50260");
  EXPECT_EQ(ShardSet({pad, a}, {}).specials().text(), chatml + ",<|pad|>=50259");
  EXPECT_NO_THROW(check_same_vocabulary(ShardReader::validate(pad), ShardReader::validate(a)));
  const auto refusal = [&](const std::vector<std::string>& paths) {
    try {
      ShardSet set(paths, {});
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  // Swapped ids (<|im_end|> given two ids); <|tool|> given two ids; id 50259 named twice by the 2nd and 4th
  // shards (the others agree with both): each names the two shards that disagree.
  const std::string two_names = refusal({a, swapped});
  EXPECT_NE(two_names.find("give the special token <|im_end|> two ids (50258 in the first, 50257 in the second)"),
            std::string::npos) << two_names;
  const std::string two_ids = refusal({tool, a, tool_at_pad});
  EXPECT_NE(two_ids.find(cat("shards ", tool, " and ", tool_at_pad, " share a vocabulary but give the special token "
                             "<|tool|> two ids (50260 in the first, 50259 in the second)")), std::string::npos)
      << two_ids;
  const std::string later = refusal({a, pad, a2, tool_at_pad});
  EXPECT_NE(later.find(cat("shards ", pad, " and ", tool_at_pad, " share a vocabulary but give id 50259 two names")),
            std::string::npos) << later;
  for (const std::string& e : {two_names, two_ids, later})
    EXPECT_NE(e.find("same ztok --vocab and --special ids (one list adding specials to another's is fine)"),
              std::string::npos) << e;
  const std::string none = refusal({a, older});
  EXPECT_NE(none.find("records none (a shard of a ztok before 2026-12"), std::string::npos) << none;
  EXPECT_THROW(check_same_vocabulary(ShardReader::validate(a), ShardReader::validate(swapped)), InputError);
}

// The specials data.train's consumers (its answer evaluation's template) see are those of all its shards,
// of every corpus of a blend, together; a conflict is refused there too.
TEST(Shard, RecordedSpecialsAreTheUnionOfDataTrain) {
  testing::TempDir dir("recorded_specials");
  auto write = [&](const std::string& sub, const std::string& specials) {
    std::filesystem::create_directories(dir.path / sub);
    TokenizerInfo info = testing::gpt2_info();
    info.vocab_size = 50260;
    info.specials = specials;
    ShardWriter w(dir.path / sub / "train_000000.h5", info, 2, 1, {"set.jsonl"}, InstructLayout{true, "chatml", 0});
    const std::uint32_t tokens[] = {50257, 10};
    const std::uint8_t mask[] = {0, 1};
    const std::uint64_t docs[] = {0};
    w.append_tokens(tokens);
    w.append_loss_mask(mask);
    w.append_doc_offsets(docs);
    w.commit();
    return (dir.path / sub / "train_*.h5").string();
  };
  const std::string x = write("x", "<|im_start|>=50257,<|im_end|>=50258");
  const std::string u = write("u", "<|im_start|>=50257,<|im_end|>=50258,<|pad|>=50259");
  const std::string z = write("z", "<|im_start|>=50258,<|im_end|>=50257");
  const std::string all = "<|im_start|>=50257,<|im_end|>=50258,<|pad|>=50259";
  EXPECT_EQ(recorded_specials(cat(x, ",", u)), all);
  EXPECT_EQ(recorded_specials(cat("0.5:", x, ",0.5:", u)), all);
  EXPECT_EQ(open_corpora(cat("0.5:", x, ",0.5:", u), "data.train", {}).size(), 2u);
  EXPECT_EQ(recorded_specials(x), "<|im_start|>=50257,<|im_end|>=50258");
  EXPECT_THROW(recorded_specials(cat(u, ",", z)), InputError);
  EXPECT_THROW(open_corpora(cat("0.5:", u, ",0.5:", z), "data.train", {}), InputError);
  EXPECT_EQ(recorded_specials((dir.path / "none_*.h5").string()), "");  // unreadable: the data checks say why
}

}  // namespace
}  // namespace zt::data
