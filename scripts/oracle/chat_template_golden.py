#!/usr/bin/env python3
"""Render the chat-template corpus with HF transformers, the reference.

For every template (the llama.cpp tree's models/templates/*.jinja, and the
tokenizer.chat_template of every GGUF given with --gguf) and every
conversation of test/golden/chat_templates/conversations.json (its tools,
when it has some, passed as apply_chat_template's tools), with
add_generation_prompt false and true, writes what transformers'
render_jinja_template (the function apply_chat_template(tokenize=False)
calls) gives, with strftime_now fixed at 2026-02-03 04:05:06 and fixed
special-token strings.  One file per template,
test/golden/chat_templates/<name>.out, records:

  @@ <conversation> <add_generation_prompt 0|1> OK <n>      n bytes of text follow, then "\n"
  @@ <conversation> <0|1> RAISE <n>                         raise_exception's message
  @@ <conversation> <0|1> FAIL <n>                          another error (type and message)
  @@ - - COMPILE <n>                                        the template does not compile

usage: chat_template_golden.py OUTDIR [--gguf model.gguf ...]
requires: transformers==5.23.0 (no torch), jinja2 3.1.6, numpy (for gguf-py)
"""
import datetime as _dt
import glob
import json
import os
import sys

import transformers
import transformers.utils.chat_template_utils as ctu

assert transformers.__version__ == "5.23.0", transformers.__version__

SDIST = os.path.expanduser("~/.cache/pg_llm/llama_cpp_python-0.3.36/vendor/llama.cpp")
FIXED = _dt.datetime(2026, 2, 3, 4, 5, 6)

# the special-token variables the corpus renders with (the GGUFs use their own)
SPECIALS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}


class FixedDatetime(_dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return FIXED


ctu.datetime = FixedDatetime


def render(src, messages, agp, specials, tools=None):
    return ctu.render_jinja_template(conversations=[messages], chat_template=src, tools=tools,
                                     add_generation_prompt=agp, **specials)[0][0]


def record(out, conv, agp, kind, text):
    b = text.encode("utf-8")
    out.write(b"@@ %s %s %s %d\n" % (conv.encode(), agp.encode(), kind.encode(), len(b)))
    out.write(b + b"\n")


def golden(path, src, convs, specials):
    import jinja2
    with open(path, "wb") as out:
        try:
            ctu._compile_jinja_template(src)
        except Exception as e:  # noqa: BLE001 - the reference's own failure is the golden
            record(out, "-", "-", "COMPILE", f"{type(e).__name__}: {e}")
            return "compile"
        worst = "ok"
        for conv in convs:
            for agp in (False, True):
                try:
                    text = render(src, conv["messages"], agp, specials, conv.get("tools"))
                    record(out, conv["name"], str(int(agp)), "OK", text)
                except jinja2.exceptions.TemplateError as e:
                    if type(e) is jinja2.exceptions.TemplateError:
                        record(out, conv["name"], str(int(agp)), "RAISE", str(e))
                        worst = "raise" if worst == "ok" else worst
                    else:
                        record(out, conv["name"], str(int(agp)), "FAIL", f"{type(e).__name__}: {e}")
                        worst = "fail"
                except Exception as e:  # noqa: BLE001
                    record(out, conv["name"], str(int(agp)), "FAIL", f"{type(e).__name__}: {e}")
                    worst = "fail"
        return worst


def gguf_template(path):
    sys.path.insert(0, os.path.join(SDIST, "gguf-py"))
    from gguf import GGUFReader
    r = GGUFReader(path)

    def s(key):
        f = r.fields.get(key)
        return None if f is None else bytes(f.parts[f.data[0]]).decode("utf-8")

    def tok(key):
        f = r.fields.get(key)
        if f is None:
            return None
        i = int(f.parts[f.data[0]][0])
        toks = r.fields["tokenizer.ggml.tokens"]
        return bytes(toks.parts[toks.data[i]]).decode("utf-8")

    specials = {}
    for name, key in (("bos_token", "bos"), ("eos_token", "eos"), ("unk_token", "unknown"),
                      ("pad_token", "padding")):
        t = tok(f"tokenizer.ggml.{key}_token_id")
        if t is not None:
            specials[name] = t
    return s("tokenizer.chat_template"), specials


def main():
    outdir = sys.argv[1]
    ggufs = []
    if "--gguf" in sys.argv:
        ggufs = sys.argv[sys.argv.index("--gguf") + 1:]
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "../../test/golden/chat_templates/conversations.json"), encoding="utf-8") as f:
        convs = json.load(f)
    summary = {}
    for p in sorted(glob.glob(os.path.join(SDIST, "models/templates/*.jinja"))):
        name = os.path.basename(p)[:-len(".jinja")]
        with open(p, encoding="utf-8") as f:
            src = f.read()
        summary[name] = golden(os.path.join(outdir, name + ".out"), src, convs, SPECIALS)
    for g in ggufs:
        src, specials = gguf_template(g)
        if src is None:
            continue
        name = "gguf-" + os.path.basename(g)[:-len(".gguf")]
        with open(os.path.join(outdir, name + ".jinja"), "w", encoding="utf-8") as f:
            f.write(src)
        with open(os.path.join(outdir, name + ".specials.json"), "w", encoding="utf-8") as f:
            json.dump(specials, f, ensure_ascii=False)
        summary[name] = golden(os.path.join(outdir, name + ".out"), src, convs, specials)
    for name, s in summary.items():
        print(f"{s:8s} {name}")
    counts = {}
    for s in summary.values():
        counts[s] = counts.get(s, 0) + 1
    print(counts)


if __name__ == "__main__":
    main()
