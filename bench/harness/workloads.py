"""The comparisons bench/run knows about.

A workload has an id, a title, `sides(ctx)` -> [(name, fn(round) -> metrics)]
(the first side is ours; two or more sides, alternated by round), and either
`rows(ctx, ours, peer)` (two sides) or `table_rows(ctx, {side: medians})` ->
table rows built from the median metrics of each side.  `unavailable(ctx)`
returns a reason to skip it or None; an optional `after_rounds(ctx, medians)`
measures what the rows need once the rounds are done (W1's pure-decode
reference).  Engine workloads: single, batchB (llm-cli vs llama.cpp);
PostgreSQL workloads (docs/PERFORMANCE.md): W1 tickets, W3 sessions, W4 template.
"""
import csv
import math
import os
import re
import time
import types

from . import gguf_info, llamacpp, ours
from .common import BenchError, log


def mem_fraction(ctx, tps):
    """Fraction of the copy-bandwidth roofline reached by a decode rate, taking
    one step to read every weight once (bytes/token = weight bytes)."""
    if tps is None or not ctx.roofline.get("copy_gbs"):
        return None
    return tps * ctx.model_info["weight_bytes"] / (ctx.roofline["copy_gbs"] * 1e9)


def fma_fraction(ctx, tps, logits=True):
    """Fraction of the measured fp32 FMA peak, counting 2 FLOPs per weight per
    token.  Decode tokens all go through the output projection (for SmolLM2,
    the tied embedding: 2 * all parameters); prompt tokens but the last skip
    it (logits=False)."""
    if tps is None or not ctx.roofline.get("fma_avx2_gflops"):
        return None
    w = ctx.model_info["matmul_params_logits" if logits else "matmul_params_no_logits"]
    return 2.0 * w * tps / (ctx.roofline["fma_avx2_gflops"] * 1e9)


def prefill_fma_fraction(ctx, tps):
    return fma_fraction(ctx, tps, logits=False)


# bytes of a q8_0 KV row per byte of the fp16 row: blocks of 32 int8 + an fp16 scale (34 bytes) per 32 values (64)
KV_BYTES_SCALE = {"f16": 1.0, "q8_0": 34.0 / 64.0}


def kv_mem_fraction(ctx, tps, depth, kv_dtype="f16"):
    """Fraction of the copy-bandwidth roofline of a decode rate at a KV depth:
    a step reads every weight once and every cached K and V value of the
    sequence (fp16, or q8_0 at 34/64 of its bytes), bytes/token = weight
    bytes + depth * KV bytes per position."""
    if tps is None or not ctx.roofline.get("copy_gbs") or not ctx.model_info.get("kv_bytes_per_position"):
        return None
    per_token = (ctx.model_info["weight_bytes"]
                 + depth * ctx.model_info["kv_bytes_per_position"] * KV_BYTES_SCALE[kv_dtype])
    return tps * per_token / (ctx.roofline["copy_gbs"] * 1e9)


def row(metric, unit, ours_v, peer_v, roof_kind=None, ctx=None, peer_name=None, ratio=True):
    """One table row; roof_kind 'mem', 'fma', 'fma-prefill' or ('mem-kv',
    depth[, kv_dtype]) adds roofline fractions; peer_name labels the peer
    column when a workload has several (or says the peer's flash-attention
    setting)."""
    if isinstance(roof_kind, tuple) and roof_kind[0] == "mem-kv":
        depth = roof_kind[1]
        kv_dtype = roof_kind[2] if len(roof_kind) > 2 else "f16"
        frac = lambda c, v: kv_mem_fraction(c, v, depth, kv_dtype)  # noqa: E731
        roof_kind = "mem"
    else:
        frac = {"mem": mem_fraction, "fma": fma_fraction, "fma-prefill": prefill_fma_fraction}.get(roof_kind)
    return {
        "metric": metric,
        "unit": unit,
        "ours": ours_v,
        "peer": peer_v,
        "peer_name": peer_name,
        "ratio": ours_v / peer_v if ratio and ours_v and peer_v else None,
        "roofline": roof_kind,
        "ours_roofline_fraction": frac(ctx, ours_v) if frac else None,
        "peer_roofline_fraction": frac(ctx, peer_v) if frac else None,
    }


class SingleStream:
    """One request: `llm-cli bench -b 1` vs `llama-bench` (prefill and decode)."""

    id = "single"
    title = "single stream, b=1"
    peer = "llama-bench"

    def unavailable(self, ctx):
        return None

    def sides(self, ctx):
        def run_ours(r):
            if ctx.ours_error:
                raise BenchError(ctx.ours_error)
            return ours.bench(ctx.cli, ctx.model, 1, ctx.n_gen, ctx.threads, ctx.prompt_file)

        def run_peer(r):
            if ctx.peer_error:
                raise BenchError(ctx.peer_error)
            return llamacpp.llama_bench(ctx.llama_bin, ctx.model, ctx.n_prompt, ctx.n_gen, ctx.threads)

        return [("ours", run_ours), ("peer", run_peer)]

    def rows(self, ctx, o, p):
        return [
            row("decode tokens/s", "tokens/s", o.get("decode_tps"), p.get("decode_tps"), "mem", ctx,
                peer_name=fa_name("llama-bench", p.get("decode_fa"))),
            row("prefill tokens/s", "tokens/s", o.get("prefill_tps"), p.get("prefill_tps"), "fma-prefill", ctx,
                peer_name=fa_name("llama-bench", p.get("prefill_fa"))),
        ]


def fa_name(peer, fa):
    """The peer's label with the flash-attention setting of its number (median rounds may mix)."""
    if fa is None:
        return peer
    if fa != int(fa):
        return "%s -fa 0/1 by round" % peer
    return "%s -fa %d" % (peer, int(fa))


class LongContext:
    """One request at a long context: `llm-cli bench -b 1 -p D -n G` (prefill
    of D tokens, then G tokens decoded at depth D..D+G) vs `llama-bench -p D`
    and `llama-bench -n G -d D`, each with the faster of -fa 0 and -fa 1.
    kv_dtype q8_0 (workload long-q8_0): both sides keep a q8_0 KV cache
    (`--kv-cache-dtype q8_0`; llama-bench `-ctk q8_0 -ctv q8_0`, which needs
    -fa 1)."""

    peer = "llama-bench"

    def __init__(self, depth, n_gen, kv_dtype="f16"):
        self.depth = depth
        self.n_gen = n_gen
        self.kv_dtype = kv_dtype
        self.id = "long" if kv_dtype == "f16" else "long-" + kv_dtype
        self.title = "long context, b=1" + ("" if kv_dtype == "f16" else ", %s KV" % kv_dtype)

    def unavailable(self, ctx):
        return None

    def sides(self, ctx):
        D, G = self.depth, self.n_gen

        def run_ours(r):
            if ctx.ours_error:
                raise BenchError(ctx.ours_error)
            return ours.bench(ctx.cli, ctx.model, 1, G, ctx.threads, None, timeout=3600,
                              extra=("-p", str(D), "--ctx", str(D + G + 64), "--kv-cache-dtype", self.kv_dtype))

        def run_peer(r):
            if ctx.peer_error:
                raise BenchError(ctx.peer_error)
            return llamacpp.llama_bench_long(ctx.llama_bin, ctx.model, D, G, ctx.threads, kv_dtype=self.kv_dtype)

        return [("ours", run_ours), ("peer", run_peer)]

    def rows(self, ctx, o, p):
        D = self.depth
        return [
            row("prefill %d tokens, tokens/s" % D, "tokens/s", o.get("prefill_tps"), p.get("prefill_tps"),
                "fma-prefill", ctx, peer_name=fa_name("llama-bench", p.get("prefill_fa"))),
            row("decode at depth %d, tokens/s" % D, "tokens/s", o.get("decode_tps"), p.get("decode_tps"),
                ("mem-kv", D + self.n_gen // 2, self.kv_dtype), ctx,
                peer_name=fa_name("llama-bench", p.get("decode_fa"))),
        ]


class Batched:
    """B concurrent requests: `llm-cli bench -b B` vs llama-server with B slots
    and B concurrent HTTP clients sending the same token ids."""

    peer = "llama-server"

    def __init__(self, batch):
        self.batch = batch
        self.id = "batch%d" % batch
        self.title = "%d streams" % batch

    def unavailable(self, ctx):
        if len(ctx.prompts) < self.batch:
            return "only %d prompts" % len(ctx.prompts)
        return None

    def sides(self, ctx):
        B = self.batch

        def run_ours(r):
            if ctx.ours_error:
                raise BenchError(ctx.ours_error)
            return ours.bench(ctx.cli, ctx.model, B, ctx.n_gen, ctx.threads, ctx.prompt_file)

        def run_peer(r):
            if ctx.peer_error:
                raise BenchError(ctx.peer_error)
            log_path = ctx.results_path("llama-server-%s-r%d.log" % (self.id, r + 1))
            srv = llamacpp.Server(ctx.llama_bin, ctx.model, B, ctx.n_prompt + ctx.n_gen + 64,
                                  ctx.threads, log_path)
            with srv:
                srv.complete(ctx.prompts[0][:8], 2)  # warm-up outside the timing
                return llamacpp.concurrent_completions(srv, ctx.prompts[:B], ctx.n_gen)

        return [("ours", run_ours), ("peer", run_peer)]

    def rows(self, ctx, o, p):
        return [
            row("decode aggregate tokens/s", "tokens/s", o.get("decode_tps"), p.get("decode_tps"), "fma", ctx),
            row("end-to-end tokens/s (wall)", "tokens/s", o.get("wall_tps"), p.get("wall_tps")),
            row("prefill tokens/s", "tokens/s", o.get("prefill_tps"), p.get("prefill_tps"), "fma-prefill", ctx),
        ]


def engine_workloads(batches, long_depth=6144, long_gen=16):
    return ([SingleStream()] + [Batched(b) for b in batches] + [LongContext(long_depth, long_gen)]
            + [LongContext(long_depth, long_gen, "q8_0")])


class SecondModel:
    """Another GGUF (default Gemma 3 270M) on the same prompts, threads and
    greedy decoding: single stream (`llm-cli bench -b 1` vs llama-bench) and
    B streams (`llm-cli bench -b B` vs llama-server -np B) in every round.
    Rooflines are taken over this file's weight bytes and parameters."""

    peer = "llama.cpp"

    def __init__(self, wid, model, batch=16):
        self.id = wid
        self.model = os.path.abspath(model)
        self.batch = batch
        self.title = "%s (%s)" % (wid, os.path.basename(self.model))
        self.info = None

    def unavailable(self, ctx):
        if not os.path.exists(self.model):
            return "model %s missing (make model MODEL=gemma3-270m)" % self.model
        if len(ctx.prompts) < self.batch:
            return "only %d prompts" % len(ctx.prompts)
        self.info = gguf_info.read(self.model)
        return None

    def sides(self, ctx):
        B = self.batch

        def run_ours(r):
            if ctx.ours_error:
                raise BenchError(ctx.ours_error)
            one = ours.bench(ctx.cli, self.model, 1, ctx.n_gen, ctx.threads, ctx.prompt_file)
            many = ours.bench(ctx.cli, self.model, B, ctx.n_gen, ctx.threads, ctx.prompt_file)
            return dict([("single_" + k, v) for k, v in one.items()] + [("batch_" + k, v) for k, v in many.items()])

        def run_peer(r):
            if ctx.peer_error:
                raise BenchError(ctx.peer_error)
            one = llamacpp.llama_bench(ctx.llama_bin, self.model, ctx.n_prompt, ctx.n_gen, ctx.threads)
            log_path = ctx.results_path("llama-server-%s-r%d.log" % (self.id, r + 1))
            srv = llamacpp.Server(ctx.llama_bin, self.model, B, ctx.n_prompt + ctx.n_gen + 64, ctx.threads, log_path)
            with srv:
                srv.complete(ctx.prompts[0][:8], 2)  # warm-up outside the timing
                many = llamacpp.concurrent_completions(srv, ctx.prompts[:B], ctx.n_gen)
            return dict([("single_" + k, v) for k, v in one.items()] + [("batch_" + k, v) for k, v in many.items()])

        return [("ours", run_ours), ("peer", run_peer)]

    def rows(self, ctx, o, p):
        mctx = types.SimpleNamespace(roofline=ctx.roofline, model_info=self.info or gguf_info.read(self.model))
        B = self.batch
        return [
            row("decode tokens/s, b=1", "tokens/s", o.get("single_decode_tps"), p.get("single_decode_tps"), "mem",
                mctx, peer_name="llama-bench"),
            row("prefill tokens/s, b=1", "tokens/s", o.get("single_prefill_tps"), p.get("single_prefill_tps"),
                "fma-prefill", mctx, peer_name="llama-bench"),
            row("decode aggregate tokens/s, %d streams" % B, "tokens/s", o.get("batch_decode_tps"),
                p.get("batch_decode_tps"), "fma", mctx, peer_name="llama-server -np %d" % B),
            row("end-to-end tokens/s (wall), %d streams" % B, "tokens/s", o.get("batch_wall_tps"),
                p.get("batch_wall_tps"), peer_name="llama-server -np %d" % B),
        ]


W1_PROMPT = "'Summarize this support ticket in one sentence.' || E'\\n' || body"
W4_INSTRUCTION = (
    "You are the triage assistant of Kestrel Systems' support desk. For the ticket below, write one "
    "sentence that a support engineer can read in five seconds. Name the product involved (Cloud Suite, "
    "Billing, Sync, Router RX or the Mobile App), the customer's main problem in plain words, and any "
    "order number, error code, device model or date that the ticket mentions. Do not greet the customer, "
    "do not apologise, do not promise anything, and do not invent facts that are not in the ticket. If "
    "the ticket asks for a refund, say so explicitly. If the ticket reports an outage affecting several "
    "people, start the sentence with the word OUTAGE. If the ticket is a feature request, start with the "
    "word REQUEST. If the customer sounds angry or mentions cancelling, end the sentence with the words "
    "(at risk). Keep the sentence under thirty words. Write in English even when the ticket is written in "
    "another language, and keep product names exactly as the customer wrote them. When a ticket mentions "
    "several problems, report only the one the customer says is blocking them, or the first one if none "
    "is called blocking. Treat billing questions about invoices, refunds, double charges, plan changes and "
    "payment cards as Billing even when they arrive through the mobile app. Treat firmware, Wi-Fi, guest "
    "network and reboot problems as Router RX. Ignore signatures, greetings, legal footers and quoted "
    "earlier messages. Ticket follows.")


W1_INSTRUCTION = "Summarize this support ticket in one sentence."
# SmolLM2's chat template: ChatML with this default system message (pg_llm
# reads it from the GGUF; the peers' check below compares the token ids).
CHATML_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
PER_SLOT_CTX = 1024  # llama-server positions per slot: the longest W1 prompt (~330 tokens) + 48


def chatml(user, system=CHATML_SYSTEM):
    """The text llm_generate(user) renders (engine/text/chat_template.c):
    special tokens between plain-text pieces; llama-server parses the
    special tokens and tokenizes the pieces in between, as pg_llm does."""
    return ("<|im_start|>system\n%s<|im_end|>\n<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n"
            % (system, user))


def ticket_prompts(ctx):
    """{id: W1 prompt text} from bench/data/tickets.csv (the rows the server loaded)."""
    if getattr(ctx, "tickets", None) is None:
        with open(os.path.join(ctx.root, "bench", "data", "tickets.csv"), newline="") as f:
            ctx.tickets = {int(r["id"]): W1_INSTRUCTION + "\n" + r["body"] for r in csv.DictReader(f)}
    return ctx.tickets


def percentile(xs, q):
    """Nearest-rank percentile (q in 0..100) of the non-None values, None if none."""
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    return xs[max(1, math.ceil(q / 100.0 * len(xs))) - 1]


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def union_length(intervals):
    """Total length of the union of (start, end) intervals."""
    total, cur_s, cur_e = 0.0, None, None
    for a, b in sorted(intervals):
        if cur_e is None or a > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = a, b
        else:
            cur_e = max(cur_e, b)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def request_metrics(reqs, wall):
    """Metrics of a run from pg_llm's llm_recent_requests() rows (or the
    same keys built from llama-server replies): token means, output tokens/s,
    TTFT/TPOT percentiles, and the decode rate: tokens after each request's
    first / the time during which at least one request was decoding (the
    union of the intervals first token -> end).  Row at a time that is the
    single-stream decode rate; with the window it is the batched one, prefill
    chunks of rows joining the batch included."""
    done = [r for r in reqs if r["outcome"] in ("stop", "length")]
    gen = sum(r["completion_tokens"] for r in done)
    intervals = [(r["finished"] - (r["total_ms"] - r["ttft_ms"]) / 1e3, r["finished"]) for r in done
                 if r["completion_tokens"] and r["completion_tokens"] > 1 and r.get("finished") is not None]
    span = union_length(intervals)
    after_first = sum(r["completion_tokens"] - 1 for r in done if r["completion_tokens"] > 1)
    return {
        "wall_s": wall,
        "requests": len(reqs),
        "failed": len(reqs) - len(done),
        "completion_tokens": gen,
        "tokens_per_s": gen / wall if wall > 0 else None,
        "rows_per_s": len(done) / wall if wall > 0 else None,
        "prompt_tokens_mean": mean([r["prompt_tokens"] for r in done]),
        "cached_tokens_mean": mean([r["cached_tokens"] for r in done]),
        "completion_tokens_mean": mean([r["completion_tokens"] for r in done]),
        "ttft_p50_ms": percentile([r["ttft_ms"] for r in done], 50),
        "ttft_p99_ms": percentile([r["ttft_ms"] for r in done], 99),
        "tpot_p50_ms": percentile([r["tpot_ms"] for r in done], 50),
        "tpot_p99_ms": percentile([r["tpot_ms"] for r in done], 99),
        "decode_tps": after_first / span if span > 0 else None,
        "decode_concurrency": sum(b - a for a, b in intervals) / span if span > 0 else None,
    }


def wait_recent(pg, n, timeout=30):
    """llm_recent_requests() once n records are visible (the worker publishes
    them right after replying, so the last may lag the statement by a step)."""
    t0 = time.time()
    while True:
        reqs = pg.recent_requests()
        if len(reqs) >= n or time.time() - t0 > timeout:
            return reqs
        time.sleep(0.1)


PGAI_FUNCTION = """
CREATE OR REPLACE FUNCTION pgai_generate(prompt text, max_tokens int, url text) RETURNS text
LANGUAGE plpython3u AS $pgai$
# what users of in-database AI extensions run today: one HTTP call per row
import json
import urllib.request
text = ("<|im_start|>system\\n%s<|im_end|>\\n<|im_start|>user\\n%s<|im_end|>\\n<|im_start|>assistant\\n"
        % (@SYSTEM@, prompt))
body = json.dumps({"prompt": text, "n_predict": max_tokens, "temperature": 0}).encode()
req = urllib.request.Request(url + "/completion", data=body, headers={"Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=600) as r:
    return json.loads(r.read())["content"]
$pgai$;
"""


W1_PREFILL_CAP = 128  # llm.prefill_cap_tokens of W1's "ours, prefill cap" side


def sql_literal(text):
    return "'" + text.replace("'", "''") + "'"


class SqlStatement:
    """W1: one statement over the tickets.  Sides: the LLM Batch node's
    read-ahead window (default settings), row at a time (llm.batch_window = 1,
    the way a scalar function runs in any other in-SQL AI product), and the
    pgai-style peer: a plpython3u function making one HTTP call per row to
    llama-server (-np 1, -t T, same GGUF, same prompt tokens, greedy, same
    max tokens).  Also the arithmetic bound of the window's speed-up."""

    id = "w1"
    peer = "row at a time"

    def __init__(self, rows, max_tokens=48, windows=()):
        """windows: more llm.batch_window values, one side each ("window N")
        after the default window's side, to choose the default by measurement."""
        self.rows_n = rows
        self.max_tokens = max_tokens
        self.windows = list(windows)
        self.title = "W1 tickets (%d rows, 1 statement%s)" % (
            rows, "" if max_tokens == 48 else ", max_tokens %d" % max_tokens)
        self.checked = False

    def unavailable(self, ctx):
        return None if ctx.pg else "no PostgreSQL server (%s)" % ctx.pg_error

    def statement(self, target, fn):
        return ("CREATE TEMP TABLE %s AS SELECT id, %s AS s FROM (SELECT * FROM tickets ORDER BY id LIMIT %d) t"
                % (target, fn, self.rows_n))

    def sides(self, ctx):
        prompt = "%s || E'\\n' || body" % sql_literal(W1_INSTRUCTION)
        q_ours = self.statement("w1", "llm_generate(%s, max_tokens => %d)" % (prompt, self.max_tokens))

        def run_ours(window):
            def fn(r):
                ctx.pg.fresh_engine()
                dt, _ = ctx.pg.timed(("SET llm.batch_window = %d; " % window if window else "") + q_ours)
                m = request_metrics(wait_recent(ctx.pg, self.rows_n), dt)
                m["max_batch_size"] = ctx.pg.stat()["max_batch_size"]
                return m
            return fn

        def run_pgai(r):
            try:
                return pgai_round(r)
            except (OSError, ValueError, KeyError) as e:  # HTTP, JSON or file errors: this side fails
                raise BenchError("pgai-style side: %s: %s" % (type(e).__name__, e))

        def pgai_round(r):
            if ctx.peer_error:
                raise BenchError(ctx.peer_error)
            if not getattr(ctx, "plpython_ok", False):
                ctx.pg.ensure_plpython()
                ctx.pg.sql("CREATE EXTENSION IF NOT EXISTS plpython3u")
                ctx.pg.sql(PGAI_FUNCTION.replace("@SYSTEM@", repr(CHATML_SYSTEM)))
                ctx.plpython_ok = True
            log_path = ctx.results_path("llama-server-w1-r%d.log" % (r + 1))
            srv = llamacpp.Server(ctx.llama_bin, ctx.model, 1, PER_SLOT_CTX, ctx.threads, log_path,
                                  extra=["--metrics"])
            with srv:
                srv.complete_text(chatml("Say hi."), 2)  # warm-up outside the timing
                if not self.checked:
                    ctx.w1_prompt_check = self.check_prompts(ctx, srv)
                    self.checked = True
                before = srv.metrics()
                q = self.statement("w1p", "pgai_generate(%s, %d, %s)" % (prompt, self.max_tokens,
                                                                         sql_literal(srv.url)))
                dt, _ = ctx.pg.timed(q)
                after = srv.metrics()
            gen = after.get("tokens_predicted_total", 0) - before.get("tokens_predicted_total", 0)
            return {"wall_s": dt, "rows_per_s": self.rows_n / dt, "tokens_per_s": gen / dt,
                    "completion_tokens": gen,
                    "prompt_tokens_processed": after.get("prompt_tokens_total", 0)
                    - before.get("prompt_tokens_total", 0)}

        def run_capped(r):
            ctx.pg.set_engine_setting("llm.prefill_cap_tokens", str(W1_PREFILL_CAP), "prefill_cap",
                                      str(W1_PREFILL_CAP))
            try:
                return run_ours(None)(r)
            finally:
                ctx.pg.set_engine_setting("llm.prefill_cap_tokens", None, "prefill_cap", "0")

        return ([("ours", run_ours(None)), ("row at a time", run_ours(1)), ("pgai-style", run_pgai),
                 ("ours, prefill cap", run_capped)]
                + [("window %d" % w, run_ours(w)) for w in self.windows])

    def check_prompts(self, ctx, srv, n=3):
        """Same prompt tokens on both sides, checked on the first n tickets:
        pg_llm's ids rebuilt from llm_tokenize of the template's text pieces
        (as chat_template.c renders them) against llama-server's /tokenize of
        the text the pgai function sends, and llm_complete's prompt token
        count; plus whether the greedy outputs agree (not required: the two
        engines round differently)."""
        prompts = ticket_prompts(ctx)
        ids = sorted(prompts)[:n]
        out = {"rows": len(ids), "same_prompt_ids": 0, "same_prompt_count": 0, "same_output": 0,
               "prompt_tokens": [], "details": []}

        def tok(text):
            v = ctx.pg.sql("SELECT llm_tokenize(%s)" % sql_literal(text)).strip().strip("{}")
            return [int(x) for x in v.split(",")] if v else []

        for i in ids:
            mine = ([1] + tok("system\n" + CHATML_SYSTEM) + [2] + tok("\n") + [1] + tok("user\n" + prompts[i])
                    + [2] + tok("\n") + [1] + tok("assistant\n"))
            theirs = srv.tokenize(chatml(prompts[i]))
            row = ctx.pg.sql("SELECT prompt_tokens, completion_tokens, replace(text, E'\\n', ' ') FROM "
                             "llm_complete(%s || E'\\n' || (SELECT body FROM tickets WHERE id = %d), "
                             "max_tokens => 48)" % (sql_literal(W1_INSTRUCTION), i)).rstrip("\n").split("|", 2)
            reply = srv.complete_text(chatml(prompts[i]), 48)
            same_ids = mine == theirs
            same_count = int(row[0]) == len(theirs)
            same_out = row[2] == reply["content"].replace("\n", " ")
            out["same_prompt_ids"] += same_ids
            out["same_prompt_count"] += same_count
            out["same_output"] += same_out
            out["prompt_tokens"].append(len(theirs))
            out["details"].append({"id": i, "ours_prompt_tokens": int(row[0]), "server_prompt_tokens": len(theirs),
                                   "ours_completion_tokens": int(row[1]),
                                   "server_completion_tokens": reply["tokens_predicted"],
                                   "ours": row[2], "server": reply["content"]})
        log("W1 prompt check on %d tickets: same prompt ids %d, same prompt token count %d, same greedy text %d"
            % (len(ids), out["same_prompt_ids"], out["same_prompt_count"], out["same_output"]))
        if out["same_prompt_ids"] < len(ids):
            log("warning: llama-server sees different prompt tokens than pg_llm: %s" % out["details"])
        return out

    def after_rounds(self, ctx, meds):
        """A pure-decode reference for k, after the rounds: `llm-cli bench`
        (same engine, threads and model, no PostgreSQL) on the first B W1
        prompts as pg_llm tokenizes them, B = the window run's median decode
        concurrency, and on one prompt; 48 new tokens each, every request
        decoding together after all prefills (ctx.w1_decode_ref)."""
        n_new = self.max_tokens
        o = meds.get("ours", {})
        if ctx.ours_error or not o.get("decode_concurrency"):
            return None
        B = max(2, min(self.rows_n, int(round(o["decode_concurrency"]))))

        def ids(v):
            v = v.strip().strip("{}")
            return [int(x) for x in v.split(",")] if v else []

        head = [1] + ids(ctx.pg.sql("SELECT llm_tokenize(%s)" % sql_literal("system\n" + CHATML_SYSTEM))) + [2]
        nl = ids(ctx.pg.sql("SELECT llm_tokenize(E'\\n')"))
        tail = [2] + nl + [1] + ids(ctx.pg.sql("SELECT llm_tokenize(E'assistant\\n')"))
        path = ctx.results_path("w1-prompts-%d.txt" % B)
        with open(path, "w") as f:
            for line in ctx.pg.sql("SELECT llm_tokenize(E'user\\n' || %s || E'\\n' || body) FROM tickets "
                                   "ORDER BY id LIMIT %d" % (sql_literal(W1_INSTRUCTION), B)).splitlines():
                f.write(" ".join(map(str, head + nl + [1] + ids(line) + tail)) + "\n")
        try:
            batched = ours.bench(ctx.cli, ctx.model, B, n_new, ctx.threads, path)
            single = ours.bench(ctx.cli, ctx.model, 1, n_new, ctx.threads, path)
        except BenchError as e:
            log("W1 decode reference failed: %s" % e)
            return {"error": str(e)}
        self.strict_reference(ctx, head, nl, tail)
        ctx.w1_decode_ref = {"batch": B, "batched_decode_tps": batched["decode_tps"],
                             "single_decode_tps": single["decode_tps"],
                             "k": batched["decode_tps"] / single["decode_tps"],
                             "how": "llm-cli bench -b %d -n %d and -b 1 on the first W1 prompts (%s)"
                             % (B, n_new, path)}
        log("W1 decode reference: %s" % ctx.w1_decode_ref)
        return ctx.w1_decode_ref

    def strict_reference(self, ctx, head, nl, tail):
        """The rates of the strict bound: `llm-cli bench -b 32 -n 48` on the
        first 32 W1 prompts (as pg_llm tokenizes them), its batched prefill
        and decode tokens/s (ctx.w1_strict_ref)."""
        B = min(32, self.rows_n)
        path = ctx.results_path("w1-prompts-strict-%d.txt" % B)
        with open(path, "w") as f:
            for line in ctx.pg.sql("SELECT llm_tokenize(E'user\\n' || %s || E'\\n' || body) FROM tickets "
                                   "ORDER BY id LIMIT %d" % (sql_literal(W1_INSTRUCTION), B)).splitlines():
                v = line.strip().strip("{}")
                f.write(" ".join(map(str, head + nl + [1] + [int(x) for x in v.split(",") if x] + tail)) + "\n")
        try:
            m = ours.bench(ctx.cli, ctx.model, B, 48, ctx.threads, path)
        except BenchError as e:
            log("W1 strict reference failed: %s" % e)
            return
        ctx.w1_strict_ref = {"batch": B, "prefill_tps": m["prefill_tps"], "decode_tps": m["decode_tps"],
                             "how": "llm-cli bench -b %d -n 48 on the first W1 prompts (%s)" % (B, path)}
        log("W1 strict reference: %s" % ctx.w1_strict_ref)

    def table_rows(self, ctx, meds):
        o, rw, pg = meds.get("ours", {}), meds.get("row at a time", {}), meds.get("pgai-style", {})
        rows = []
        ref = getattr(ctx, "w1_strict_ref", None)
        strict = {}
        for name in ("ours", "ours, prefill cap"):
            s = meds.get(name, {})
            b = strict_bound(s, self.rows_n, ref)
            if b:
                strict[name] = b
                rows.append(row("%s: time of the strict bound / window time (target >= 0.90)" % name, "fraction",
                                b["fraction"], None, peer_name="strict bound %.0f s" % b["bound_s"], ratio=False))
        if strict:
            ctx.w1_strict = strict
        c = meds.get("ours, prefill cap", {})
        if c.get("rows_per_s") and o.get("rows_per_s"):
            rows.append(row("rows/s with llm.prefill_cap_tokens = %d" % W1_PREFILL_CAP, "rows/s", c["rows_per_s"],
                            o["rows_per_s"], peer_name="ours, no cap"))
            rows.append(row("TPOT p50 with the cap (ms, lower is better)", "ms", c.get("tpot_p50_ms"),
                            o.get("tpot_p50_ms"), peer_name="ours, no cap"))
        for peer_name, p in (("row at a time", rw), ("pgai-style", pg)):
            rows.append(row("rows/s", "rows/s", o.get("rows_per_s"), p.get("rows_per_s"), peer_name=peer_name))
            rows.append(row("output tokens/s", "tokens/s", o.get("tokens_per_s"), p.get("tokens_per_s"),
                            peer_name=peer_name))
        rows.append(row("decode tokens/s (window / row at a time)", "tokens/s", o.get("decode_tps"),
                        rw.get("decode_tps"), peer_name="row at a time"))
        rows.append(row("largest engine batch (window / row at a time)", "requests", o.get("max_batch_size"),
                        rw.get("max_batch_size"), peer_name="row at a time", ratio=False))
        for w in self.windows:
            ow = meds.get("window %d" % w, {})
            rows.append(row("rows/s, llm.batch_window %d (vs the default window)" % w, "rows/s",
                            ow.get("rows_per_s"), o.get("rows_per_s"), peer_name="default window"))
            rows.append(row("largest engine batch, llm.batch_window %d" % w, "requests",
                            ow.get("max_batch_size"), o.get("max_batch_size"), peer_name="default window",
                            ratio=False))
        b = arithmetic_bound(o, rw, getattr(ctx, "w1_decode_ref", None))
        ctx.w1_bound = b
        if b:
            rows.append(row("bound inputs: P (prompt computed) / D (output) tokens per row", "tokens", b["P"],
                            b["D"], peer_name="D", ratio=False))
            rows.append(row("speed-up vs row at a time: achieved / bound, k = %.2f from the run" % b["k"], "x",
                            b["achieved"], b["bound"], peer_name="bound (P+Dk)/(P+D)"))
            if b.get("k_pure"):
                rows.append(row("achieved / bound, k = %.2f pure decode (llm-cli -b %d)"
                                % (b["k_pure"], b["k_pure_batch"]), "x", b["achieved"], b["bound_pure"],
                                peer_name="bound (P+Dk)/(P+D)"))
        return rows


def strict_bound(o, rows, ref):
    """The strict bound of W1's window (PERFORMANCE.md): every prompt token
    computed at the batched prefill rate plus every output token at the
    batched decode rate, both measured by `llm-cli bench -b 32` (ref);
    fraction = that time / the window run's wall time (target >= 0.90)."""
    need = ("prompt_tokens_mean", "cached_tokens_mean", "completion_tokens_mean", "wall_s")
    if not ref or any(o.get(k) is None for k in need) or not ref.get("prefill_tps") or not ref.get("decode_tps"):
        return None
    P = o["prompt_tokens_mean"] - o["cached_tokens_mean"]
    D = o["completion_tokens_mean"]
    bound_s = rows * (P / ref["prefill_tps"] + D / ref["decode_tps"])
    return {"P": P, "D": D, "prefill_tps": ref["prefill_tps"], "decode_tps": ref["decode_tps"],
            "bound_s": bound_s, "wall_s": o["wall_s"], "fraction": bound_s / o["wall_s"], "target": 0.90,
            "source": ref["how"]}


def arithmetic_bound(o, rw, decode_ref=None):
    """The bound on the window's speed-up over row at a time:
    (P + D*k) / (P + D), P = mean prompt tokens computed per row (prompt -
    cached, window run), D = mean output tokens per row, k = batched decode
    rate (window run) / single-stream decode rate (row-at-a-time run), both
    from llm_recent_requests (request_metrics' decode_tps).  Achieved =
    rows/s window / rows/s row at a time; the target is achieved/bound >= 0.90.
    The run's k counts the window run's prefill chunks of joining rows as
    decode time, which lowers k and the bound; decode_ref (W1 after_rounds)
    adds k_pure, batched over single decode rate with nothing else in the
    steps, and the stricter bound_pure."""
    need = ("prompt_tokens_mean", "cached_tokens_mean", "completion_tokens_mean", "decode_tps", "rows_per_s")
    if any(o.get(k) is None for k in need) or rw.get("decode_tps") is None or not rw.get("rows_per_s"):
        return None
    P = o["prompt_tokens_mean"] - o["cached_tokens_mean"]
    D = o["completion_tokens_mean"]
    k = o["decode_tps"] / rw["decode_tps"]
    bound = (P + D * k) / (P + D)
    achieved = o["rows_per_s"] / rw["rows_per_s"]
    out = {"P": P, "P_with_cached": o["prompt_tokens_mean"], "D": D, "k": k,
           "k_source": "decode_tps of the window run / of the row-at-a-time run (llm_recent_requests: tokens "
                       "after the first / time with a request decoding)",
           "bound": bound, "achieved": achieved, "achieved_over_bound": achieved / bound, "target": 0.90}
    if decode_ref and decode_ref.get("k"):
        kp = decode_ref["k"]
        out.update({"k_pure": kp, "k_pure_batch": decode_ref["batch"], "k_pure_source": decode_ref["how"],
                    "bound_pure": (P + D * kp) / (P + D)})
        out["achieved_over_bound_pure"] = achieved / out["bound_pure"]
    return out


class SqlSessions:
    """W3: S sessions through pgbench (custom script), each running its
    prompts one at a time: each transaction takes the next ticket id from a
    sequence, so every ticket is done exactly once.  Peer: llama-server with
    S slots and S client threads each sending its prompts one at a time.
    Server-side latencies: ours from llm_recent_requests (TTFT from the
    request's arrival in the engine), llama-server from each reply's
    timings (prompt_ms: from the slot starting the prompt; predicted_per_token_ms)."""

    id = "w3"
    peer = "llama-server"

    def __init__(self, rows, sessions=32):
        self.sessions = max(1, min(sessions, rows))
        self.per_session = max(1, rows // self.sessions)
        self.rows_n = self.sessions * self.per_session
        self.title = "W3 sessions (%d x %d prompts)" % (self.sessions, self.per_session)

    def unavailable(self, ctx):
        return None if ctx.pg else "no PostgreSQL server (%s)" % ctx.pg_error

    def sides(self, ctx):
        script = ("SELECT nextval('w3_seq') AS tid \\gset\n"
                  "SELECT llm_generate(%s || E'\\n' || body, max_tokens => 48) FROM tickets WHERE id = :tid;\n"
                  % sql_literal(W1_INSTRUCTION))

        def run_ours(r):
            ctx.pg.sql("CREATE SEQUENCE IF NOT EXISTS w3_seq; SELECT setval('w3_seq', 1, false)")
            ctx.pg.fresh_engine()
            wall, out = ctx.pg.pgbench(script, self.sessions, self.per_session)
            done = re.search(r"number of transactions actually processed: (\d+)/(\d+)", out)
            if not done or done.group(1) != done.group(2) or int(done.group(1)) != self.rows_n:
                raise BenchError("pgbench did not run every transaction: %s" % out[-400:])
            last = int(ctx.pg.sql("SELECT last_value FROM w3_seq").strip())
            if last != self.rows_n:
                raise BenchError("w3_seq ended at %d, not %d" % (last, self.rows_n))
            m = request_metrics(wait_recent(ctx.pg, self.rows_n), wall)
            m["max_batch_size"] = ctx.pg.stat()["max_batch_size"]
            tps = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", out)
            m["pgbench_tps"] = float(tps.group(1)) if tps else None
            return m

        def run_peer(r):
            try:
                return peer_round(r)
            except (OSError, ValueError, KeyError) as e:
                raise BenchError("llama-server side: %s: %s" % (type(e).__name__, e))

        def peer_round(r):
            if ctx.peer_error:
                raise BenchError(ctx.peer_error)
            prompts = ticket_prompts(ctx)
            ids = sorted(prompts)[:self.rows_n]
            sessions = [[chatml(prompts[i]) for i in ids[s * self.per_session:(s + 1) * self.per_session]]
                        for s in range(self.sessions)]
            log_path = ctx.results_path("llama-server-w3-r%d.log" % (r + 1))
            srv = llamacpp.Server(ctx.llama_bin, ctx.model, self.sessions, PER_SLOT_CTX, ctx.threads, log_path)
            with srv:
                srv.complete_text(chatml("Say hi."), 2)  # warm-up outside the timing
                wall, replies = llamacpp.session_completions(srv, sessions, 48)
            reqs = []
            for rep in replies:
                t = rep["timings"]
                reqs.append({"outcome": "stop", "completion_tokens": t["predicted_n"],
                             "prompt_tokens": t["prompt_n"] + t.get("cache_n", 0),
                             "cached_tokens": t.get("cache_n", 0),
                             "ttft_ms": t["prompt_ms"],
                             "tpot_ms": t["predicted_per_token_ms"] if t["predicted_n"] > 1 else None,
                             "total_ms": t["prompt_ms"] + t["predicted_ms"], "finished": None})
            m = request_metrics(reqs, wall)
            m.pop("decode_tps", None)
            m.pop("decode_concurrency", None)
            return m

        return [("ours", run_ours), ("peer", run_peer)]

    def table_rows(self, ctx, meds):
        o, p = meds.get("ours", {}), meds.get("peer", {})
        rows = [row("output tokens/s (wall)", "tokens/s", o.get("tokens_per_s"), p.get("tokens_per_s")),
                row("TTFT p50 (ms, server side, lower is better)", "ms", o.get("ttft_p50_ms"), p.get("ttft_p50_ms")),
                row("TTFT p99 (ms, server side)", "ms", o.get("ttft_p99_ms"), p.get("ttft_p99_ms")),
                row("TPOT p50 (ms, lower is better)", "ms", o.get("tpot_p50_ms"), p.get("tpot_p50_ms")),
                row("TPOT p99 (ms)", "ms", o.get("tpot_p99_ms"), p.get("tpot_p99_ms"))]
        w1 = ctx.medians.get("w1", {}).get("ours", {})
        if w1.get("tokens_per_s") and o.get("tokens_per_s"):
            rows.append(row("W1 window / W3 output tokens/s (target >= 0.85)", "tokens/s",
                            w1["tokens_per_s"], o["tokens_per_s"], peer_name="ours W3"))
        return rows


class SqlTemplate:
    """W4 (prefix caching): UPDATE tickets with a shared ~300-token instruction
    before each ticket, max_tokens 32, llm.prefix_caching on vs off."""

    id = "w4"
    peer = "prefix caching off"

    def __init__(self, rows):
        self.rows_n = rows
        self.title = "W4 template UPDATE (%d rows)" % rows

    def unavailable(self, ctx):
        return None if ctx.pg else "no PostgreSQL server (%s)" % ctx.pg_error

    def sides(self, ctx):
        q = ("UPDATE tickets SET subject = llm_generate(%s || E'\\n' || body, "
             "max_tokens => 32) WHERE id <= %d" % ("'" + W4_INSTRUCTION.replace("'", "''") + "'", self.rows_n))

        def run(on):
            def fn(r):
                # switch the setting away and back: each switch reloads the engine,
                # so every round starts with an empty cache; the reset makes
                # llm_stat's TTFT this run's
                ctx.pg.fresh_engine(prefix_caching=on, warm_up=False)
                dt, _ = ctx.pg.timed("BEGIN; %s; ROLLBACK;" % q)
                d = ctx.pg.stat()
                return {"wall_s": dt, "tokens_per_s": d["completion_tokens"] / dt,
                        "rows_per_s": self.rows_n / dt, "ttft_mean_ms": d["ttft_mean_ms"],
                        "hit_rate": (d["prefix_hit_tokens"] / d["prefix_query_tokens"]
                                     if d["prefix_query_tokens"] else None)}
            return fn

        return [("ours", run(True)), ("peer", run(False))]

    def rows(self, ctx, o, p):
        return [row("rows/s", "rows/s", o.get("rows_per_s"), p.get("rows_per_s")),
                row("output tokens/s", "tokens/s", o.get("tokens_per_s"), p.get("tokens_per_s")),
                row("mean TTFT (ms, lower is better)", "ms", o.get("ttft_mean_ms"), p.get("ttft_mean_ms")),
                row("prefix-cache hit rate (prompt tokens)", "fraction", o.get("hit_rate"), None)]


class SqlTrigger:
    """W1t: enriching inserted rows synchronously.  An INSERT ... SELECT of the
    tickets into a table whose statement-level AFTER trigger (transition
    table) fills a summary with one UPDATE ... FROM new_rows, against one
    CREATE TABLE AS SELECT over the same rows (W1's statement) and against a
    row-level BEFORE trigger calling llm_generate per row.  Target: the
    statement trigger within 1.5x the one statement."""

    id = "w1t"
    peer = "one statement"

    TRIGGERS = """
DROP TABLE IF EXISTS w1t_stmt, w1t_row;
CREATE TABLE w1t_stmt (id int PRIMARY KEY, body text, summary text);
CREATE TABLE w1t_row (id int PRIMARY KEY, body text, summary text);
CREATE OR REPLACE FUNCTION w1t_enrich() RETURNS trigger LANGUAGE plpgsql AS $t$
BEGIN
  UPDATE w1t_stmt t SET summary = llm_generate(@PROMPT@, max_tokens => @N@)
  FROM new_rows n WHERE t.id = n.id;
  RETURN NULL;
END $t$;
CREATE TRIGGER w1t_enrich AFTER INSERT ON w1t_stmt REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION w1t_enrich();
CREATE OR REPLACE FUNCTION w1t_enrich_row() RETURNS trigger LANGUAGE plpgsql AS $t$
BEGIN
  NEW.summary := llm_generate(@ROWPROMPT@, max_tokens => @N@);
  RETURN NEW;
END $t$;
CREATE TRIGGER w1t_enrich_row BEFORE INSERT ON w1t_row FOR EACH ROW EXECUTE FUNCTION w1t_enrich_row();
"""

    def __init__(self, rows, max_tokens=48):
        self.rows_n = rows
        self.max_tokens = max_tokens
        self.title = "W1t statement trigger (%d rows INSERT ... SELECT)" % rows

    def unavailable(self, ctx):
        return None if ctx.pg else "no PostgreSQL server (%s)" % ctx.pg_error

    def sides(self, ctx):
        instr = sql_literal(W1_INSTRUCTION)
        src = "(SELECT id, body FROM tickets ORDER BY id LIMIT %d) s" % self.rows_n
        ctx.pg.sql(self.TRIGGERS.replace("@PROMPT@", "%s || E'\n' || n.body" % instr)
                   .replace("@ROWPROMPT@", "%s || E'\n' || NEW.body" % instr)
                   .replace("@N@", str(self.max_tokens)))

        def run(q, table):
            def fn(r):
                ctx.pg.sql("TRUNCATE w1t_stmt, w1t_row; DROP TABLE IF EXISTS w1t_sel")
                ctx.pg.fresh_engine()
                dt, _ = ctx.pg.timed(q)
                m = request_metrics(wait_recent(ctx.pg, self.rows_n), dt)
                m["max_batch_size"] = ctx.pg.stat()["max_batch_size"]
                m["rows_filled"] = int(ctx.pg.sql("SELECT count(summary) FROM %s" % table).strip())
                return m
            return fn

        return [("statement trigger", run("INSERT INTO w1t_stmt (id, body) SELECT id, body FROM %s" % src,
                                          "w1t_stmt")),
                ("one statement", run("CREATE TABLE w1t_sel AS SELECT id, llm_generate(%s || E'\n' || body, "
                                      "max_tokens => %d) AS summary FROM %s" % (instr, self.max_tokens, src),
                                      "w1t_sel")),
                ("row trigger", run("INSERT INTO w1t_row (id, body) SELECT id, body FROM %s" % src, "w1t_row"))]

    def table_rows(self, ctx, meds):
        o, sel, rt = meds.get("statement trigger", {}), meds.get("one statement", {}), meds.get("row trigger", {})
        return [row("wall s (statement trigger / one statement, target <= 1.5)", "s", o.get("wall_s"),
                    sel.get("wall_s"), peer_name="one statement"),
                row("wall s (statement trigger / row trigger)", "s", o.get("wall_s"), rt.get("wall_s"),
                    peer_name="row trigger"),
                row("largest engine batch (statement trigger / one statement)", "requests",
                    o.get("max_batch_size"), sel.get("max_batch_size"), peer_name="one statement", ratio=False),
                row("rows filled (statement trigger / one statement)", "rows", o.get("rows_filled"),
                    sel.get("rows_filled"), peer_name="one statement", ratio=False)]


def sql_workloads(rows=None, w1_max_tokens=48, w1_windows=()):
    """W1, W3, W4 at BENCHMARKS.md's sizes (512, 32 x 16, 256) or all at `rows`;
    W1t at 32 rows or `rows`."""
    return [SqlStatement(rows or 512, w1_max_tokens, w1_windows), SqlSessions(rows or 512),
            SqlTemplate(rows or 256), SqlTrigger(rows or 32, w1_max_tokens)]
