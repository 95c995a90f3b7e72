"""pg_llm's engine, driven through `build/llm-cli bench`.

llm-cli bench adds B requests at once (prompts from --prompt-file, greedy,
ignore_eos, max_tokens N), steps the engine until all finish and prints:
  prefill: X tokens/s (S s)          all B prompts processed, first tokens out
  decode:  X tokens/s aggregate, M ms/step (K tokens after the first, S s)
"""
import os
import re
import subprocess

from .common import BenchError, run_cmd

_PREFILL = re.compile(r"^prefill:\s*([0-9.eE+-]+|inf|nan) tokens/s \(([0-9.eE+-]+) s\)", re.M)
_KERNELS = re.compile(r"^kernels: (\S+)", re.M)
_DECODE = re.compile(r"^decode:\s*([0-9.eE+-]+|inf|nan) tokens/s aggregate, ([0-9.eE+-]+) ms/step "
                     r"\((\d+) tokens after the first, ([0-9.eE+-]+) s\)", re.M)


def build(root):
    """make build/llm-cli (the engine library comes with it); raise BenchError on failure."""
    run_cmd(["make", "-s", "build/llm-cli"], timeout=900, cwd=root)
    cli = os.path.join(root, "build", "llm-cli")
    if not os.access(cli, os.X_OK):
        raise BenchError("make did not produce build/llm-cli")
    return cli


def kernels(cli, model, threads, timeout=300):
    """The engine's kernel implementation on this host, as a short `llm-cli bench`
    reports it: {"kernels": "avx512vnni" (kernels/cpu/dispatch.h) or "cuda", "amx": False}.
    An embedding model (which `llm-cli bench` refuses) is asked through a short
    `llm-cli embed`, whose stderr names the kernels once its weights are loaded:
    "+amx-bf16" when its F16 matrices run on AMX tiles (llm.encoder_arithmetic)."""
    try:
        out = run_cmd([cli, "bench", "-m", model, "-b", "1", "-p", "8", "-n", "2", "-t", str(threads)],
                      timeout=timeout)
    except BenchError as e:
        if "only embeds" not in str(e):
            raise
        try:
            p = subprocess.run([cli, "embed", "-m", model, "-t", str(threads), "kernels"],
                               capture_output=True, text=True, timeout=timeout)
        except (subprocess.TimeoutExpired, OSError) as e2:
            raise BenchError("llm-cli embed: %s" % e2)
        out = p.stderr
    m = _KERNELS.search(out)
    if not m:
        raise BenchError("llm-cli bench printed no kernels line: %r" % out[-300:])
    return {"kernels": m.group(1), "amx": "amx" in m.group(1).lower()}


def bench(cli, model, batch, n_gen, threads, prompt_file, timeout=600, extra=()):
    """One `llm-cli bench` run; returns metrics (tokens/s are aggregates over the batch).
    prompt_file None: llm-cli's own pseudo-random prompts (-p in extra sets their length).

    prefill_tps   prompt tokens / time until every request has its first token
    decode_tps    tokens generated after each request's first / decode time
    wall_tps      all generated tokens / (prefill + decode time): the number an
                  HTTP client would see, minus the transport
    step_ms       decode time per step (one token for every running request)
    """
    argv = [cli, "bench", "-m", model, "-b", str(batch), "-n", str(n_gen), "-t", str(threads)]
    if prompt_file:
        argv += ["--prompt-file", prompt_file]
    argv += list(extra)
    out = run_cmd(argv, timeout=timeout)
    p = _PREFILL.search(out)
    d = _DECODE.search(out)
    if not p or not d:
        raise BenchError("unexpected llm-cli bench output: %r" % out[-400:])
    prefill_s = float(p.group(2))
    decode_s = float(d.group(4))
    generated = int(d.group(3)) + batch
    return {
        "prefill_tps": float(p.group(1)),
        "prefill_s": prefill_s,
        "decode_tps": float(d.group(1)),
        "decode_s": decode_s,
        "step_ms": float(d.group(2)),
        "generated": generated,
        "wall_tps": generated / (prefill_s + decode_s) if prefill_s + decode_s > 0 else None,
    }
