#!/bin/bash
# make_tokenizer_golden.sh — tokenizer and chat-template golden files from llama.cpp.
#
#   scripts/oracle/make_tokenizer_golden.sh [MODEL.gguf]
#
# Writes (from the repository root):
#   test/golden/tokenizer_inputs.txt   the battery (scripts/oracle/tokenizer_battery.py)
#   test/golden/tokenizer.tsv          <hex of UTF-8 input>\t<space-separated ids>
#                                      llama-tokenize --no-bos --no-parse-special, per string
#   test/golden/chat_template.tsv      <role:hex ...>\t<ids>: the model's Jinja chat template
#                                      rendered with jinja2 (add_generation_prompt), then
#                                      llama-tokenize with special-token parsing on
# Each string goes to llama-tokenize through a file (-f, read verbatim, --no-escape),
# so the bytes are exact.
#
#   scripts/oracle/make_tokenizer_golden.sh gemma3
#
# Writes test/golden/gemma3/{tokenizer_inputs.txt (scripts/oracle/tokenizer_battery_gemma3.py),
# tokenizer.tsv, chat_template.tsv} for models/gemma-3-270m-q4_k_m.gguf (or
# $LLM_TEST_MODEL) through scripts/oracle/tokenize.cpp (one model load for all
# strings); formats in scripts/oracle/tokenizer_golden_gemma3.py.
set -euo pipefail

cd "$(dirname "$0")/../.."
LLAMA_BUILD=${LLAMA_BUILD:-/root/.cache/pg_llm/llama.cpp-build}
LLAMA_SRC=${LLAMA_SRC:-/root/.cache/pg_llm/llama_cpp_python-0.3.36/vendor/llama.cpp}

if [ "${1:-}" = gemma3 ]; then
	MODEL=${LLM_TEST_MODEL:-models/gemma-3-270m-q4_k_m.gguf}
	BIN=$LLAMA_BUILD/bin/pg_llm-tokenize
	[ -f "$LLAMA_BUILD/bin/libllama.so" ] || { echo "missing $LLAMA_BUILD (run scripts/build-llama-cpp.sh)" >&2; exit 1; }
	[ -f "$MODEL" ] || { echo "missing model $MODEL (run scripts/fetch-model.sh gemma3-270m)" >&2; exit 1; }
	g++ -std=c++17 -O2 -Wall -Wextra -I"$LLAMA_SRC/include" -I"$LLAMA_SRC/ggml/include" \
		scripts/oracle/tokenize.cpp -o "$BIN" \
		-L"$LLAMA_BUILD/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$LLAMA_BUILD/bin"
	python3 scripts/oracle/tokenizer_battery_gemma3.py test/golden/gemma3/tokenizer_inputs.txt
	exec python3 scripts/oracle/tokenizer_golden_gemma3.py "$BIN" "$MODEL" test/golden/gemma3
fi

MODEL=${1:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
TOK="$LLAMA_BUILD/bin/llama-tokenize"

[ -x "$TOK" ] || { echo "missing $TOK (run scripts/build-llama-cpp.sh)" >&2; exit 1; }
[ -f "$MODEL" ] || { echo "missing model $MODEL" >&2; exit 1; }

python3 scripts/oracle/tokenizer_battery.py test/golden/tokenizer_inputs.txt

TOK="$TOK" MODEL="$MODEL" LLAMA_SRC="$LLAMA_SRC" python3 - <<'EOF'
import json, os, subprocess, sys, tempfile

tok, model = os.environ["TOK"], os.environ["MODEL"]
sys.path.insert(0, os.path.join(os.environ["LLAMA_SRC"], "gguf-py"))


def llama_tokenize(data, parse_special):
    with tempfile.NamedTemporaryFile(delete=False) as f:
        f.write(data)
        path = f.name
    try:
        cmd = [tok, "-m", model, "-f", path, "--ids", "--no-bos", "--no-escape", "--log-disable"]
        if not parse_special:
            cmd.append("--no-parse-special")
        out = subprocess.run(cmd, check=True, capture_output=True).stdout.decode()
    finally:
        os.unlink(path)
    line = [l for l in out.splitlines() if l.startswith("[")][-1]
    return [int(x) for x in line.strip("[]").split(",") if x.strip()]


with open("test/golden/tokenizer_inputs.txt", encoding="utf-8") as f:
    inputs = [json.loads(l) for l in f if l.strip()]
with open("test/golden/tokenizer.tsv", "w") as out:
    for s in inputs:
        b = s.encode("utf-8")
        ids = llama_tokenize(b, parse_special=False)
        out.write("%s\t%s\n" % (b.hex(), " ".join(map(str, ids))))
print("%d tokenizer cases -> test/golden/tokenizer.tsv" % len(inputs))

# chat template: render the GGUF's own template, tokenize with specials parsed
import gguf
import jinja2

reader = gguf.GGUFReader(model)
field = reader.fields["tokenizer.chat_template"]
template = bytes(field.parts[field.data[0]]).decode("utf-8")
env = jinja2.Environment()
tmpl = env.from_string(template)

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
]
with open("test/golden/chat_template.tsv", "w") as out:
    for chat in chats:
        msgs = [{"role": r, "content": c} for r, c in chat]
        text = tmpl.render(messages=msgs, add_generation_prompt=True)
        ids = llama_tokenize(text.encode("utf-8"), parse_special=True)
        key = " ".join("%s:%s" % (r, c.encode("utf-8").hex()) for r, c in chat)
        out.write("%s\t%s\n" % (key, " ".join(map(str, ids))))
print("%d chat cases -> test/golden/chat_template.tsv" % len(chats))
EOF
