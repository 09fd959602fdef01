// The prompt files zgen (--prompts), RL (rl.prompts) and the answer evaluation (log.eval_prompts) read:
// a path or a glob, each glob's matches in byte order; what is not there is refused naming the key that
// gave it; a reference answer that is null is refused like a missing one.
#include <gtest/gtest.h>

#include <memory>

#include <fstream>
#include <string>

#include "core/error.hpp"
#include "gen/prompt_io.hpp"
#include "../temp_dir.hpp"
#include "../tok/vocab_fixture.hpp"

namespace zt::gen {
namespace {

void write(const std::filesystem::path& p, const std::string& text) { std::ofstream(p) << text; }

std::string error_of(const std::string& glob, const PromptFormat& f) {
  try {
    read_prompts(glob, f);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(PromptFiles, AGlobReadsEveryMatchInByteOrder) {
  const test::TempDir dir("prompt_io");
  write(dir.path / "part_b.jsonl", R"({"id": "b", "prompt_ids": [3, 4]})" "\n");
  write(dir.path / "part_a.jsonl", R"({"id": "a1", "prompt_ids": [1]})" "\n\n" R"({"id": "a2", "prompt_ids": [2]})" "\n");
  const std::vector<PromptLine> lines = read_prompts((dir.path / "part_*.jsonl").string(), {});
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].id, "a1");
  EXPECT_EQ(lines[1].id, "a2");
  EXPECT_EQ(lines[2].id, "b");
  EXPECT_EQ(lines[2].ids, (std::vector<std::int32_t>{3, 4}));
  EXPECT_EQ(read_prompts((dir.path / "part_b.jsonl").string(), {}).size(), 1u);  // a plain path
}

TEST(PromptFiles, WhatIsNotThereIsRefusedNamingItsKey) {
  const test::TempDir dir("prompt_io");
  PromptFormat rl;
  rl.source = "rl.prompts";
  const std::string missing = error_of((dir.path / "nope.jsonl").string(), rl);
  EXPECT_NE(missing.find("rl.prompts=" + (dir.path / "nope.jsonl").string()), std::string::npos) << missing;
  const std::string unmatched = error_of((dir.path / "x_*.jsonl").string(), {});
  EXPECT_NE(unmatched.find("--prompts="), std::string::npos) << unmatched;
  EXPECT_NE(unmatched.find("matches no file"), std::string::npos) << unmatched;
  write(dir.path / "blank.jsonl", "\n  \n");
  EXPECT_NE(error_of((dir.path / "blank.jsonl").string(), rl).find("no prompt lines"), std::string::npos);
}

TEST(PromptFiles, ANullReferenceAnswerIsRefusedLikeAMissingOne) {
  const test::TempDir dir("prompt_io");
  PromptFormat f;
  f.answer_field = "answer";
  f.answer_hint = "rl.answer_field";
  write(dir.path / "p.jsonl", R"({"id": 1, "prompt_ids": [1], "answer": "4"})" "\n" R"({"id": 2, "prompt_ids": [1], "answer": null})" "\n");
  const std::string e = error_of((dir.path / "p.jsonl").string(), f);
  EXPECT_NE(e.find("p.jsonl:2"), std::string::npos) << e;
  EXPECT_NE(e.find("is null"), std::string::npos) << e;
  write(dir.path / "q.jsonl", R"({"id": 1, "prompt_ids": [1], "answer": 42})" "\n");
  EXPECT_EQ(read_prompts((dir.path / "q.jsonl").string(), f).front().reference, "42");  // a number's text
}

// GPT-2's vocabulary with ChatML's two specials past it; null without the vocabulary.
std::unique_ptr<tok::Tokenizer> chatml_tokenizer() {
  const std::string vocab = tok::testing::vocab_dir_or_empty();
  if (vocab.empty()) return nullptr;
  auto t = std::make_unique<tok::Tokenizer>(tok::Vocab::load(vocab));
  t->add_special("<|im_start|>", 50257);
  t->add_special("<|im_end|>", 50258);
  return t;
}

// A messages line renders as the model's own template (tokenizer_config.json beside its tokenizer), else by
// the specials the tokenizer has; a model template ztrain does not render is said, never replaced.
TEST(PromptFiles, MessagesRenderWithTheModelsOwnTemplate) {
  const std::unique_ptr<tok::Tokenizer> chatml = chatml_tokenizer();
  if (!chatml) GTEST_SKIP() << "GPT-2 vocabulary unavailable: set ZT_VOCAB or run tools/fetch-vocab.sh";
  tok::Tokenizer& t = *chatml;
  const test::TempDir dir("prompt_io");
  const std::string tokenizer = (dir.path / "tokenizer.json").string();  // where the file would be
  EXPECT_EQ(chat_template_of(&t, tokenizer).chat, ztok::ChatTemplate::kChatml);  // no tokenizer_config.json
  write(dir.path / "tokenizer_config.json",
        R"({"chat_template": "{{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}"})");
  EXPECT_EQ(chat_template_of(&t, tokenizer).chat, ztok::ChatTemplate::kQwen25);
  write(dir.path / "tokenizer_config.json", R"({"chat_template": "{{ '<|im_start|>' + message.role + '\n<think>\n' }}"})");
  const ChatChoice qwen3 = chat_template_of(&t, tokenizer);
  EXPECT_EQ(qwen3.chat, std::nullopt);
  EXPECT_NE(qwen3.why_none.find("tokenizer_config.json's chat_template is none ztrain renders"), std::string::npos);
  write(dir.path / "p.jsonl", R"({"id": 1, "messages": [{"role": "user", "content": "hi"}]})" "\n");
  PromptFormat f{&t, qwen3.chat, ""};
  f.template_hint = qwen3.why_none;
  EXPECT_NE(error_of((dir.path / "p.jsonl").string(), f).find("none ztrain renders"), std::string::npos);
}

// Only a messages line needs the chat template's special tokens: prompt and prompt_ids lines read with a
// tokenizer that lacks them, and a messages line is refused naming its file and line, the tokens and the
// fix the program offers (outside sweep 39 F10: every line was refused up front).
TEST(PromptFiles, OnlyMessagesLinesNeedTheTemplatesSpecials) {
  const std::string vocab = tok::testing::vocab_dir_or_empty();
  if (vocab.empty()) GTEST_SKIP() << "GPT-2 vocabulary unavailable: set ZT_VOCAB or run tools/fetch-vocab.sh";
  const tok::Tokenizer t(tok::Vocab::load(vocab));  // GPT-2's: <|endoftext|> only
  const test::TempDir dir("prompt_io");
  write(dir.path / "plain.jsonl", R"({"id": 1, "prompt": "2+2=", "answer": "4"})" "\n"
                                  R"({"id": 2, "prompt_ids": [17, 10], "answer": "4"})" "\n");
  PromptFormat f{&t, ztok::ChatTemplate::kChatml, "answer"};
  const std::vector<PromptLine> lines = read_prompts((dir.path / "plain.jsonl").string(), f);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1].ids, (std::vector<std::int32_t>{17, 10}));
  write(dir.path / "mixed.jsonl", R"({"id": 1, "prompt": "2+2=", "answer": "4"})" "\n\n"
                                  R"({"id": 2, "messages": [{"role": "user", "content": "2+2?"}], "answer": "4"})" "\n");
  const std::string zgen = error_of((dir.path / "mixed.jsonl").string(), f);
  EXPECT_NE(zgen.find("mixed.jsonl:3: a messages line is rendered with the chat template chatml"), std::string::npos) << zgen;
  EXPECT_NE(zgen.find("<|im_start|>, <|im_end|>"), std::string::npos) << zgen;
  EXPECT_NE(zgen.find("zgen --special NAME=ID"), std::string::npos) << zgen;
  f.specials_hint = "set data.vocab";
  const std::string ztrain = error_of((dir.path / "mixed.jsonl").string(), f);
  EXPECT_NE(ztrain.find("no id for them: set data.vocab"), std::string::npos) << ztrain;
  EXPECT_EQ(ztrain.find("--special"), std::string::npos) << ztrain;
  const std::unique_ptr<tok::Tokenizer> chatml = chatml_tokenizer();  // with them, the line renders
  f.tokenizer = chatml.get();
  EXPECT_EQ(read_prompts((dir.path / "mixed.jsonl").string(), f).back().ids.front(), 50257);
}

// A text prompt is encoded as a Hugging Face tokenizer encodes it: a special token's text is that token
// (a prompt rendered by hand), the vocabulary's own (<|endoftext|>) and declared ones alike.
TEST(PromptFiles, SpecialTokenTextInAPromptIsThatToken) {
  const std::unique_ptr<tok::Tokenizer> chatml = chatml_tokenizer();
  if (!chatml) GTEST_SKIP() << "GPT-2 vocabulary unavailable: set ZT_VOCAB or run tools/fetch-vocab.sh";
  tok::Tokenizer& t = *chatml;
  const test::TempDir dir("prompt_io");
  write(dir.path / "p.jsonl", R"({"id": 1, "prompt": "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"})" "\n"
                              R"({"id": 2, "prompt": "a<|endoftext|>b<|im_end"})" "\n");
  const std::vector<PromptLine> lines = read_prompts((dir.path / "p.jsonl").string(), PromptFormat{&t, std::nullopt, ""});
  tok::Encoder e(t);
  std::vector<std::uint32_t> user, a, b, tail;
  e.encode("user\nhi", user), e.encode("a", a), e.encode("b", b), e.encode("<|im_end", tail);  // no special: plain text
  std::vector<std::int32_t> want{50257};
  want.insert(want.end(), user.begin(), user.end());
  want.push_back(50258);
  std::vector<std::uint32_t> rest;
  e.encode("\n", rest);
  want.insert(want.end(), rest.begin(), rest.end());
  want.push_back(50257);
  rest.clear();
  e.encode("assistant\n", rest);
  want.insert(want.end(), rest.begin(), rest.end());
  EXPECT_EQ(lines[0].ids, want);
  std::vector<std::int32_t> second(a.begin(), a.end());
  second.push_back(50256);
  second.insert(second.end(), b.begin(), b.end());
  second.insert(second.end(), tail.begin(), tail.end());
  EXPECT_EQ(lines[1].ids, second);
}

// A stop string is seen when the token that completes it arrives, wherever it begins: in the token before
// a newest token longer than the string too (outside sweep 36 F7: "e a" ending in " answer" was missed).
TEST(StopStrings, AStringBeginningInAnEarlierTokenIsSeenWhenItsLastTokenArrives) {
  const tok::Tokenizer* t = tok::testing::shared_tokenizer();
  if (!t) GTEST_SKIP() << "GPT-2 vocabulary unavailable: set ZT_VOCAB or run tools/fetch-vocab.sh";
  tok::Encoder e(*t);
  std::vector<std::uint32_t> ids;
  e.encode("The answer is 42. Done", ids);
  ASSERT_EQ(ids.size(), 6u);  // "The" " answer" " is" " 42" "." " Done"
  Completion c;
  const auto seen_after = [&](std::size_t tokens, const std::vector<std::string>& stops) {
    c.tokens.assign(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(tokens));
    return holds_stop_string(c, *t, stops);
  };
  EXPECT_FALSE(seen_after(1, {"e a"}));
  EXPECT_TRUE(seen_after(2, {"e a"}));        // begins in "The", ends in " answer" (7 bytes)
  EXPECT_TRUE(seen_after(2, {"x", "e a"}));   // the longest string sets the reach
  EXPECT_TRUE(seen_after(4, {"is 4"}));       // " is" then " 42"
  EXPECT_TRUE(seen_after(3, {"swer is"}));
  EXPECT_TRUE(seen_after(6, {"The answer is 42. D"}));
  EXPECT_FALSE(seen_after(6, {"answer is 42. Done!"}));
  EXPECT_TRUE(seen_after(1, {"Th"}));
  EXPECT_FALSE(seen_after(0, {"Th"}));
}

}  // namespace
}  // namespace zt::gen
