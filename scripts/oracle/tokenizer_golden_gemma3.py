#!/usr/bin/env python3
"""Gemma 3's tokenizer and chat-template goldens from llama.cpp.

Usage: tokenizer_golden_gemma3.py TOKENIZE_BIN MODEL.gguf OUTDIR
(run by scripts/oracle/make_tokenizer_golden.sh gemma3; TOKENIZE_BIN is
scripts/oracle/tokenize.cpp built against llama.cpp)

Reads OUTDIR/tokenizer_inputs.txt (JSON strings, one a line) and writes
  OUTDIR/tokenizer.tsv       <hex of UTF-8 input>\t<ids>: llama_tokenize with
                             add_special and parse_special off (what
                             `llama-tokenize --no-bos --no-parse-special` prints)
  OUTDIR/chat_template.tsv   <role:hex ...>\t<ids>: the GGUF has no chat
                             template, so these are llama.cpp's built-in
                             "gemma" template (llama_chat_apply_template with
                             add_ass) tokenized with add_special (BOS) and
                             parse_special on: what an explicitly configured
                             "gemma" family must produce
"""
import json
import os
import subprocess
import sys

binary, model, out = sys.argv[1:4]


def oracle(mode, lines):
    res = subprocess.run([binary, model] + mode, input="".join(l + "\n" for l in lines).encode(),
                         check=True, capture_output=True).stdout.decode().split("\n")
    if len(res) != len(lines) + 1 or res[-1] != "":
        sys.exit("tokenize: %d lines for %d inputs" % (len(res) - 1, len(lines)))
    return res[:-1]


with open(os.path.join(out, "tokenizer_inputs.txt"), encoding="utf-8") as f:
    inputs = [json.loads(line).encode("utf-8").hex() for line in f if line.strip()]
with open(os.path.join(out, "tokenizer.tsv"), "w") as f:
    for h, ids in zip(inputs, oracle(["plain"], inputs)):
        f.write("%s\t%s\n" % (h, ids))
print("%d tokenizer cases -> %s/tokenizer.tsv" % (len(inputs), out))

chats = [
    [("user", "Hello!")],
    [("system", "You are a pirate."), ("user", "Where is the treasure?")],
    [("user", "hi"), ("assistant", "Hello! How can I help?"), ("user", "Tell me a joke about 2024.")],
    [("user", "  leading spaces\nand newlines\n\n")],
    [("user", "")],
    [("user", "Ünïcödé 😀 日本語 I've 12345")],
    [("system", ""), ("user", "x")],
    [("user", "Summarize: The printer on floor 3 won't print; error E-0042.\r\nThanks")],
    [("assistant", "I start the conversation.")],
    [("system", "Answer in JSON."), ("user", "{\"q\": \"capital of France?\"}"),
     ("assistant", "{\"a\": \"Paris\"}"), ("user", "And Spain?")],
    [("system", "Be brief."), ("system", "Be kind."), ("user", "hi")],
    [("system", "  Rules first.  "), ("assistant", "ok"), ("user", "go")],
    [("user", "a  b\t\tc\n\n\nd <table> x")],
]
keys = [" ".join("%s:%s" % (r, c.encode("utf-8").hex()) for r, c in chat) for chat in chats]
with open(os.path.join(out, "chat_template.tsv"), "w") as f:
    for k, ids in zip(keys, oracle(["chat", "gemma"], keys)):
        f.write("%s\t%s\n" % (k, ids))
print("%d chat cases -> %s/chat_template.tsv" % (len(chats), out))
