// CorpusReader: document boundaries per split mode and format, safe cuts, resume positions; and the
// ordered tokenize stream for any thread count.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "ztok/corpus.hpp"
#include "ztok/run.hpp"
#include "ztok/tokenize_stream.hpp"
#include "../data/shard_test_util.hpp"
#include "../tok/vocab_fixture.hpp"

namespace zt::ztok {
using namespace zt::data;  // the shard types (data/shard.hpp)
namespace {

using namespace data::testing;

struct Doc {
  std::string text;
  std::uint64_t file, index;
  bool operator==(const Doc&) const = default;
};

// Reads everything; joins each document's pieces (checking their flags) into one text.
std::vector<Doc> documents(CorpusReader& reader, std::size_t* pieces = nullptr) {
  std::vector<Doc> docs;
  Chunk chunk;
  bool open = false;
  while (reader.next(chunk)) {
    for (const Segment& s : chunk.segments) {
      EXPECT_EQ(s.doc_start, !open);
      if (s.doc_start) docs.push_back({"", s.file, s.doc});
      docs.back().text += chunk.text.substr(s.begin, s.end - s.begin);
      open = !s.doc_end;
      if (pieces) ++*pieces;
    }
  }
  EXPECT_FALSE(open);
  return docs;
}

std::vector<std::string> texts(const std::vector<Doc>& docs) {
  std::vector<std::string> out;
  for (const Doc& d : docs) out.push_back(d.text);
  return out;
}

TEST(Corpus, ParagraphsAreCutLikeTheTiktokenPeer) {
  TempDir dir("corpus");
  put(dir.path / "a.txt", "one\n\ntwo\n \t \nthree\r\n\r\nstill three\n\n\nfour\n\n");
  put(dir.path / "empty.txt", "");
  CorpusReader reader({(dir.path / "a.txt").string(), (dir.path / "empty.txt").string()},
                      {InputFormat::kText, "text", SplitMode::kParagraph});
  const auto docs = documents(reader);
  // JavaScript's "...".split(/\n[ \t]*\n/): the third "\n" of "\n\n\n" starts the next piece.
  EXPECT_EQ(texts(docs), (std::vector<std::string>{"one", "two", "three\r\n\r\nstill three", "\nfour", "", ""}));
  EXPECT_EQ(docs[4].index, 4u);
  EXPECT_EQ(docs[5].file, 1u);
}

TEST(Corpus, WholeFilesAndJsonlLines) {
  TempDir dir("corpus");
  put(dir.path / "a.txt", "x\n\ny");
  put(dir.path / "b.jsonl", "{\"text\": 1}\n\n  \r\n{\"text\": 2}");
  CorpusReader text({(dir.path / "a.txt").string()}, {});
  EXPECT_EQ(texts(documents(text)), (std::vector<std::string>{"x\n\ny"}));
  CorpusReader jsonl({(dir.path / "b.jsonl").string()}, {InputFormat::kJsonl, "text", SplitMode::kFile});
  Chunk chunk;
  ASSERT_TRUE(jsonl.next(chunk));
  ASSERT_EQ(chunk.segments.size(), 2u);
  EXPECT_EQ(chunk.segments[1].line, 4u);  // blank lines are skipped but counted
  EXPECT_EQ(chunk.segments[1].doc, 1u);
}

TEST(Corpus, LongDocumentsAreCutOnlyBeforeSpacesAfterNonSpaces) {
  TempDir dir("corpus");
  std::string text;
  for (int i = 0; i < 3000; ++i) text += (i % 7 ? "word" : "  \xC3\xA9t\xC3\xA9") + std::string(i % 5 ? " " : "\n\t ");
  put(dir.path / "long.txt", text);
  std::size_t pieces = 0;
  CorpusReader reader({(dir.path / "long.txt").string()}, {}, {}, 64);
  const auto docs = documents(reader, &pieces);
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs[0].text, text);
  EXPECT_GT(pieces, 100u);
}

// A tokenizer's added tokens (matched before pre-tokenisation) are never cut, at any chunk size, under
// every pattern's cut rule.
TEST(Corpus, CutsNeverFallInsideAddedTokens) {
  TempDir dir("corpus");
  std::string text;
  for (int i = 0; i < 400; ++i) text += i % 3 ? "a<tool_call>b " : "x </tool_call>\n<|fim_prefix|>y ";
  put(dir.path / "doc.txt", text);
  CorpusOptions options;
  options.unsplittable = {"<tool_call>", "</tool_call>", "<|fim_prefix|>"};
  for (const tok::PatternKind pattern : {tok::PatternKind::kGpt2, tok::PatternKind::kCl100k, tok::PatternKind::kO200k}) {
    for (std::size_t chunk_bytes = 16; chunk_bytes < 60; chunk_bytes += 5) {
      options.pattern = pattern;
      CorpusReader reader({(dir.path / "doc.txt").string()}, options, {}, chunk_bytes);
      Chunk chunk;
      std::size_t offset = 0, cuts = 0;
      while (reader.next(chunk)) {
        for (const Segment& s : chunk.segments) {
          offset += s.end - s.begin;
          if (s.doc_end) continue;
          ++cuts;
          for (const std::string& t : options.unsplittable)
            for (std::size_t at = text.find(t); at != std::string::npos; at = text.find(t, at + 1))
              ASSERT_FALSE(at < offset && offset < at + t.size())
                  << "pattern " << int(pattern) << ": cut at " << offset << " inside " << t;
        }
      }
      EXPECT_EQ(offset, text.size());
      EXPECT_GT(cuts, text.size() / 200) << "pattern " << int(pattern) << ", chunks of " << chunk_bytes << " were hardly cut";
    }
  }
}

// Cuts every text at chunks of 16..79 bytes and checks that the segments tokenize exactly as the whole
// text does; the first `cut_texts` texts must be cut often (not read whole).
void expect_cuts_tokenize_as_whole(const tok::Tokenizer& tokenizer, const std::vector<std::string>& texts,
                                   std::size_t cut_texts) {
  tok::Encoder encoder(tokenizer);
  const CorpusOptions options = cutting_safely_for({}, tokenizer);
  TempDir dir("corpus");
  for (std::size_t t = 0; t < texts.size(); ++t) {
    put(dir.path / "doc.txt", texts[t]);
    std::vector<std::uint32_t> whole;
    encoder.encode(texts[t], whole);
    for (std::size_t chunk_bytes = 16; chunk_bytes < 80; chunk_bytes += 3) {  // cuts land everywhere
      CorpusReader reader({(dir.path / "doc.txt").string()}, options, {}, chunk_bytes);
      std::vector<std::uint32_t> by_segment;
      std::size_t segments = 0;
      for (Chunk c; reader.next(c);) {
        for (const Segment& s : c.segments) {
          encoder.encode(std::string_view(c.text).substr(s.begin, s.end - s.begin), by_segment);
          ++segments;
        }
      }
      EXPECT_EQ(by_segment, whole) << tokenizer.name() << " text " << t << ", chunks of " << chunk_bytes;
      if (t < cut_texts) {
        EXPECT_GT(segments, texts[t].size() / 100) << tokenizer.name() << " text " << t << " was hardly cut";
      }
    }
  }
}

// Texts with no ASCII space after an ASCII non-space (base64, CJK lines ending in full-width
// punctuation, glued punctuation) are still cut, so they are not read whole; and every cut, including
// next to apostrophes, digits, non-ASCII white space and ill-formed UTF-8, tokenizes exactly as the
// whole text does.
TEST(Corpus, CutsInsideLongDocumentsTokenizeExactlyAsTheWhole) {
  ZT_REQUIRE_VOCAB();
  std::string cjk, mixed, base64;
  for (int i = 0; i < 400; ++i) {
    cjk += i % 9 ? "\xE6\x96\x87\xE5\xAD\x97\xEF\xBC\x8C" : "\xE3\x80\x82\n\xE3\x80\x80";  // 文字， / 。\n U+3000
    mixed += std::string(i % 2 ? "it's'" : "A1b-2") + (i % 5 ? "\xC2\xA0 " : "\xFF\xE2\x82 ") + "x''y'll,9";
    base64 += "QUJD+/9z" + std::to_string(i * 7919) + "=";
  }
  expect_cuts_tokenize_as_whole(*tokenizer, {cjk, mixed, base64, std::string(3000, 'a') + ",b"}, 3);  // last: one piece
}

// cl100k and o200k keep line breaks after punctuation ("!\n\n", o200k also "/"), let any other
// character lead a word ("(abc"), and o200k keeps a word's contraction ("it's"): their cuts differ
// from GPT-2's and must still tokenize as the whole.
TEST(Corpus, CutsTokenizeAsTheWholeForCl100kAndO200k) {
  std::string lines, mixed, base64, code;
  for (int i = 0; i < 400; ++i) {
    lines += i % 3 ? "word" + std::to_string(i) + "\r\n" : "Done!\n\n  \n";
    mixed += std::string(i % 2 ? "IT'S'" : "A1b-2") + (i % 5 ? "\xC2\xA0 " : "\xFF\xE2\x82 ") + "x''y'll,9(ab/\ncd";
    base64 += "QUJD+/9z" + std::to_string(i * 7919) + "=";
    code += "if(x){return a/b;}\n\t// it's \xCC\x81" "Caps\n";
  }
  for (const char* name : {"cl100k_base", "o200k_base"}) {
    const tok::Tokenizer* tokenizer = zt::tok::testing::rank_file_tokenizer(name);
    if (tokenizer == nullptr) GTEST_SKIP() << name << " unavailable: run tools/fetch-vocab.sh --encoding " << name;
    expect_cuts_tokenize_as_whole(*tokenizer, {lines, mixed, base64, code}, 4);
  }
}

// A chunk's pieces with their document flags: what the journals record of it.
std::string pieces_of(const Chunk& c) {
  std::string out;
  for (const Segment& s : c.segments)
    out += cat(s.file, ":", s.doc, s.doc_start ? "[" : "", c.text.substr(s.begin, s.end - s.begin), s.doc_end ? "]" : "", "|");
  return out;
}

// Resuming from every chunk's end gives the uninterrupted reader's rest, piece for piece (flags too:
// a resume at a file's end once began an empty document there, one <|endoftext|> too many).
void expect_every_resume_gives_the_same_rest(const std::vector<std::string>& inputs, const CorpusOptions& options,
                                             std::size_t chunk_bytes) {
  CorpusReader all(inputs, options, {}, chunk_bytes);
  std::vector<std::string> chunks;
  std::vector<InputPosition> ends;
  for (Chunk c; all.next(c);) {
    chunks.push_back(pieces_of(c));
    ends.push_back(c.end);
  }
  ASSERT_GT(chunks.size(), 20u);
  for (std::size_t k = 0; k < chunks.size(); ++k) {
    std::string rest_expected;
    for (std::size_t i = k + 1; i < chunks.size(); ++i) rest_expected += chunks[i];
    CorpusReader resumed(inputs, options, ends[k], chunk_bytes);
    std::string rest;
    for (Chunk c; resumed.next(c);) rest += pieces_of(c);
    ASSERT_EQ(rest, rest_expected) << "resumed after chunk " << k << " (file " << ends[k].file << ", offset "
                                   << ends[k].offset << ")";
  }
}

TEST(Corpus, ResumingFromAnyChunkEndGivesTheSamePieces) {
  TempDir dir("corpus");
  std::string text;
  for (int i = 0; i < 400; ++i) text += "para " + std::to_string(i) + (i % 3 ? " text text\n\n" : " more\n");
  put(dir.path / "a.txt", text);
  put(dir.path / "b.txt", text.substr(100));
  const std::vector<std::string> inputs = {(dir.path / "a.txt").string(), (dir.path / "b.txt").string()};
  expect_every_resume_gives_the_same_rest(inputs, {InputFormat::kText, "text", SplitMode::kParagraph}, 256);
}

TEST(Corpus, ResumingAtTheEndOfAFileBeginsNoEmptyDocument) {
  TempDir dir("corpus");
  std::vector<std::string> inputs;
  for (int f = 0; f < 40; ++f) {  // files of 70-400 bytes: many chunks fill up with a file's last piece
    std::string text;
    while (text.size() < 70u + static_cast<std::size_t>(f * 37 % 330)) text += "word" + std::to_string(f) + " ";
    inputs.push_back((dir.path / cat("f", 100 + f, ".txt")).string());
    put(inputs.back(), text);
  }
  put(dir.path / "f200.txt", "");  // an empty file is one empty document, resumed or not
  inputs.push_back((dir.path / "f200.txt").string());
  put(dir.path / "f201.txt", "last\n\n");  // a paragraph separator at the end: an empty document follows
  inputs.push_back((dir.path / "f201.txt").string());
  expect_every_resume_gives_the_same_rest(inputs, {InputFormat::kText, "text", SplitMode::kFile}, 256);
  expect_every_resume_gives_the_same_rest(inputs, {InputFormat::kText, "text", SplitMode::kParagraph}, 256);
  // A position at a file's end, as ztok saved it before: one document per file, so the file is done.
  const CorpusOptions whole_files{InputFormat::kText, "text", SplitMode::kFile};
  CorpusReader old_position(inputs, whole_files, {38, std::filesystem::file_size(inputs[38]), 1, 1, false}, 256);
  Chunk c;
  ASSERT_TRUE(old_position.next(c));
  EXPECT_EQ(pieces_of(c).substr(0, 5), "39:0[");
}

TEST(Corpus, InputsExpandInByteOrderAndMissingOnesAreNamed) {
  TempDir dir("corpus");
  for (const char* n : {"b.txt", "B.txt", "a.txt", "a.md"}) put(dir.path / n, "x");
  const std::string d = dir.path.string();
  EXPECT_EQ(expand_inputs({d + "/*.txt", d + "/a.md"}),
            (std::vector<std::string>{d + "/B.txt", d + "/a.txt", d + "/b.txt", d + "/a.md"}));
  EXPECT_THROW(expand_inputs({d + "/nope.txt"}), InputError);
  EXPECT_THROW(expand_inputs({d + "/*.nope"}), InputError);
  put(dir.path / "part[1].txt", "x");  // a name with [ ]: taken as named when the pattern matches nothing
  EXPECT_EQ(expand_inputs({d + "/part[1].txt"}), std::vector<std::string>{d + "/part[1].txt"});
}

TEST(TokenizeStream, AnyThreadCountGivesTheSameIdsInOrder) {
  ZT_REQUIRE_VOCAB();
  TempDir dir("corpus");
  std::vector<std::string> inputs;
  for (int f = 0; f < 5; ++f) {
    std::string text;
    for (int i = 0; i < 2000; ++i) text += "line " + std::to_string(i * (f + 3)) + (i % 4 ? " it's\n" : "\n\n");
    put(dir.path / ("f" + std::to_string(f)), text);
    inputs.push_back((dir.path / ("f" + std::to_string(f))).string());
  }
  const CorpusOptions options{InputFormat::kText, "text", SplitMode::kParagraph};
  std::vector<std::vector<std::uint32_t>> results;
  for (int threads : {1, 2, 3, 5}) {
    CorpusReader reader(inputs, options, {}, 1000);
    TokenizeStream stream(*tokenizer, reader, options, threads, 2 * threads + 2);
    std::vector<std::uint32_t> all;
    for (TokenizedChunk r; stream.next(r);) all.insert(all.end(), r.tokens.begin(), r.tokens.end());
    results.push_back(all);
  }
  for (const auto& r : results) EXPECT_EQ(r, results[0]);
  EXPECT_GT(results[0].size(), 10000u);
}

// Errors surface in input order: the first bad line is reported, whichever thread met it first.
TEST(TokenizeStream, TheFirstBadJsonlLineIsReportedWhateverTheThreads) {
  ZT_REQUIRE_VOCAB();
  TempDir dir("corpus");
  std::string lines;
  for (int i = 1; i <= 300; ++i) lines += i == 120 || i == 250 ? "{\"oops\": 1}\n" : "{\"text\": \"fine line\"}\n";
  put(dir.path / "x.jsonl", lines);
  const CorpusOptions options{InputFormat::kJsonl, "text", SplitMode::kFile};
  for (int threads : {1, 4}) {
    CorpusReader reader({(dir.path / "x.jsonl").string()}, options, {}, 64);
    TokenizeStream stream(*tokenizer, reader, options, threads, 2 * threads + 2);
    std::size_t delivered = 0;
    try {
      for (TokenizedChunk r; stream.next(r);) delivered += r.chunk.segments.size();
      ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("x.jsonl:120: no field"), std::string::npos) << e.what();
      EXPECT_LT(delivered, 120u);
    }
  }
}

// The held-out split names an input by its file name: however the path is spelled, compressed or not,
// one corpus gives one split; another file name another.
TEST(ValidSplit, DependsOnTheFileNameNotOnHowThePathIsSpelled) {
  for (const char* path : {"data/x.jsonl", "./data/x.jsonl", "/abs/data/x.jsonl", "x.jsonl", "data/x.jsonl.zst", "x.jsonl.gz"})
    EXPECT_EQ(split_name(path), "x.jsonl") << path;
  int same = 0, other = 0, valid = 0;
  for (std::uint64_t doc = 0; doc < 2000; ++doc) {
    const bool v = is_validation_document("data/x.jsonl", doc, 0.1);
    valid += v ? 1 : 0;
    same += v == is_validation_document("/elsewhere/x.jsonl.zst", doc, 0.1) ? 1 : 0;
    other += v == is_validation_document("data/y.jsonl", doc, 0.1) ? 1 : 0;
  }
  EXPECT_EQ(same, 2000);
  EXPECT_LT(other, 2000);
  EXPECT_NEAR(valid, 200, 50);
}


// A file that grows or shrinks while it is read (a producer still writing it) is refused when its end
// is reached, naming it, not recorded as read at the size it had (sweep 23 F2).
TEST(Corpus, AFileChangedWhileReadIsRefused) {
  for (const bool grow : {true, false}) {
    data::testing::TempDir dir("corpus_changed");
    const std::string path = (dir.path / "live.txt").string();
    std::string text;  // 3 MiB of words: cut into many chunks, read 1 MiB at a time
    while (text.size() < (3u << 20)) text += "word ";
    data::testing::put(path, text);
    CorpusReader reader({path}, {}, {}, 1 << 16);
    Chunk chunk;
    ASSERT_TRUE(reader.next(chunk));
    if (grow) std::ofstream(path, std::ios::app) << std::string(1 << 20, 'b');
    else std::filesystem::resize_file(path, 2 << 20);
    try {
      while (reader.next(chunk)) {
      }
      FAIL() << (grow ? "a grown" : "a truncated") << " file was read as if whole";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("input " + path + " changed while ztok read it"), std::string::npos) << e.what();
    }
  }
}

// A later input that changed between the run's start (its recorded size) and its turn is refused when it
// is opened, not tokenized whole and recorded at the old size (outside sweep 27 F3).
TEST(Corpus, AnInputOfAnotherSizeThanAtTheStartIsRefusedWhenOpened) {
  data::testing::TempDir dir("corpus_grown");
  const std::string a = (dir.path / "a.txt").string(), b = (dir.path / "b.txt").string();
  data::testing::put(a, "one two\n");
  data::testing::put(b, "three four five\n");
  CorpusReader reader({a, b}, {}, {}, 1 << 16);
  reader.expect_sizes({8, 10});  // b had 10 bytes when the run started; it has 16 now
  Chunk chunk;
  try {
    while (reader.next(chunk)) {
    }
    FAIL() << "an input of another size was read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("input " + b + " changed since the run started (10 bytes then, 16 now)"),
              std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace zt::ztok
