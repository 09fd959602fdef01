// Instruction data: chat templates rendered as Qwen2's ChatML and Llama 3's Jinja templates render them
// (the expected strings are those templates' output, written out), the loss mask over the assistant's
// content and end token, record errors naming file:line and field, and packing into windows.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "ztok/chat_template.hpp"
#include "ztok/instruct_records.hpp"
#include "ztok/sample_packing.hpp"
#include "../tok/vocab_fixture.hpp"

namespace zt::ztok {
namespace {

using Ids = std::vector<std::uint32_t>;

// The GPT-2 vocabulary with the specials of both templates declared above its 50257 ids.
const std::map<std::string, std::uint32_t> kSpecials = {
    {"<|im_start|>", 50257}, {"<|im_end|>", 50258}, {"<|begin_of_text|>", 50259},
    {"<|start_header_id|>", 50260}, {"<|end_header_id|>", 50261}, {"<|eot_id|>", 50262}};

std::unique_ptr<tok::Tokenizer> tokenizer_with_specials() {
  const std::string dir = tok::testing::vocab_dir_or_empty();
  if (dir.empty()) return nullptr;
  auto t = std::make_unique<tok::Tokenizer>(tok::Vocab::load(dir));
  for (const auto& [name, id] : kSpecials) t->add_special(name, id);
  return t;
}

#define ZT_REQUIRE_SPECIALS_TOKENIZER()                  \
  static const auto tokenizer = tokenizer_with_specials(); \
  if (!tokenizer) GTEST_SKIP() << "GPT-2 vocabulary unavailable: set ZT_VOCAB or run tools/fetch-vocab.sh"

// The text of ids (only those with mask 1 when `masked_in`), specials by name.
std::string decode(const tok::Tokenizer& t, const TokenizedSample& s, bool masked_in = false) {
  std::string out;
  for (std::size_t i = 0; i < s.ids.size(); ++i) {
    if (masked_in && s.loss_mask[i] == 0) continue;
    bool special = false;
    for (const auto& [name, id] : kSpecials)
      if (id == s.ids[i]) out += name, special = true;
    if (!special) out += t.decode(std::span(&s.ids[i], 1));
  }
  return out;
}

TokenizedSample render(ChatTemplate tmpl, const tok::Tokenizer& t, const std::vector<ChatMessage>& messages) {
  tok::Encoder enc(t);
  return render_chat(tmpl, messages, t, enc);
}

TEST(ChatTemplate, ChatmlRendersAsQwen2WithItsDefaultSystemMessage) {
  ZT_REQUIRE_SPECIALS_TOKENIZER();
  const TokenizedSample s = render(ChatTemplate::kChatml, *tokenizer, {{"user", "What is 2+2?"}, {"assistant", "It is 4."}});
  EXPECT_EQ(decode(*tokenizer, s),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
            "<|im_start|>assistant\nIt is 4.<|im_end|>\n");
  EXPECT_EQ(decode(*tokenizer, s, true), "It is 4.<|im_end|>");
  // Text between specials is encoded as one string (as a Hugging Face tokenizer encodes the rendering).
  tok::Encoder enc(*tokenizer);
  Ids want{50257};
  enc.encode("system\nYou are a helpful assistant.", want);
  want.push_back(50258);
  enc.encode("\n", want);
  want.push_back(50257);
  enc.encode("user\nWhat is 2+2?", want);
  want.push_back(50258);
  enc.encode("\n", want);
  want.push_back(50257);
  enc.encode("assistant\nIt is 4.", want);
  want.push_back(50258);
  enc.encode("\n", want);
  EXPECT_EQ(s.ids, want);
}

TEST(ChatTemplate, ChatmlKeepsAGivenSystemMessageAndTrainsEveryAssistantTurn) {
  ZT_REQUIRE_SPECIALS_TOKENIZER();
  const TokenizedSample s = render(ChatTemplate::kChatml, *tokenizer,
                                   {{"system", "Be terse."}, {"user", "Hi"}, {"assistant", " Hello"}, {"user", "Bye"},
                                    {"assistant", "Bye."}});
  EXPECT_EQ(decode(*tokenizer, s),
            "<|im_start|>system\nBe terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n Hello"
            "<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\nBye.<|im_end|>\n");
  EXPECT_EQ(decode(*tokenizer, s, true), " Hello<|im_end|>Bye.<|im_end|>");
}

TEST(ChatTemplate, Llama3RendersAsMetaLlama3WithContentTrimmed) {
  ZT_REQUIRE_SPECIALS_TOKENIZER();
  const TokenizedSample s = render(ChatTemplate::kLlama3, *tokenizer,
                                   {{"system", "Be brief. "}, {"user", "\n Hi\t"}, {"assistant", "Hello!\xc2\xa0"}});
  EXPECT_EQ(decode(*tokenizer, s),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>"
            "\n\nHello!<|eot_id|>");
  EXPECT_EQ(decode(*tokenizer, s, true), "Hello!<|eot_id|>");
}

// Qwen2.5-Instruct's template: ChatML whose default system message names Qwen.
TEST(ChatTemplate, Qwen25RendersWithItsOwnDefaultSystemMessage) {
  ZT_REQUIRE_SPECIALS_TOKENIZER();
  tok::Encoder enc(*tokenizer);
  const TokenizedSample s = render_chat(ChatTemplate::kQwen25, {{"user", "What is 2+2?"}}, *tokenizer, enc, true);
  EXPECT_EQ(decode(*tokenizer, s),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n");
  const TokenizedSample own = render(ChatTemplate::kQwen25, *tokenizer, {{"system", "Be terse."}, {"user", "Hi"}});
  EXPECT_EQ(decode(*tokenizer, own), "<|im_start|>system\nBe terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
}

// Llama 3.1's template: a system turn always opens, its date block then the conversation's system message
// (trimmed, and taken out of the turns); 3.2's is the same with today's date.
TEST(ChatTemplate, Llama31OpensWithTheDateBlockAndTheSystemMessage) {
  ZT_REQUIRE_SPECIALS_TOKENIZER();
  tok::Encoder enc(*tokenizer);
  const TokenizedSample bare = render_chat(ChatTemplate::kLlama31, {{"user", " Hi\n"}}, *tokenizer, enc, true);
  EXPECT_EQ(decode(*tokenizer, bare),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
            "Today Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  const TokenizedSample s = render(ChatTemplate::kLlama31, *tokenizer,
                                   {{"system", " Be brief. "}, {"user", "Hi"}, {"assistant", "Hello!"}});
  EXPECT_EQ(decode(*tokenizer, s),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
            "Today Date: 26 Jul 2024\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>");
  EXPECT_EQ(decode(*tokenizer, s, true), "Hello!<|eot_id|>");
  const std::string today = decode(*tokenizer, render(ChatTemplate::kLlama32, *tokenizer, {{"user", "Hi"}}));
  EXPECT_EQ(today.find("Today Date: 26 Jul 2024"), std::string::npos);
  EXPECT_NE(today.find("Today Date: "), std::string::npos);
}

// Qwen3's template (its Jinja rendered by jinja2 gives these strings): no default system message; an
// assistant turn keeps only what follows its "</think>" up to the last user query (a user turn that is not
// a tool response); after it a turn with reasoning, and always the last message, gets a thinking block,
// trained with the reply.
TEST(ChatTemplate, Qwen3WritesThinkingBlocksAfterTheLastQuery) {
  ZT_REQUIRE_SPECIALS_TOKENIZER();
  tok::Encoder enc(*tokenizer);
  const TokenizedSample prompt = render_chat(
      ChatTemplate::kQwen3, {{"user", "Q1"}, {"assistant", "<think>\nhmm\n</think>\n\nA1"}, {"user", "Q2"}}, *tokenizer, enc,
      true);
  EXPECT_EQ(decode(*tokenizer, prompt),
            "<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nQ2<|im_end|>\n"
            "<|im_start|>assistant\n");
  const TokenizedSample system = render_chat(ChatTemplate::kQwen3, {{"system", "S"}, {"user", "Q"}}, *tokenizer, enc, true);
  EXPECT_EQ(decode(*tokenizer, system), "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n");

  const TokenizedSample reply = render(ChatTemplate::kQwen3, *tokenizer, {{"user", "Q"}, {"assistant", "A"}});
  EXPECT_EQ(decode(*tokenizer, reply), "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nA<|im_end|>\n");
  EXPECT_EQ(decode(*tokenizer, reply, true), "<think>\n\n</think>\n\nA<|im_end|>");
  const TokenizedSample reasoned = render(ChatTemplate::kQwen3, *tokenizer, {{"user", "Q"}, {"assistant", "A", "r"}});
  EXPECT_EQ(decode(*tokenizer, reasoned), "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nr\n</think>\n\nA<|im_end|>\n");
  EXPECT_EQ(decode(*tokenizer, render(ChatTemplate::kQwen3, *tokenizer,
                                      {{"user", "Q"}, {"assistant", "<think>x</think>mid"}, {"assistant", "end"}})),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nx\n</think>\n\nmid<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nend<|im_end|>\n");
  EXPECT_EQ(decode(*tokenizer, render(ChatTemplate::kQwen3, *tokenizer, {{"user", "Q"}, {"assistant", "plain"}, {"assistant", "last"}})),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\nplain<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nlast<|im_end|>\n");
  EXPECT_EQ(decode(*tokenizer, render(ChatTemplate::kQwen3, *tokenizer,
                                      {{"user", "Q1"}, {"assistant", "\n\n<think>\nold\n</think>\n\nA1"},
                                       {"user", "<tool_response>x</tool_response>"}, {"assistant", "A2"}})),
            "<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\n<think>\nold\n</think>\n\nA1<|im_end|>\n"
            "<|im_start|>user\n<tool_response>x</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nA2"
            "<|im_end|>\n");
}

// The models' own templates (tokenizer_config.json's chat_template, in part) tell which rendering is theirs.
TEST(ChatTemplate, ModelTemplatesAreIdentifiedByWhatTellsThemApart) {
  const std::string qwen2 =
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou "
      "are a helpful assistant.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + "
      "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}";
  const std::string qwen25 = "{%- else %}\n        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are "
                             "a helpful assistant.<|im_end|>\\n' }}";
  const std::string qwen25_math = "{{- '<|im_start|>system\\nPlease reason step by step, and put your final answer "
                                  "within \\\\boxed{}.<|im_end|>\\n' }}";
  const std::string qwen3_part = "{{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content }}";
  const std::string qwen3 = "{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}" +
                            qwen3_part + "{%- set content = message.content.split('</think>')[-1].lstrip('\\n') %}";
  const std::string llama3 =
      "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
      "message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% endfor %}"
      "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
  const std::string llama31 = llama3 + "{%- set date_string = \"26 Jul 2024\" %}{{- \"Cutting Knowledge Date: December 2023\\n\" }}";
  const std::string llama32 = llama31 + "{%- set date_string = strftime_now(\"%d %b %Y\") %}";
  EXPECT_EQ(identify_chat_template(qwen2), ChatTemplate::kChatml);
  EXPECT_EQ(identify_chat_template(qwen25), ChatTemplate::kQwen25);
  EXPECT_EQ(identify_chat_template(llama3), ChatTemplate::kLlama3);
  EXPECT_EQ(identify_chat_template(llama31), ChatTemplate::kLlama31);
  EXPECT_EQ(identify_chat_template(llama32), ChatTemplate::kLlama32);
  EXPECT_EQ(identify_chat_template(qwen25_math), std::nullopt);  // another default system message
  EXPECT_EQ(identify_chat_template(qwen3), ChatTemplate::kQwen3);
  EXPECT_EQ(identify_chat_template(qwen3_part), std::nullopt);  // thinking blocks, but not Qwen3's whole rule
  EXPECT_EQ(identify_chat_template("{{ '[INST] ' + message['content'] + ' [/INST]' }}"), std::nullopt);
  // Variants that name a family but render otherwise (a Jinja renderer would give other prompts): refused, saying why.
  const std::string llama3_body =
      "{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + "
      "message['content'] | trim + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}{{ "
      "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
  const std::string own_system = "{% if messages[0]['role'] != 'system' %}{{ '<|start_header_id|>system<|end_header_id|>"
                                 "\\n\\nYou are a pirate.<|eot_id|>' }}{% endif %}" + llama3_body;
  EXPECT_EQ(identify_chat_template(own_system), std::nullopt);
  EXPECT_NE(unidentified_because(own_system).find("resembles llama3's, but it writes a system turn of its own"), std::string::npos);
  std::string untrimmed = llama3_body;
  untrimmed.replace(untrimmed.find(" | trim"), 7, "");
  EXPECT_EQ(identify_chat_template(untrimmed), std::nullopt);
  EXPECT_NE(unidentified_because(untrimmed).find("does not trim"), std::string::npos);
  const std::string strict = qwen2 + "{% if message['role'] == 'user' %}{{ raise_exception('roles must alternate') }}{% endif %}";
  EXPECT_EQ(identify_chat_template(strict), std::nullopt);
  EXPECT_NE(unidentified_because(strict).find("raises"), std::string::npos);
  std::string other_system = qwen2;
  other_system.replace(other_system.find("assistant."), 10, "assistant. Answer in French.");
  EXPECT_EQ(identify_chat_template(other_system), std::nullopt);
  EXPECT_NE(unidentified_because(other_system).find("default system message is another text"), std::string::npos);
  EXPECT_EQ(identify_chat_template(qwen2 + "{{ message['content'] | trim }}"), std::nullopt);
  EXPECT_EQ(identify_chat_template(llama31 + "{{ raise_exception('only single tool-calls') }}"), ChatTemplate::kLlama31);  // 3.1's own
  EXPECT_EQ(unidentified_because(llama31), "");
  // Sweep 21's: a default system turn put into the list, a generation prompt of another role, ChatML turns
  // without their line break.
  const std::string sysvar = "{% if messages[0]['role'] != 'system' %}{% set messages = [{'role': 'system', 'content': "
                             "'You are a pirate.'}] + messages %}{% endif %}" + llama3_body;
  EXPECT_NE(unidentified_because(sysvar).find("adds messages of its own"), std::string::npos) << unidentified_because(sysvar);
  std::string model_role = llama3_body;
  model_role.replace(model_role.rfind("assistant"), 9, "model");
  EXPECT_NE(unidentified_because(model_role).find("generation prompt is not the assistant's header"), std::string::npos);
  std::string no_break = qwen2;
  const std::string with_break = "'<|im_end|>' + '\\n'";
  no_break.replace(no_break.find(with_break), with_break.size(), "'<|im_end|>'");
  EXPECT_NE(unidentified_because(no_break).find("do not end with <|im_end|> and a line break"), std::string::npos)
      << no_break;
  for (const char* name : {"chatml", "qwen2.5", "qwen3", "llama3", "llama3.1", "llama3.2"})
    EXPECT_EQ(to_string(parse_chat_template(name)), name);
}

TEST(ChatTemplate, SpecialTokenTextInContentIsPlainText) {
  ZT_REQUIRE_SPECIALS_TOKENIZER();
  const TokenizedSample s = render(ChatTemplate::kChatml, *tokenizer,
                                   {{"user", "say <|im_end|>"}, {"assistant", "<|im_start|>no"}});
  std::size_t starts = 0, ends = 0;
  for (const std::uint32_t id : s.ids) starts += id == 50257, ends += id == 50258;
  EXPECT_EQ(starts, 3u);  // system, user, assistant: the template's own, none from the content
  EXPECT_EQ(ends, 3u);
  EXPECT_EQ(decode(*tokenizer, s, true), "<|im_start|>no<|im_end|>");
}

TEST(ChatTemplate, MissingSpecialIdsAreRefusedWithTheFix) {
  const std::string dir = tok::testing::vocab_dir_or_empty();
  if (dir.empty()) GTEST_SKIP() << "GPT-2 vocabulary unavailable";
  tok::Tokenizer t(tok::Vocab::load(dir));
  try {
    check_template_specials(ChatTemplate::kLlama3, t);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--special '<|eot_id|>=ID'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(t.add_special("<|im_start|>", 100), InputError);  // an ordinary token's id
  t.add_special("<|im_start|>", 50300);
  EXPECT_THROW(t.add_special("<|im_end|>", 50300), InputError);  // shared id
  EXPECT_EQ(t.special_id("<|im_start|>"), 50300u);
  EXPECT_EQ(t.special_id("<|endoftext|>"), 50256u);
  EXPECT_EQ(t.n_ids(), 50301u);
}

TEST(ChatTemplate, StripIsPythonsStrStrip) {
  EXPECT_EQ(strip_unicode_space(" \t\n a b \r\x0b\x0c"), "a b");
  EXPECT_EQ(strip_unicode_space("\xe3\x80\x80x\xe2\x80\x83"), "x");  // U+3000, U+2003
  EXPECT_EQ(strip_unicode_space("\xe2\x80\x8bx"), "\xe2\x80\x8bx");   // U+200B is not white space
  EXPECT_EQ(strip_unicode_space("  "), "");
}

std::string error_of(const std::string& line) {
  try {
    parse_instruct_record(line, "set.jsonl:7");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// The record is refused with `needle` in the message.
void expect_refused(const std::string& line, const std::string& needle) {
  EXPECT_NE(error_of(line).find(needle), std::string::npos) << line << " -> " << error_of(line);
}

TEST(InstructRecords, BadRecordsNameFileLineAndField) {
  EXPECT_NE(error_of("{\"prompt\": 1, \"response\": \"x\"}").find("set.jsonl:7: field `prompt` must be a string"),
            std::string::npos);
  EXPECT_NE(error_of("{\"prompt\": \"x\"}").find("set.jsonl:7: field `response` is missing"), std::string::npos);
  EXPECT_NE(error_of("{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"bot\", \"content\": \"b\"}]}")
                .find("field `messages[1].role` is 'bot'"),
            std::string::npos);
  EXPECT_NE(error_of("{\"messages\": [{\"role\": \"user\"}]}").find("field `messages[0].content` is missing"),
            std::string::npos);
  EXPECT_NE(error_of("{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}]}").find("no assistant message"),
            std::string::npos);
  EXPECT_NE(error_of("{\"messages\": [").find("set.jsonl:7: not a JSON object"), std::string::npos);
  EXPECT_EQ(error_of("{\"prompt\": \"p\", \"response\": \"r\"}"), "");
  const auto m = parse_instruct_record("{\"prompt\": \"p\", \"response\": \"r\"}", "x");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].role, "user");
  EXPECT_EQ(m[1].content, "r");
  const auto reasoned = parse_instruct_record(
      "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": \"a\", "
      "\"reasoning_content\": \"r\"}, {\"role\": \"assistant\", \"content\": \"b\", \"reasoning_content\": null}]}", "x");
  ASSERT_EQ(reasoned.size(), 3u);
  EXPECT_EQ(reasoned[1].reasoning, "r");
  EXPECT_FALSE(reasoned[2].reasoning.has_value());
  expect_refused("{\"messages\": [{\"role\": \"assistant\", \"content\": \"a\", \"reasoning_content\": 3}]}",
                 "field `messages[0].reasoning_content` must be a string or null");
  // Tools are not rendered: refused rather than trained as empty replies; OpenAI's per-message weight.
  expect_refused("{\"tools\": [{\"type\": \"function\"}], \"messages\": [{\"role\": \"assistant\", \"content\": \"a\"}]}",
                 "field `tools` is given");
  expect_refused("{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": "
                     "\"\", \"tool_calls\": [{\"id\": \"1\"}]}]}",
                 "field `messages[1].tool_calls` is given");
  expect_refused("{\"messages\": [{\"role\": \"assistant\", \"content\": \"a\", \"weight\": 0.5}]}",
                 "field `messages[0].weight` is 0.5: it must be 0 (not trained) or 1");
  expect_refused("{\"messages\": [{\"role\": \"assistant\", \"content\": \"a\", \"weight\": 0}]}",
                 "no assistant message (of weight 1)");
  // Out of int's range: compared as the JSON number, not narrowed to 0 or 1 first.
  for (const char* w : {"4294967296", "4294967297", "18446744073709551615", "-4294967295"})
    expect_refused(cat("{\"messages\": [{\"role\": \"assistant\", \"content\": \"a\", \"weight\": ", w, "}]}"),
                   cat("field `messages[0].weight` is ", w, ": it must be 0 (not trained) or 1"));
  const auto weighted = parse_instruct_record(
      "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": \"a\", "
      "\"weight\": 0}, {\"role\": \"user\", \"content\": \"q2\"}, {\"role\": \"assistant\", \"content\": \"b\", \"weight\": 1}]}",
      "x");
  EXPECT_EQ(weighted[1].weight, 0);
  EXPECT_EQ(weighted[3].weight, 1);
}

// An assistant message of weight 0 is rendered but kept out of the loss mask, its end token too.
TEST(ChatTemplate, WeightZeroMessagesAreNotTrained) {
  ZT_REQUIRE_SPECIALS_TOKENIZER();
  ChatMessage skipped{"assistant", "Skip me."};
  skipped.weight = 0;
  const TokenizedSample s = render(ChatTemplate::kChatml, *tokenizer, {{"user", "Q1"}, skipped, {"user", "Q2"}, {"assistant", "Keep me."}});
  EXPECT_EQ(decode(*tokenizer, s, true), "Keep me.<|im_end|>");
  EXPECT_NE(decode(*tokenizer, s).find("Skip me.<|im_end|>"), std::string::npos);
}

TokenizedSample sample(std::uint32_t first, std::size_t n) {
  TokenizedSample s;
  for (std::size_t i = 0; i < n; ++i) s.ids.push_back(first + static_cast<std::uint32_t>(i)), s.loss_mask.push_back(i % 2);
  return s;
}

TEST(SamplePacking, SamplesStayWholeInTheirWindowAndLongOnesAreCut) {
  SampleLayout packed(8, 0);
  for (const auto& [first, n] : std::vector<std::pair<std::uint32_t, std::size_t>>{{10, 3}, {20, 4}, {30, 2}, {40, 8},
                                                                                      {50, 11}, {70, 1}})
    packed.add(sample(first, n));
  packed.finish();
  // [10 11 12 20 21 22 23 p] [30 31 p..] [40..47] [50..57] [57 58 59 60 70 p p p]: the cut sample's
  // continuation opens with 57, the token its first window ended on (a target there, an input here).
  const std::vector<std::uint32_t>& t = packed.tokens();
  ASSERT_EQ(t.size(), 40u);
  EXPECT_EQ((std::vector<std::uint32_t>(t.begin(), t.begin() + 8)), (std::vector<std::uint32_t>{10, 11, 12, 20, 21, 22, 23, 0}));
  EXPECT_EQ(t[8], 30u);
  EXPECT_EQ(t[10], 0u);
  EXPECT_EQ(t[16], 40u);
  EXPECT_EQ(t[24], 50u);
  EXPECT_EQ((std::vector<std::uint32_t>(t.begin() + 31, t.begin() + 37)), (std::vector<std::uint32_t>{57, 57, 58, 59, 60, 70}));
  EXPECT_EQ(packed.loss_mask()[7], 0);  // padding is never trained
  EXPECT_EQ(packed.loss_mask()[31], 1);  // 57 as the first window's last target
  EXPECT_EQ(packed.loss_mask()[32], 0);  // ... and as the continuation's first input: counted once
  EXPECT_EQ(packed.samples_cut(), 1u);
  EXPECT_EQ(packed.padding_tokens(), 1u + 6u + 3u);
  EXPECT_EQ(packed.sample_starts(), (std::vector<std::uint64_t>{0, 3, 8, 16, 24, 32, 36}));
  // Every trained token of every sample is a target once: the mask's 1s past each window's first token.
  std::uint64_t targets = 0;
  for (std::size_t i = 0; i < t.size(); ++i) targets += i % 8 != 0 && packed.loss_mask()[i] == 1;
  EXPECT_EQ(targets, packed.trained_tokens());

  SampleLayout plain(0, 0);
  plain.add(sample(10, 3));
  plain.add(sample(20, 4));
  plain.finish();
  EXPECT_EQ(plain.tokens().size(), 7u);
  EXPECT_EQ(plain.sample_starts(), (std::vector<std::uint64_t>{0, 3}));
}

}  // namespace
}  // namespace zt::ztok
