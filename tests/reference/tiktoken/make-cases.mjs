#!/usr/bin/env node
// Writes the hand-made and random inputs of ztok's tokenizer reference test into DIR:
//   cases.rec       hand-made edge cases (each kind of white space, CRLF, contractions, digits, marks,
//                   ZWJ emoji, CJK, Arabic, U+0085/U+00A0/U+3000/U+FEFF, ill-formed UTF-8, "<|endoftext|>")
//   random.rec      N random texts glued from those fragments and random bytes (seeded, reproducible)
//   codepoints.txt  every Unicode scalar value U+0000..U+10FFFF in contexts that expose its class
//   codepoints-cased.txt (with --cased) every assigned code point, and every 61st unassigned or private-
//                   use one, in contexts that expose the classes o200k tells apart (Lu/Lt, Ll, Lm/Lo, M)
//                   and the case folding of contractions ('S, U+017F)
//   codepoints-assigned.txt (with --assigned) the lines of codepoints.txt for that same selection: CI's
//                   GPT-2 test (a sixth of the size; unassigned and private-use code points are all of
//                   GPT-2's class "other", which tok_check classes checks for every code point)
// .rec files are repeated [u32 LE byte count][bytes].   node make-cases.mjs DIR [N] [--cased] [--assigned]
import { writeFileSync } from "node:fs";
import { join } from "node:path";

const [dir, nArg, ...flags] = process.argv.slice(2);
if (!dir || flags.some((f) => f !== "--cased" && f !== "--assigned")) {
  console.error("usage: make-cases.mjs DIR [N] [--cased] [--assigned]"); process.exit(2);
}
const casedArg = flags.includes("--cased"), assignedArg = flags.includes("--assigned");
const nRandom = Number(nArg ?? 5000);

const B = (x) => (typeof x === "string" ? Buffer.from(x, "utf8") : Buffer.from(x));
const bytes = (...xs) => Buffer.from(xs);
const records = (list) => Buffer.concat(list.flatMap((b) => { const h = Buffer.alloc(4); h.writeUInt32LE(b.length); return [h, b]; }));

const whiteSpace = ["\t", "\n", "\v", "\f", "\r", " ", "\u0085", "\u00A0", "\u1680", "\u2000", "\u2001", "\u2002",
  "\u2003", "\u2004", "\u2005", "\u2006", "\u2007", "\u2008", "\u2009", "\u200A", "\u2028", "\u2029", "\u202F",
  "\u205F", "\u3000"];
const notWhiteSpace = ["\uFEFF", "\u200B", "\u180E", "\u001C", "\u001D", "\u001E", "\u001F", "\u2060"];
const invalid = [bytes(0xFF), bytes(0xFE), bytes(0xC0, 0xAF), bytes(0xC1, 0xBF), bytes(0xE0, 0x80, 0xAF),
  bytes(0xED, 0xA0, 0x80), bytes(0xED, 0xBF, 0xBF), bytes(0xF4, 0x90, 0x80, 0x80), bytes(0xF5, 0x80, 0x80),
  bytes(0x80), bytes(0xBF, 0x80, 0xBF), bytes(0xC3), bytes(0xE2, 0x82), bytes(0xF0, 0x9F, 0x98),
  bytes(0xF0, 0x9F), bytes(0xF8, 0x88, 0x80, 0x80, 0x80), bytes(0xC3, 0xC3, 0xA9)];

const cases = [];
const add = (...parts) => cases.push(Buffer.concat(parts.map(B)));
add("");
for (const w of [...whiteSpace, ...notWhiteSpace]) {
  for (const t of [`${w}`, `${w}${w}`, `x${w}y`, `x${w}${w}y`, `x ${w}y`, `x${w} y`, `x${w}`, `x${w}${w}${w}`,
    `${w}x`, `1${w}2`, `.${w}.`, `${w} ${w}x`, `a ${w}${w} b`, `'s${w}'t`]) add(t);
}
for (const t of ["hello world", "  leading", "trailing  ", "a  b   c    d", "tab\tsep\t\tx", "mixed \t \t x",
  "line one\r\nline two\r\n\r\nthird\r\n", "cr\ronly\r\r", "\n\n\n", "x\n \ny", " \n \n ", "\r\n \r\n x",
  "I'm you're we've they'll he'd it's don't", "I'M YOU'RE WE'VE THEY'LL HE'D IT'S DON'T", "It'S 'S's'S",
  "''s", "'", "''", " 's", "x'", "'x", "rock 'n' roll", "\u2019s it\u2019s", "'ll've'd're'm't's", "'\n's", "'re're",
  "0", "123456789012345678901234567890", "1,234.56", "\uFF13\uFF14\uFF15", "\u216B", "\u00BD \u00B2",
  "\u0661\u0662\u0663", "x1y2z3", " 2024 ", "3.14e-10", "e\u0301", "\u0301", "a\u0301\u0302b", " \u0301x",
  "\u05E9\u05B8\u05C1\u05DC\u05D5\u05B9\u05DD", "\u0928\u092E\u0938\u094D\u0924\u0947", "\u0E20\u0E32\u0E29\u0E32\u0E44\u0E17\u0E22",
  "\u{1F469}\u200D\u{1F4BB}", "\u{1F468}\u200D\u{1F469}\u200D\u{1F467}\u200D\u{1F466}", "\u{1F3F3}\uFE0F\u200D\u{1F308}",
  "\u{1F1E9}\u{1F1EA}", "1\uFE0F\u20E3", "\u{1F44D}\u{1F3FD} ok", "\u4E2D\u6587\u5B57\u7B26 \u65E5\u672C\u8A9E\u306E\u30C6\u30AD\u30B9\u30C8 \uD55C\uAD6D\uC5B4",
  "\u3002\uFF0C\u300C\u5F15\u7528\u300D", "\u0628\u0650\u0633\u0652\u0645\u0650 \u0627\u0644\u0644\u0651\u064E\u0647\u0650",
  "\uFEFFhello", "mid\uFEFFdle", "end\uFEFF", "\uFEFF\uFEFF", "<|endoftext|>", "a<|endoftext|>b",
  " <|endoftext|> ", "<|endoftext|><|endoftext|>", "<|endoftext", "\u0000", "a\u0000b", "\u001B[31mred\u001B[0m",
  "\u1C89\u1C8A's", "a\u1C89b", "\u{10D40}\u{10D41}1", "x\u{13460}\u{13461}y", "\u{1E5F1} 7", "\u{10FFFF}\u{E0001}",
  "caf\u00E9 na\u00EFve \u00FCber", "\u0130stanbul \u0131", "\u{1D400}\u{1D41A}", "\u00AD\u00AD", "\u2028\u2029x",
  " ".repeat(10000) + "x", "\n".repeat(5000), "a".repeat(5000), "1".repeat(3000), "!".repeat(3000),
  "\u4E2D".repeat(3000), " a".repeat(3000), "\t \u00A0".repeat(2000) + "z", "ab".repeat(4000) + "'s"]) add(t);
for (const bad of invalid) {
  for (const [pre, post] of [["", ""], ["a", "b"], [" ", " "], ["'", "s"], ["1", "2"], ["\u00E9", "\u00E9"], ["", "'s"]]) {
    add(pre, bad, post);
  }
}
add(bytes(0xEF, 0xBB, 0xBF, 0x68, 0x69));                 // UTF-8 BOM bytes, kept as U+FEFF
add(Buffer.concat(invalid));
add(Buffer.concat(invalid.map((b) => Buffer.concat([b, B(" ")]))));

// Random texts: a seeded xorshift so every run writes the same file.
let state = 0x2545F491;
const rand = (n) => { state ^= state << 13; state >>>= 0; state ^= state >>> 17; state ^= state << 5; state >>>= 0; return state % n; };
const fragments = [...whiteSpace, ...notWhiteSpace, "'", "'s", "'S", "'re", "'ll", "'ve", "'d", "'m", "'t", "a", "The",
  "hello", "x", "0", "42", "\u00BD", "!", "?!", "...", "-", "\"", "(", "\u0301", "\u{1F469}\u200D\u{1F4BB}", "\u4E2D\u6587",
  "\u0628\u0650", "\u1C89", "\u{10D40}", "<|endoftext|>", "\r\n", "  ", "\t\t"].map(B).concat(invalid);
const randomTexts = [];
for (let i = 0; i < nRandom; i++) {
  const parts = [];
  const n = rand(80);
  const raw = rand(4) === 0;
  for (let k = 0; k < n; k++) parts.push(raw ? bytes(rand(256)) : fragments[rand(fragments.length)]);
  randomTexts.push(Buffer.concat(parts));
}

// Every scalar value in contexts where its class decides the pieces: after a letter, before "'s"
// (punctuation swallows the apostrophe), before a digit, after a space, doubled.
const lines = [];
for (let cp = 0; cp <= 0x10FFFF; cp++) {
  if (cp >= 0xD800 && cp <= 0xDFFF) continue;
  const c = String.fromCodePoint(cp);
  lines.push(`a${c}'s ${c}1${c}${c}\n`);
}

// The selection of codepoints-cased.txt and codepoints-assigned.txt: every assigned code point, every
// 61st unassigned or private-use one.
let selected = null;
if (casedArg || assignedArg) {
  const { createRequire } = await import("node:module");
  const require = createRequire(import.meta.url);
  const set = (p) => require(`regenerate-unicode-properties/General_Category/${p}.js`).characters;
  const unassigned = set("Unassigned"), privateUse = set("Private_Use");
  selected = (cp) => !((unassigned.contains(cp) || privateUse.contains(cp)) && cp % 61 !== 0);
}
if (casedArg) {
  const cased = [];
  for (let cp = 0; cp <= 0x10FFFF; cp++) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    if (!selected(cp)) continue;
    const c = String.fromCodePoint(cp);
    cased.push(`a${c}b ${c}Ab !!${c}'${c}1${c}${c}\n`);
  }
  writeFileSync(join(dir, "codepoints-cased.txt"), cased.join(""));
}
if (assignedArg) {
  const assigned = [];
  for (let cp = 0; cp <= 0x10FFFF; cp++) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    if (selected(cp)) assigned.push(lines[cp < 0xD800 ? cp : cp - 0x800]);
  }
  writeFileSync(join(dir, "codepoints-assigned.txt"), assigned.join(""));
}
writeFileSync(join(dir, "cases.rec"), records(cases));
writeFileSync(join(dir, "random.rec"), records(randomTexts));
writeFileSync(join(dir, "codepoints.txt"), lines.join(""));
console.log(`make-cases: ${cases.length} hand-made cases, ${randomTexts.length} random texts, ${lines.length} code points`);
