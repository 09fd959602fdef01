#!/usr/bin/env python3
"""The synthetic verifiable task of RL's quickstart and tests (docs/guide/rl.md): one-digit sums in GSM8K's
answer format. Writes, deterministically (seeded), into this directory:
  tokenizer.json  a byte-level BPE tokenizer with no merges (257 ids: the 256 bytes, <|endoftext|>), so a
                  model of the task is tiny;
  format.txt      documents "A+B=#### R" (blank lines between them) from a noisy teacher: R is the sum one
                  time in five, else a digit drawn uniformly from 0-9. Pre-training on them teaches the
                  answer format and a weak lean towards the sum: the model answers right about 28% of
                  the time (0.2 + 0.8 x 0.1), and RL has the rest to learn;
  prompts.jsonl   every sum A+B with A, B in 0-4: {"id", "prompt": "A+B=", "answer": "A+B"}.
Run: python3 inputs/rl_arith/make_task.py"""
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))


def bytes_to_unicode():
    # GPT-2's byte-to-character map, which byte-level BPE vocabularies are written in.
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def tokenizer():
    vocab = {ch: b for b, ch in sorted(bytes_to_unicode().items())}
    level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": 256, "content": "<|endoftext|>", "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True}],
        "normalizer": None,
        "pre_tokenizer": level,
        "post_processor": level,
        "decoder": level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "vocab": vocab, "merges": []},
    }


def main():
    rng = random.Random(20261129)
    with open(os.path.join(HERE, "tokenizer.json"), "w") as f:
        json.dump(tokenizer(), f, ensure_ascii=False, indent=1)
        f.write("\n")
    with open(os.path.join(HERE, "format.txt"), "w") as f:
        for _ in range(4000):
            a, b = rng.randrange(5), rng.randrange(5)
            r = a + b if rng.random() < 0.2 else rng.randrange(10)
            f.write(f"{a}+{b}=#### {r}\n\n")
    with open(os.path.join(HERE, "prompts.jsonl"), "w") as f:
        for a in range(5):
            for b in range(5):
                f.write(json.dumps({"id": f"{a}+{b}", "prompt": f"{a}+{b}=", "answer": str(a + b)}) + "\n")


if __name__ == "__main__":
    main()
