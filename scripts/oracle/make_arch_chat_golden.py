#!/usr/bin/env python3
"""llama.cpp's chat prompts and greedy replies on the synthetic architecture
models with each family's real chat template embedded.

For every row of CASES: the family's small synthetic model (tools/
make_synth_gguf.py arch FAMILY small, F16, seed 1, the cut SmolLM2
vocabulary) with test/golden/arch/templates/TEMPLATE.jinja written as
tokenizer.chat_template, served by llama.cpp's llama-server --jinja (the
version vendored in llama-cpp-python 0.3.36, scripts/build-llama-cpp.sh);
the conversation rendered by its /apply-template, tokenized by /tokenize as
/completion does (add_special, parse_special), and GEN tokens generated
greedily (/completion, temperature 0, flash attention off as in the
other goldens) from those ids.  A template reading date_string gets the
template's own default, as transformers renders it (llama-server would
pass today's date).  Writes
test/golden/arch/chat.tsv, one line per case:

  alias  family  generator-flags  template  sha256-of-model  conversation-json
  rendered-prompt-json  prompt-ids  generated-ids

(ids comma-separated).  test/t/038_arch_chat.pl holds llm_render_chat,
llm_count_tokens and llm_chat on the same files to them.

usage: make_arch_chat_golden.py   (env LLM_ORACLE_CACHE, default ~/.cache/pg_llm)
"""
import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
GEN = 8
# alias, family, extra generator flags, template (test/golden/arch/templates/), conversation
CHAT = [{"role": "user", "content": "Name a color."}, {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "Another one?"}]
CHAT_SYS = [{"role": "system", "content": "You are terse."}] + CHAT
CASES = [
    ("qwen25", "qwen2", "", "Qwen-Qwen2.5-7B-Instruct", CHAT),
    ("qwen3", "qwen3", "", "Qwen-Qwen3-0.6B", CHAT),
    ("llama31", "llama31", "", "meta-llama-Llama-3.1-8B-Instruct", CHAT_SYS),
    ("phi35", "phi3", "", "microsoft-Phi-3.5-mini-instruct", CHAT_SYS),
    ("gemma2", "gemma2", "", "google-gemma-2-2b-it", CHAT),
    # a system message: without one the template writes today's date
    ("granite3", "granite", "", "ibm-granite-granite-3.3-2B-Instruct", CHAT_SYS),
    ("smollm3", "smollm3", "", "HuggingFaceTB-SmolLM3-3B", CHAT_SYS),
    # Mistral and Ministral: the llama architecture without RoPE factors
    ("mistral", "llama31", "--plain", "mistralai-Mistral-Nemo-Instruct-2407", CHAT_SYS),
    ("ministral", "llama31", "--plain", "mistralai-Ministral-3-14B-Reasoning-2512", CHAT_SYS),
]


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.load(r)


def main():
    cache = os.environ.get("LLM_ORACLE_CACHE", os.path.expanduser("~/.cache/pg_llm"))
    build = subprocess.run([os.path.join(ROOT, "scripts/build-llama-cpp.sh")], check=True, capture_output=True,
                           text=True).stdout.strip().splitlines()[-1]
    server = os.path.join(build, "bin", "llama-server")
    outdir = os.path.join(ROOT, "build", "synth")
    os.makedirs(outdir, exist_ok=True)
    rows = []
    port = 18700
    for alias, fam, flags, tmpl, conv in CASES:
        model = os.path.join(outdir, f"chat-{alias}.gguf")
        tmpl_path = os.path.join(ROOT, "test/golden/arch/templates", tmpl + ".jinja")
        cmd = [sys.executable, os.path.join(ROOT, "tools/make_synth_gguf.py"), "arch", fam, "small", model,
               "--chat-template", tmpl_path]
        if flags:
            cmd += flags.split() + ["--set-arch", "llama"]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        sha = hashlib.sha256(open(model, "rb").read()).hexdigest()
        port += 1
        log = open(os.path.join(outdir, f"chat-{alias}.server.log"), "w")
        srv = subprocess.Popen([server, "-m", model, "--jinja", "--port", str(port), "-t", "2", "-c", "4096",
                                "-np", "1", "-fa", "off", "--no-webui"], stdout=log, stderr=subprocess.STDOUT)
        try:
            for _ in range(120):
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                        if r.status == 200:
                            break
                except Exception:
                    time.sleep(0.5)
            body = {"messages": conv}
            if "date_string" in open(tmpl_path).read():
                # llama.cpp passes today's date as date_string; transformers (the
                # project's reference for templates) passes none: the template's default
                body["chat_template_kwargs"] = {"date_string": "26 Jul 2024"}
            prompt = post(port, "/apply-template", body)["prompt"]
            ids = post(port, "/tokenize", {"content": prompt, "add_special": True, "parse_special": True})["tokens"]
            gen = post(port, "/completion", {"prompt": ids, "n_predict": GEN, "temperature": 0, "cache_prompt": False,
                                             "return_tokens": True})["tokens"]
        finally:
            srv.terminate()
            srv.wait()
        rows.append("\t".join([alias, fam, flags or "-", tmpl, sha, json.dumps(conv), json.dumps(prompt),
                               ",".join(map(str, ids)), ",".join(map(str, gen))]))
        print(f"{alias}: {len(ids)} prompt ids, generated {gen}", file=sys.stderr)
    with open(os.path.join(ROOT, "test/golden/arch/chat.tsv"), "w") as f:
        f.write("# alias\tfamily\tflags\ttemplate\tsha256\tconversation\tprompt\tprompt_ids\tgenerated_ids"
                "  (scripts/oracle/make_arch_chat_golden.py: llama-server --jinja)\n")
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
