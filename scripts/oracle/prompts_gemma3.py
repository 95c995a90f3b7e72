#!/usr/bin/env python3
"""Write test/golden/gemma3/prompts.tsv, the oracle prompts for Gemma 3 270M.

Usage: prompts_gemma3.py [OUT]

Gemma 3 270M (google/gemma-3-270m) is a pretrained base model without a
chat template, so every prompt is raw text continued as is (llama.cpp adds
BOS): `raw` prompts get 32 greedy tokens (greedy.tsv), `lraw` prompts their
last-position logits (logits/).  Short prompts cover prose, lists, code,
JSON, Q/A and few-shot formats, translation, CJK, emoji, whitespace runs and
digits; long ones are built from bench/data/tickets.csv and run past
Gemma 3's 512-token sliding window (local attention layers) up to ~3,500
tokens (RoPE at long positions).  Deterministic: the file only changes when
this script or tickets.csv does.
"""
import csv
import os
import sys

root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
with open(os.path.join(root, "bench", "data", "tickets.csv"), newline="", encoding="utf-8") as f:
    tickets = list(csv.DictReader(f))


def ticket_text(first, count):
    out = []
    for t in tickets[first:first + count]:
        out.append("Ticket %s (%s, %s): %s\n%s" % (t["id"], t["product"], t["priority"], t["subject"], t["body"]))
    return "\n\n".join(out)


greedy = [
    "The capital of France is",
    "The quick brown fox",
    "Once upon a time, in a small village at the edge of a great forest,",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
    "1, 1, 2, 3, 5, 8, 13,",
    "The three primary colors are",
    "Water boils at a temperature of",
    "Q: What is the largest planet in the solar system?\nA:",
    "Q: Who wrote Romeo and Juliet?\nA: William Shakespeare\n\nQ: Who painted the Mona Lisa?\nA:",
    "English: Good morning\nFrench: Bonjour\n\nEnglish: Thank you very much\nFrench:",
    "English: cat\nGerman: Katze\nEnglish: dog\nGerman:",
    "Translate to Spanish: I would like a cup of coffee, please.\nSpanish:",
    "import numpy as np\n\n# compute the mean of a list\ndef mean(xs):",
    "SELECT name, COUNT(*)\nFROM orders\nGROUP BY",
    "#include <stdio.h>\n\nint main(void)\n{\n\tprintf(",
    "{\"name\": \"Alice\", \"age\": 30, \"city\":",
    "<html>\n<head>\n<title>My page</title>\n</head>\n<body>\n<h1>",
    "<table><tr><td>Name</td><td>Price</td></tr><tr><td>Apple</td><td>",
    "Monday, Tuesday, Wednesday,",
    "January, February, March,",
    "A, B, C, D, E,",
    "2 + 2 = 4\n3 + 5 = 8\n7 + 6 =",
    "The square root of 144 is",
    "Photosynthesis is the process by which",
    "The mitochondria is",
    "Dear Sir or Madam,\n\nI am writing to",
    "Ingredients:\n- 2 cups flour\n- 1 cup sugar\n-",
    "Step 1: Preheat the oven to 180 degrees.\nStep 2:",
    "Title: The Last Lighthouse\n\nChapter 1\n\nThe storm had been building for three days when",
    "My favourite food is",
    "In 1969, the first humans landed on",
    "The Eiffel Tower is located in",
    "Python is a programming language that",
    "Customer: My order #88213 never arrived.\nAgent: I'm sorry to hear that.",
    "Ticket 4521: Printer on floor 3 won't print; error code E-0042. Tried restarting twice.",
    "東京は日本の首都で、",
    "北京是中国的首都，",
    "서울은 한국의",
    "La capitale de l'Italie est",
    "Die Hauptstadt von Deutschland ist",
    "Москва — столица",
    "I love pizza 🍕 and",
    "😀😃😄",
    "Happy birthday! 🎉🎂",
    "    indented code\n        more indented\n    back",
    "a  b   c    d",
    "\n\n\nThe end.",
    "x = [1, 2, 3]\nfor i in x:\n\t",
    "3.14159265358979",
    "The year 2024 was",
    "Pros:\n1. Fast\n2. Cheap\nCons:\n1.",
    "Roses are red,\nViolets are blue,",
    "To be, or not to be,",
    "Summary: The meeting discussed the budget for next year. Key points:",
    "Here is a list of support tickets.\n\n" + ticket_text(0, 3) + "\n\nThe most urgent ticket is",
    "Support queue export\n\n" + ticket_text(10, 8) + "\n\nSummary of the tickets above:",
    "Support queue export\n\n" + ticket_text(40, 20) + "\n\nThe common theme of these tickets is",
]

logits = [
    "The capital of France is",
    "def add(a, b):\n    return",
    "Once upon a time, in a small village at the edge of a great forest, there lived an old woman who",
    "東京2024年に行きます Tokyo trip 3日間 😀",
    "Ticket 4521: Printer on floor 3 won't print; error code E-0042.\n\n\n\t\tTried restarting   twice.",
    "Support queue export\n\n" + ticket_text(100, 2),
    "Support queue export\n\n" + ticket_text(120, 4),
    "Support queue export\n\n" + ticket_text(140, 7),
    "Support queue export\n\n" + ticket_text(200, 14),
    "Support queue export\n\n" + ticket_text(300, 30),
]


def esc(s):
    return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "test", "golden", "gemma3", "prompts.tsv")
with open(out, "w", encoding="utf-8") as f:
    f.write("# Input prompts for scripts/oracle/make_golden.sh gemma3 (written by scripts/oracle/prompts_gemma3.py).\n")
    f.write("# Columns (tab-separated): id, kind, system, text\n")
    f.write("#   kind:   raw   -> greedy.tsv (text as is, BOS added as llama.cpp does, 32 greedy tokens)\n")
    f.write("#           lraw  -> logits/ (text as is, BOS added, last-position logits)\n")
    f.write("# Escapes: \\n \\t \\\\.  system is always '-' (a base model has no system message).\n")
    for i, s in enumerate(greedy):
        f.write("g%02d\traw\t-\t%s\n" % (i + 1, esc(s)))
    for i, s in enumerate(logits):
        f.write("l%02d\tlraw\t-\t%s\n" % (i + 1, esc(s)))
print("%d greedy + %d logits prompts -> %s" % (len(greedy), len(logits), os.path.relpath(out, root)))
