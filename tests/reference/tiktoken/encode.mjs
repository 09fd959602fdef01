#!/usr/bin/env node
// The reference side of ztok's tokenizer tests: OpenAI's tiktoken (npm tiktoken, Rust core compiled to
// WebAssembly), encode_ordinary of the encoding named by $ZT_ENCODING (default `gpt2`; also cl100k_base,
// o200k_base). Bytes become text the way Python's
// bytes.decode("utf-8", errors="replace") does it: each maximal ill-formed subpart -> one U+FFFD, and a
// leading BOM is kept as U+FEFF (TextDecoder with ignoreBOM: true).
//
//   node encode.mjs FILE OUT.u32 [FILE OUT.u32]...
//                                              whole file = one text; OUT: little-endian uint32 ids (many
//                                              pairs in one process: the WebAssembly set-up is paid once)
//   node encode.mjs --records IN OUT           IN: repeated [u32 LE byte count][bytes];
//                                              OUT: repeated [u32 LE id count][ids]
//   node encode.mjs --docs file|paragraph OUT FILE...
//                                              what ztok must write: per file, its documents (the whole
//                                              file, or the pieces between /\n[ \t]*\n/ matches, empty ones
//                                              included, as shared/peers/tiktoken-encode.mjs cuts them),
//                                              each document's ids followed by 50256 (<|endoftext|>)
//   node encode.mjs --with-eot OUT IDS.u32...  the same for --docs file from the ids FILE OUT.u32 wrote
//                                              (each file's ids followed by <|endoftext|>): a file is
//                                              encoded once, not again for the shards' comparison
//   node encode.mjs --bench FILE [REPEAT]      one JSON line: encode-only MB/s on one thread (best, median,
//                                              slowest of REPEAT runs after one warm-up run)
//   node encode.mjs --classes OUT.bin          one byte per code point 0..0x10FFFF from Unicode 16.0 data:
//                                              0 other, 1 \p{L}, 2 \p{N}, 3 \s (White_Space)
//   node encode.mjs --categories OUT.bin       the same with the classes o200k needs (tok::Category):
//                                              0 other, 1 Lu, 2 \p{N}, 3 \s, 4 \p{M}, 5 Ll, 9 Lt, 13 Lm, 17 Lo
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";

const args = process.argv.slice(2);
const usage = () => {
  console.error("usage: encode.mjs FILE OUT [FILE OUT]... | --records IN OUT | --docs file|paragraph OUT FILE... | " +
    "--with-eot OUT IDS... | --bench FILE [N] | --classes OUT | --categories OUT");
  process.exit(2);
};
const decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
const le32 = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
const encoding = process.env.ZT_ENCODING || "gpt2";
if (!le32) { console.error("encode.mjs: big-endian hosts are not supported"); process.exit(1); }

async function encoder() {
  const { get_encoding } = await import("tiktoken");
  return get_encoding(encoding);
}

function writeU32(path, chunks) {
  const total = chunks.reduce((n, c) => n + c.length, 0);
  const all = new Uint32Array(total);
  let k = 0;
  for (const c of chunks) { all.set(c, k); k += c.length; }
  writeFileSync(path, Buffer.from(all.buffer, all.byteOffset, all.byteLength));
}

if (args[0] === "--classes" && args.length === 2) {
  const require = createRequire(import.meta.url);
  const set = (p) => require(`regenerate-unicode-properties/${p}.js`).characters;
  const L = set("General_Category/Letter"), N = set("General_Category/Number");
  const S = set("Binary_Property/White_Space");
  const version = require("regenerate-unicode-properties/unicode-version.js");
  const out = Buffer.alloc(0x110000);
  for (let c = 0; c < 0x110000; c++) out[c] = S.contains(c) ? 3 : L.contains(c) ? 1 : N.contains(c) ? 2 : 0;
  writeFileSync(args[1], out);
  console.log(`Unicode ${version} classes of ${out.length} code points -> ${args[1]}`);
} else if (args[0] === "--categories" && args.length === 2) {
  const require = createRequire(import.meta.url);
  const set = (p) => require(`regenerate-unicode-properties/${p}.js`).characters;
  const S = set("Binary_Property/White_Space"), N = set("General_Category/Number"), M = set("General_Category/Mark");
  const letters = [["Uppercase_Letter", 1], ["Lowercase_Letter", 5], ["Titlecase_Letter", 9],
    ["Modifier_Letter", 13], ["Other_Letter", 17]].map(([p, v]) => [set(`General_Category/${p}`), v]);
  const out = Buffer.alloc(0x110000);
  for (let c = 0; c < 0x110000; c++) {
    if (S.contains(c)) out[c] = 3;
    else if (N.contains(c)) out[c] = 2;
    else if (M.contains(c)) out[c] = 4;
    else for (const [L, v] of letters) if (L.contains(c)) { out[c] = v; break; }
  }
  writeFileSync(args[1], out);
} else if (args[0] === "--records" && args.length === 3) {
  const enc = await encoder();
  const data = readFileSync(args[1]);
  const chunks = [];
  for (let o = 0; o < data.length;) {
    const n = data.readUInt32LE(o); o += 4;
    const ids = enc.encode_ordinary(decoder.decode(data.subarray(o, o + n))); o += n;
    chunks.push(new Uint32Array([ids.length]), ids);
  }
  writeU32(args[2], chunks);
  enc.free();
} else if (args[0] === "--docs" && args.length >= 4 && ["file", "paragraph"].includes(args[1])) {
  const enc = await encoder();
  const eot = enc.encode("<|endoftext|>", "all")[0];
  const chunks = [];
  for (const file of args.slice(3)) {
    const text = decoder.decode(readFileSync(file));
    for (const doc of args[1] === "paragraph" ? text.split(/\n[ \t]*\n/) : [text]) {
      chunks.push(enc.encode_ordinary(doc), new Uint32Array([eot]));
    }
  }
  writeU32(args[2], chunks);
  enc.free();
} else if (args[0] === "--with-eot" && args.length >= 3) {
  const enc = await encoder();
  const eot = enc.encode("<|endoftext|>", "all")[0];
  const chunks = [];
  for (const file of args.slice(2)) {
    const b = readFileSync(file);
    if (b.length % 4 !== 0) { console.error(`encode.mjs: ${file} is not a uint32 ids file`); process.exit(1); }
    chunks.push(new Uint32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.length)), new Uint32Array([eot]));
  }
  writeU32(args[1], chunks);
  enc.free();
} else if (args[0] === "--bench" && (args.length === 2 || args.length === 3)) {
  const enc = await encoder();
  const bytes = readFileSync(args[1]);
  const text = decoder.decode(bytes);
  const repeat = Number(args[2] ?? 5);
  const times = [];
  let n = enc.encode_ordinary(text).length;  // warm-up (WebAssembly compilation, caches), not timed
  for (let r = 0; r < repeat; r++) {
    const t0 = process.hrtime.bigint();
    n = enc.encode_ordinary(text).length;
    times.push(Number(process.hrtime.bigint() - t0) / 1e9);
  }
  times.sort((a, b) => a - b);
  const median = times[Math.floor((times.length - 1) / 2)];
  console.log(JSON.stringify({ peer: "tiktoken-npm-1.0.22", encoding, bytes: bytes.length, tokens: n, repeat,
    best_mb_per_s: bytes.length / 1e6 / times[0], median_mb_per_s: bytes.length / 1e6 / median,
    min_mb_per_s: bytes.length / 1e6 / times[times.length - 1] }));
  enc.free();
} else if (args.length >= 2 && args.length % 2 === 0 && !args[0].startsWith("--")) {
  const enc = await encoder();
  for (let k = 0; k < args.length; k += 2) writeU32(args[k + 1], [enc.encode_ordinary(decoder.decode(readFileSync(args[k])))]);
  enc.free();
} else {
  usage();
}
