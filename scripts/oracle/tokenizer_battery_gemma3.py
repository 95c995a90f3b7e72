#!/usr/bin/env python3
"""Write Gemma 3's tokenizer test battery: one JSON string per line.

Usage: tokenizer_battery_gemma3.py [OUT]   (default test/golden/gemma3/tokenizer_inputs.txt)

The battery is the shared one (test/golden/tokenizer_inputs.txt, written by
tokenizer_battery.py) followed by cases that matter to a SentencePiece
vocabulary with USER_DEFINED whitespace and HTML tokens: leading, repeated
and trailing spaces around the lengths of the space / tab / newline run
tokens (up to 31), digits, emoji with ZWJ, CJK, combining accents,
characters outside the vocabulary (byte fallback), literal U+2581, and text
that looks like Gemma's control tokens.  Deterministic; every case is valid
UTF-8 and appears once.
"""
import json
import os
import random
import sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
with open(os.path.join(root, "test", "golden", "tokenizer_inputs.txt"), encoding="utf-8") as f:
    cases = [json.loads(line) for line in f if line.strip()]
seen = set(cases)


def add(*strings):
    for s in strings:
        if s not in seen:
            seen.add(s)
            cases.append(s)


# --- spaces: leading, inner, trailing, around the run-token lengths 2..31 ---
for n in (1, 2, 3, 4, 8, 15, 16, 30, 31, 32, 33, 47, 62, 63, 64, 65, 100):
    add(" " * n + "a", "a" + " " * n + "b", "a" + " " * n, " " * n)
add(" Hello", "  Hello", "Hello ", "Hello  ", " Hello ", "  Hello  world  ", " a b c ",
    "a b  c   d    e     f", " \n", "\n ", " \t", "\t ", " \t\n ", "x \u00a0 y", "\u3000\u3000x",
    "end.  Next", "a.\n\n  b", "    def f():\n        return 1\n")

# --- tabs and newlines around their run-token lengths 1..31 ---
for n in (1, 2, 3, 5, 16, 30, 31, 32, 33, 62, 63, 64, 70):
    add("\t" * n, "x" + "\t" * n + "y", "\n" * n, "x" + "\n" * n + "y")
add("\r\n" * 5, "a\r\n\r\nb", "\n\t\n\t", "\t\n\t\n", "\n \n \n", " \n\n ", "\n\n\n \n\n\n",
    "a\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\nb", "\v\f", "a\rb\r\rc")

# --- digits (Gemma's vocabulary splits numbers into single digits) ---
add("0123456789", "9876543210" * 3, " 42", "42 ", "3.14159265", "-0.5e-10", "1,234,567.89",
    "2026-11-30T12:34:56Z", "v0.3.36", "0x7fffffff", "1/3 + 2/3 = 1", "١٢٣٤", "१२३", "①②③",
    "ⅰⅱⅲ", "１２３４", "10²", "¾", "$1,000,000", "100 000", "12\u202f345")

# --- emoji, ZWJ sequences, modifiers, flags ---
add("\U0001F468\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466",
    "\U0001F469\u200D\u2764\uFE0F\u200D\U0001F48B\u200D\U0001F468",
    "\U0001F9D1\U0001F3FF\u200D\U0001F9B0", "\U0001F44B\U0001F3FB\U0001F44B\U0001F3FC\U0001F44B\U0001F3FD",
    "\U0001F1E9\U0001F1EA\U0001F1EB\U0001F1F7", "\U0001F3F4\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F",
    "\u2764\ufe0f\u200d\U0001F525", "\U0001F600\u200d", "\u200d\U0001F600", "a\u200db\u200cc",
    "\U0001F600 \U0001F601  \U0001F602", "\U0001F9FF\U0001FAE0\U0001FAE8", "*\ufe0f\u20e3", "\U0001F6B5\u200D\u2640\uFE0F")

# --- CJK, other scripts ---
add("东京是日本的首都。", "東京は日本の首都です。", "서울은 한국의 수도입니다.", "日本語と English と 한국어",
    "漢字かなカナ混じり文", "中文，标点；符号！", "「引用」『二重』", "ｶﾀｶﾅ", "𠮷野家", "𪚥",
    "ئۇيغۇرچە", "ትግርኛ", "ᏣᎳᎩ", "ꦗꦮ", "ᠮᠣᠩᠭᠣᠯ", "ພາສາລາວ", "ဗမာစာ", "ភាសាខ្មែរ")

# --- combining accents and normalization forms (no normalization is applied) ---
add("e\u0301", "\u00e9", "e\u0301\u0301\u0301", "Cafe\u0301", "Caf\u00e9", "a\u0300\u0301\u0302\u0303\u0304",
    "\u1e9b\u0323", "A\u030a", "\u212b", "\uac00", "\u1100\u1161", "o\u0308\u0332", "Z\u0351\u0352\u0353\u0354")

# --- characters outside the vocabulary: byte-fallback tokens <0xNN> ---
add("\ue000", "\U000f0000", "\U0010fffd", "\u0378", "\U0001fbf0", "\U00013000", "\U00010330",
    "\U00010900", "a\U00013000b", " \U00010330 ", "\U00013000\U00013001\U00013002",
    "x\U000f0000\U000f0001y", "\x01", "\x02\x03", "\x7f", "\x1b[0m", "\x00\x00", "a\x00b",
    "\ufffd", "\ufffe", "\uffff", "\U0001d11e\U0001d11f")

# --- literal U+2581 (the SentencePiece space marker) ---
add("\u2581", "\u2581\u2581", "a\u2581b", "\u2581hello", "hello\u2581", "\u2581 \u2581", " \u2581")

# --- Gemma control-token lookalikes and USER_DEFINED tokens in text ---
add("<start_of_turn>", "<end_of_turn>", "<eos>", "<bos>", "<pad>", "<unk>", "<mask>",
    "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n",
    "hi<end_of_turn><eos>", "<bos><bos>", "< bos >", "<start_of_turn", "start_of_turn>",
    "<unused0>", "<unused98>", "<unused6241>", "<0x41>", "<0xE2><0x96><0x81>", "<0x0A>",
    "[multimodal]", "<start_of_image>", "<end_of_image>", "<start_of_image>x<end_of_image>",
    "<table><tr><td>1</td></tr></table>", "<h1>Title</h1>", "<b>bold</b> <i>it</i>",
    "<html><body><div>x</div></body></html>", "< table >", "<TABLE>", "<table", "table>",
    "<<table>>", "<table><table>", " <table> ", "\n<table>\n", "<s>x</s>", "<code>int x;</code>",
    "<|im_start|>user\n<|im_end|>", "<|endoftext|>")

# --- seeded mixtures over whitespace runs, tags and byte-fallback characters ---
pool = (list("abcdefghijklmnopqrstuvwxyz ABC") * 3 + list("0123456789") +
        [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\u00a0", "\u3000", "\u2581"] +
        ["<table>", "</td>", "<b>", "<eos>", "<start_of_turn>", "<0x41>", "[multimodal]"] +
        list("éüñçß日本語中文한국어") + ["\u0301", "\u200d", "\U0001F600", "\U0001F44D\U0001F3FD",
                                   "\U00013000", "\ue000", "\x01", "\U0010fffd"] +
        list(".,;:!?-_()[]{}<>/\\\"'@#$%^&*+=~`|"))
rng = random.Random(20261130)
for n in range(80):
    add("".join(rng.choice(pool) for _ in range(rng.randint(1, 60))))

for s in cases:
    s.encode("utf-8")           # raises on lone surrogates: every case must be valid UTF-8

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "test", "golden", "gemma3", "tokenizer_inputs.txt")
os.makedirs(os.path.dirname(out), exist_ok=True)
with open(out, "w", encoding="utf-8") as f:
    for s in cases:
        f.write(json.dumps(s, ensure_ascii=True) + "\n")
print("%d cases -> %s" % (len(cases), out))
