#!/usr/bin/env python3
"""The reference for ztok --format instruct: a model's own Jinja chat template (its tokenizer_config.json's
chat_template) rendered by jinja2 as transformers' apply_chat_template renders it, and the loss mask that
follows from the rendering.

  chat_reference.py render CONFIG.json CONVERSATIONS.jsonl OUT.json
      each conversation (ztok's instruct JSONL: messages, or prompt/response) rendered, as a JSON array of
      texts for hf-encode.mjs (which gives the reference ids)
  chat_reference.py check TOKENIZER.json CONFIG.json CONVERSATIONS.jsonl REF.ids ZTOK.u32 ZTOK.mask ZTOK.docs
      ztok's ids per sample (ZTOK.docs: shard_dump docs) equal the reference ids; ztok's mask is 1 exactly
      on the tokens that end inside an assistant turn's content or are its end token
Exit 0 equal, 1 a difference (named).
"""
import json
import struct
import sys
from datetime import datetime

from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

# Each template's assistant header (as the rendering writes it) and end-of-turn token.
TURNS = {
    "<|im_start|>": ("<|im_start|>assistant\n", "<|im_end|>"),
    "<|start_header_id|>": ("<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>"),
}


def conversations(path):
    out = []
    for line in open(path, encoding="utf-8"):
        if not line.strip():
            continue
        record = json.loads(line)
        if "messages" in record:
            out.append(record["messages"])
        else:
            out.append([{"role": "user", "content": record["prompt"]}, {"role": "assistant", "content": record["response"]}])
    return out


def token_text(value):
    return value["content"] if isinstance(value, dict) else value


def render_all(config_path, conversations_path):
    """transformers' _compile_jinja_template environment and render_kwargs (tokenize=False, no tools)."""
    config = json.load(open(config_path, encoding="utf-8"))
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)

    def raise_exception(message):
        raise ValueError(message)

    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    template = env.from_string(config["chat_template"])
    specials = {k: token_text(config[k]) for k in ("bos_token", "eos_token", "pad_token", "unk_token") if config.get(k)}
    return [template.render(messages=c, add_generation_prompt=False, tools=None, documents=None, **specials)
            for c in conversations(conversations_path)]


def byte_decoder():
    """GPT-2's byte-level alphabet, inverted: the character of a vocabulary entry -> its byte."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def token_bytes(tokenizer_path):
    tokenizer = json.load(open(tokenizer_path, encoding="utf-8"))
    decode = byte_decoder()
    table = {i: bytes(decode[ch] for ch in token) for token, i in tokenizer["model"]["vocab"].items()}
    for added in tokenizer["added_tokens"]:
        table[added["id"]] = added["content"].encode("utf-8")
    return table


def read_ids(path):
    data = open(path, "rb").read()
    out, at = [], 0
    while at < len(data):
        (n,) = struct.unpack_from("<I", data, at)
        out.append(list(struct.unpack_from(f"<{n}I", data, at + 4)))
        at += 4 + 4 * n
    return out


def reference_mask(ids, table, rendered):
    """1 on a token that ends inside an assistant's content or is its end token (ends at the end token's end)."""
    text = b"".join(table[i] for i in ids)
    header, end = next(turn for marker, turn in TURNS.items() if marker in rendered)
    header, end = header.encode(), end.encode()
    spans, at = [], 0
    while (start := text.find(header, at)) >= 0:
        begin = start + len(header)
        stop = text.index(end, begin) + len(end)
        spans.append((begin, stop))
        at = stop
    mask, at = [], 0
    for i in ids:
        at += len(table[i])
        mask.append(1 if any(b < at <= e for b, e in spans) else 0)
    return mask


def check(tokenizer_path, config_path, conversations_path, ref_path, ztok_ids_path, ztok_mask_path, docs_path):
    rendered = render_all(config_path, conversations_path)
    reference = read_ids(ref_path)
    table = token_bytes(tokenizer_path)
    raw = open(ztok_ids_path, "rb").read()
    ztok = list(struct.unpack(f"<{len(raw) // 4}I", raw))
    ztok_mask = list(open(ztok_mask_path, "rb").read())
    starts = [int(x) for x in open(docs_path).read().split(":", 1)[1].split()]
    bounds = starts + [len(ztok)]
    failed = 0
    if len(starts) != len(reference):
        print(f"FAIL: ztok wrote {len(starts)} samples, the reference has {len(reference)}")
        return 1
    for k, want in enumerate(reference):
        got = ztok[bounds[k]:bounds[k + 1]]
        got_mask = ztok_mask[bounds[k]:bounds[k + 1]]
        if got != want:
            first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            print(f"FAIL: conversation {k + 1}: ids differ at token {first} (ztok {got[first:first + 6]}, "
                  f"reference {want[first:first + 6]}); rendering {rendered[k]!r}")
            failed = 1
            continue
        want_mask = reference_mask(want, table, rendered[k])
        if got_mask != want_mask:
            first = next(i for i, (a, b) in enumerate(zip(got_mask, want_mask)) if a != b)
            print(f"FAIL: conversation {k + 1}: the loss mask differs at token {first} "
                  f"({table[want[first]]!r}: ztok {got_mask[first]}, reference {want_mask[first]})")
            failed = 1
    if not failed:
        trained = sum(ztok_mask)
        print(f"reference: {len(reference)} conversations, {len(ztok)} tokens ({trained} trained): ids and loss mask equal")
    return failed


def main(argv):
    if len(argv) == 5 and argv[1] == "render":
        json.dump(render_all(argv[2], argv[3]), open(argv[4], "w", encoding="utf-8"), ensure_ascii=False)
        return 0
    if len(argv) == 9 and argv[1] == "check":
        return check(*argv[2:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
