"""Checks of the harness's arithmetic (no PostgreSQL, no model):
python3 bench/harness/selftest.py  -> "N passed, N failed" last, exit 1 on a failure."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness import llamacpp, shards, workloads  # noqa: E402

failures = []
checks = 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)


def close(a, b, eps=1e-9):
    return a is not None and b is not None and abs(a - b) <= eps


# decode at a KV depth: weight bytes + depth x KV bytes per position over copy bandwidth
class _Ctx:
    roofline = {"copy_gbs": 50.0}
    model_info = {"weight_bytes": 100e6, "kv_bytes_per_position": 20000}


check(close(workloads.kv_mem_fraction(_Ctx, 100.0, 5000), 100.0 * (100e6 + 5000 * 20000) / 50e9),
      "KV-depth bandwidth fraction")
check(workloads.kv_mem_fraction(_Ctx, None, 5000) is None, "KV-depth fraction of no rate")
check(close(workloads.kv_mem_fraction(_Ctx, 100.0, 5000, "q8_0"), 100.0 * (100e6 + 5000 * 20000 * 34 / 64) / 50e9),
      "KV-depth bandwidth fraction, q8_0 cache (34 of 64 bytes)")
check([w.id for w in workloads.engine_workloads([16], 1024, 8)] == ["single", "batch16", "long", "long-q8_0"],
      "engine workloads: single, batches, long context with f16 and q8_0 KV")
check(workloads.fa_name("llama-bench", 1) == "llama-bench -fa 1", "peer label with -fa 1")
check(workloads.fa_name("llama-bench", 0.5) == "llama-bench -fa 0/1 by round", "peer label, rounds differ")
check(workloads.fa_name("llama-bench", None) == "llama-bench", "peer label without a setting")

# union of intervals: overlaps merged, gaps not counted
check(close(workloads.union_length([(0, 2), (1, 3), (5, 6)]), 4.0), "union with overlap and gap")
check(close(workloads.union_length([(2, 3), (0, 1)]), 2.0), "union of unsorted disjoint intervals")
check(close(workloads.union_length([]), 0.0), "union of nothing")

# nearest-rank percentiles, None ignored
xs = list(range(1, 101))
check(workloads.percentile(xs, 50) == 50, "p50 of 1..100")
check(workloads.percentile(xs, 99) == 99, "p99 of 1..100")
check(workloads.percentile([None, 7], 99) == 7, "percentile ignores None")
check(workloads.percentile([], 50) is None, "percentile of nothing")


def req(finished, ttft, total, n, prompt=100, cached=0, outcome="length"):
    return {"finished": finished, "ttft_ms": ttft, "total_ms": total, "completion_tokens": n,
            "prompt_tokens": prompt, "cached_tokens": cached, "outcome": outcome,
            "tpot_ms": (total - ttft) / (n - 1) if n > 1 else None}


# two requests decoding one after the other: 10 tokens each, first token at
# 100 ms, end at 1000 ms -> 9 tokens per 0.9 s of decoding each
seq = [req(1.0, 100, 1000, 10), req(2.0, 100, 1000, 10)]
m = workloads.request_metrics(seq, 2.0)
check(close(m["decode_tps"], 10.0), "sequential decode rate = 18 tokens / 1.8 s")
check(close(m["decode_concurrency"], 1.0), "sequential concurrency 1")
check(close(m["tokens_per_s"], 10.0) and m["failed"] == 0, "output tokens / wall")
# the same two decoding together: twice the rate over the same span
par = [req(1.0, 100, 1000, 10), req(1.0, 100, 1000, 10)]
m2 = workloads.request_metrics(par + [{"outcome": "error", "prompt_tokens": None, "cached_tokens": None,
                                       "completion_tokens": None, "ttft_ms": None, "tpot_ms": None,
                                       "total_ms": None, "finished": 1.0}], 1.0)
check(close(m2["decode_tps"], 20.0) and close(m2["decode_concurrency"], 2.0), "concurrent decode rate doubles")
check(m2["failed"] == 1 and m2["requests"] == 3, "failed requests counted, not averaged")

# the bound: P = 100 - 20 computed, D = 20, k = 4 -> (80 + 80) / 100 = 1.6
o = {"prompt_tokens_mean": 100, "cached_tokens_mean": 20, "completion_tokens_mean": 20, "decode_tps": 400,
     "rows_per_s": 1.5}
rw = {"decode_tps": 100, "rows_per_s": 1.0}
b = workloads.arithmetic_bound(o, rw, {"k": 8.0, "batch": 32, "how": "test"})
check(close(b["bound"], 1.6) and close(b["achieved"], 1.5), "bound (P+Dk)/(P+D) and achieved")
check(close(b["achieved_over_bound"], 1.5 / 1.6), "achieved / bound")
check(close(b["bound_pure"], (80 + 160) / 100.0), "bound with the pure-decode k")
check(workloads.arithmetic_bound({}, rw) is None, "no bound without inputs")

# the pgai function and the peers send the text pg_llm renders
t = workloads.chatml("hi")
check(t.startswith("<|im_start|>system\n" + workloads.CHATML_SYSTEM + "<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n")
      and t.endswith("<|im_start|>assistant\n"), "ChatML text")
check(repr(workloads.CHATML_SYSTEM) in workloads.PGAI_FUNCTION.replace("@SYSTEM@", repr(workloads.CHATML_SYSTEM)),
      "pgai function gets the system message")

# W3 sizes: every ticket once
for rows, sessions, per in ((512, 32, 16), (16, 16, 1), (64, 32, 2)):
    w = workloads.SqlSessions(rows)
    check((w.sessions, w.per_session, w.rows_n) == (sessions, per, rows), "W3 split of %d rows" % rows)

# W10: even contiguous halves; concurrency from the shards' request windows
check(shards.split_ids([4, 1, 3, 2, 5], 2) == [[1, 2], [3, 4]], "W10 split: sorted, equal halves, remainder left out")
check(shards.SqlShards(65).rows_n == 64, "W10 rows: even")
ov, short = shards.window_overlap([(0.0, 10.0), (1.0, 9.0)])
check(close(ov, 8.0) and close(short, 8.0), "W10 overlap of nested windows")
check(shards.window_overlap([(0.0, 1.0), (2.0, 3.0)])[0] == 0.0, "W10 sequential windows do not overlap")

# the peer's AMX column: from the CPU features its build's smoke test recorded
with tempfile.TemporaryDirectory() as d:
    os.mkdir(os.path.join(d, "bin"))
    bindir = os.path.join(d, "bin")
    check(llamacpp.cpu_backend(bindir) is None, "peer CPU backend: no record, unknown")
    with open(os.path.join(d, "cpu-backend.txt"), "w") as f:
        f.write("main: system_info: n_threads = 2 (n_threads_batch = 2) / 2 | CPU : SSE3 = 1 | AVX2 = 1 | "
                "AVX512 = 1 | AVX512_VNNI = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 |\n")
    pc = llamacpp.cpu_backend(bindir)
    check(pc is not None and pc["amx"] is False and pc["system_info"].startswith("CPU : SSE3 = 1"),
          "peer CPU backend without AMX")
    with open(os.path.join(d, "cpu-backend.txt"), "w") as f:
        f.write("system_info: n_threads = 2 | CPU : SSE3 = 1 | AVX512 = 1 | AMX_INT8 = 1 | REPACK = 1 |\n")
    check(llamacpp.cpu_backend(bindir)["amx"] is True, "peer CPU backend with AMX_INT8")
    with open(os.path.join(d, "cpu-backend.txt"), "w") as f:
        f.write("load_backend: loaded CPU backend from /x/libggml-cpu-sapphirerapids.so\n")
    check(llamacpp.cpu_backend(bindir)["amx"] is True, "peer CPU backend: the sapphirerapids variant loaded")

if failures:
    print("selftest: %d of %d checks FAILED: %s" % (len(failures), checks, "; ".join(failures)))
print("%d passed, %d failed" % (checks - len(failures), len(failures)))
sys.exit(1 if failures else 0)
