// The reference: @lenml/tokenizers (transformers.js's tokenizers) encodes each text of JSON arrays
// without the post-processor's special tokens.
//   node hf-encode.mjs TOKENIZER.json TOKENIZER_CONFIG.json CASES.json OUT.bin [CASES.json OUT.bin]...
// OUT.bin: per text, a little-endian uint32 count and then that many uint32 ids.
import fs from "node:fs";
import { TokenizerLoader } from "@lenml/tokenizers";

const [tokenizerPath, configPath, ...pairs] = process.argv.slice(2);
const tokenizer = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(fs.readFileSync(tokenizerPath, "utf8")),
  tokenizerConfig: JSON.parse(fs.readFileSync(configPath, "utf8")),
});
for (let p = 0; p + 1 < pairs.length; p += 2) {
  const texts = JSON.parse(fs.readFileSync(pairs[p], "utf8"));
  const parts = [];
  for (const text of texts) {
    const ids = tokenizer.encode(text, { add_special_tokens: false });
    const block = new Uint32Array(ids.length + 1);
    block[0] = ids.length;
    block.set(ids, 1);
    parts.push(Buffer.from(block.buffer));
  }
  fs.writeFileSync(pairs[p + 1], Buffer.concat(parts));
}
