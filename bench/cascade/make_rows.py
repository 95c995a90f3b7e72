#!/usr/bin/env python3
"""Write bench/cascade/rows.tsv: 2,000 short customer messages, the held set of
the model-cascade checks (docs/CASCADES.md).

Each message is one to three sentences composed from hand-written fragments of
one kind (complaint, praise, question, mixed) about one of a few products, with
seeded random choices, so the set holds clear cases and ambiguous ones (a
"mixed" message praises one thing and complains about another).  The kind is
written beside the text for reference only: the cascade's truth is the large
model's answer, never this column.

Deterministic (fixed seed, no clock).  Columns: id<TAB>kind<TAB>text, one row
a line, no header; texts contain no tab or newline.

Usage: python3 bench/cascade/make_rows.py [OUT.tsv]   (default: next to this script)
"""
import os
import random
import sys

N_ROWS = 2000
SEED = 20261205

PRODUCTS = ["the router", "the mobile app", "my laptop", "the sync client", "the headphones",
            "the coffee machine", "the delivery", "the invoice", "the printer", "the subscription"]
COMPLAINT = [
    "{p} stopped working after two days and nobody answers my emails.",
    "I am very disappointed: {p} arrived broken.",
    "This is the third time {p} fails, I want a refund.",
    "{p} is a waste of money, it crashes every hour.",
    "Your support closed my ticket about {p} without fixing anything.",
    "I was charged twice for {p} and I am furious.",
    "{p} is so slow that I cannot work.",
    "Nobody told me {p} would take a month, this is unacceptable.",
]
PRAISE = [
    "{p} works perfectly, thank you!",
    "I love {p}, best purchase this year.",
    "Great job on {p}, setup took five minutes.",
    "Thanks to your team, {p} is running smoothly again.",
    "{p} exceeded my expectations.",
    "Just wanted to say {p} is fantastic.",
]
QUESTION = [
    "How do I reset {p}?",
    "Does {p} support two users at the same time?",
    "Where can I download the manual for {p}?",
    "Can I change the billing date of {p}?",
    "Is there a newer version of {p}?",
    "What is the warranty period for {p}?",
]
FILLER = ["", "", "", "I bought it in March.", "My order number is {n}.", "I use it at home.",
          "We have five people in the office.", "Kind regards, {name}.", "Sent from my phone."]
NAMES = ["Ana", "Ben", "Chen", "Dara", "Emil", "Fatima", "Goran", "Hana", "Ivo", "Jun"]


def sentence(rng, pool):
    s = rng.choice(pool).format(p=rng.choice(PRODUCTS))
    return s[0].upper() + s[1:]


def filler(rng):
    f = rng.choice(FILLER)
    return f.format(n=rng.randint(10000, 99999), name=rng.choice(NAMES))


def make(rng):
    kind = rng.choices(["complaint", "praise", "question", "mixed"], weights=[35, 25, 25, 15])[0]
    if kind == "complaint":
        parts = [sentence(rng, COMPLAINT)]
    elif kind == "praise":
        parts = [sentence(rng, PRAISE)]
    elif kind == "question":
        parts = [sentence(rng, QUESTION)]
    else:
        parts = [sentence(rng, PRAISE), "But " + (lambda s: s[0].lower() + s[1:])(sentence(rng, COMPLAINT))]
    f = filler(rng)
    if f:
        parts.insert(rng.randint(0, len(parts)), f)
    return kind, " ".join(parts)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "rows.tsv")
    rng = random.Random(SEED)
    with open(out, "w", encoding="utf-8", newline="\n") as f:
        for i in range(1, N_ROWS + 1):
            kind, text = make(rng)
            f.write(f"{i}\t{kind}\t{text}\n")


if __name__ == "__main__":
    main()
