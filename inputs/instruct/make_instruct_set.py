#!/usr/bin/env python3
"""Writes inputs/instruct/instruct.jsonl: 200 small instruction records for the fine-tuning quickstart
(docs/guide/fine-tuning.md), generated from fixed rules with a fixed seed, so the file is reproducible:

    python3 inputs/instruct/make_instruct_set.py > inputs/instruct/instruct.jsonl

Tasks: sums, reversing a word, sorting numbers, counting letters, and two-turn conversations with a
system message; half the records use {"prompt", "response"}, the rest {"messages": [...]}.
Licence: this script and its output are dedicated to the public domain (CC0 1.0,
https://creativecommons.org/publicdomain/zero/1.0/).
"""
import json
import random

WORDS = ["river", "lantern", "copper", "meadow", "harbor", "pencil", "thunder", "violet", "garden", "marble",
         "falcon", "winter", "candle", "orbit", "saddle", "biscuit", "canyon", "ember", "glacier", "puzzle"]


def addition(r):
    a, b = r.randint(2, 99), r.randint(2, 99)
    return f"What is {a} + {b}?", f"{a} + {b} = {a + b}."


def reverse(r):
    w = r.choice(WORDS)
    return f"Reverse the word \"{w}\".", f"\"{w}\" reversed is \"{w[::-1]}\"."


def sort_numbers(r):
    xs = r.sample(range(1, 60), r.randint(3, 6))
    return f"Sort these numbers from smallest to largest: {', '.join(map(str, xs))}.", ", ".join(map(str, sorted(xs))) + "."


def count_letter(r):
    w = r.choice(WORDS)
    c = r.choice(sorted(set(w)))
    n = w.count(c)
    return f"How many times does the letter '{c}' appear in \"{w}\"?", f"{n} time{'s' if n != 1 else ''}."


TASKS = [addition, reverse, sort_numbers, count_letter]


def record(r, i):
    prompt, response = r.choice(TASKS)(r)
    if i % 2 == 0:
        return {"prompt": prompt, "response": response}
    follow_prompt, follow_response = r.choice(TASKS)(r)
    return {"messages": [{"role": "system", "content": "You answer in one short sentence."},
                         {"role": "user", "content": prompt}, {"role": "assistant", "content": response},
                         {"role": "user", "content": "And this one? " + follow_prompt},
                         {"role": "assistant", "content": follow_response}]}


def main():
    r = random.Random(19)
    for i in range(200):
        print(json.dumps(record(r, i), ensure_ascii=False))


if __name__ == "__main__":
    main()
