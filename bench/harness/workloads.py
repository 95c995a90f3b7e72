"""The comparisons bench/run knows about.

A workload has an id, a title, `sides(ctx)` -> [(name, fn(round) -> metrics)]
(the first side is ours, the second the peer), and `rows(ctx, ours, peer)` ->
table rows built from the median metrics of each side.  `unavailable(ctx)`
returns a reason to skip it (e.g. no PostgreSQL yet) or None.  The PostgreSQL
workloads of BENCHMARKS.md (W1 tickets, W3 sessions, W4 template) are added
here as further classes once the extension runs; they reuse the same rounds,
medians and table.
"""
from . import llamacpp, ours
from .common import BenchError


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


def row(metric, unit, ours_v, peer_v, roof_kind=None, ctx=None):
    """One table row; roof_kind 'mem', 'fma' or 'fma-prefill' adds roofline fractions."""
    frac = {"mem": mem_fraction, "fma": fma_fraction, "fma-prefill": prefill_fma_fraction}.get(roof_kind)
    return {
        "metric": metric,
        "unit": unit,
        "ours": ours_v,
        "peer": peer_v,
        "ratio": ours_v / peer_v if ours_v and peer_v else None,
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
            row("decode tokens/s", "tokens/s", o.get("decode_tps"), p.get("decode_tps"), "mem", ctx),
            row("prefill tokens/s", "tokens/s", o.get("prefill_tps"), p.get("prefill_tps"), "fma-prefill", ctx),
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


def engine_workloads(batches):
    return [SingleStream()] + [Batched(b) for b in batches]


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


class SqlStatement:
    """W1: one statement over the tickets: the LLM Batch node's read-ahead
    window (llm.batch_window 64) vs row at a time (batch_window = 1), the way a
    scalar function runs in any other in-SQL AI product."""

    id = "w1"
    peer = "row at a time"

    def __init__(self, rows):
        self.rows_n = rows
        self.title = "W1 tickets (%d rows, 1 statement)" % rows

    def unavailable(self, ctx):
        return None if ctx.pg else "no PostgreSQL server (%s)" % ctx.pg_error

    def sides(self, ctx):
        q = ("CREATE TEMP TABLE w1 AS SELECT id, llm_generate(%s, max_tokens => 48) AS s "
             "FROM (SELECT * FROM tickets ORDER BY id LIMIT %d) t" % (W1_PROMPT, self.rows_n))

        def run(window):
            def fn(r):
                before = ctx.pg.stat()
                dt, _ = ctx.pg.timed("SET llm.batch_window = %d; %s" % (window, q))
                after = ctx.pg.stat()
                gen = after["completion_tokens"] - before["completion_tokens"]
                return {"wall_s": dt, "rows_per_s": self.rows_n / dt, "tokens_per_s": gen / dt,
                        "completion_tokens": gen, "max_batch_size": after["max_batch_size"]}
            return fn

        return [("ours", run(64)), ("peer", run(1))]

    def rows(self, ctx, o, p):
        return [row("rows/s", "rows/s", o.get("rows_per_s"), p.get("rows_per_s")),
                row("output tokens/s", "tokens/s", o.get("tokens_per_s"), p.get("tokens_per_s"))]


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
                # so every round starts with an empty cache
                for setting in (not on, on):
                    ctx.pg.sql("ALTER SYSTEM SET llm.prefix_caching = %s" % ("on" if setting else "off"))
                    ctx.pg.sql("SELECT pg_reload_conf()")
                    ctx.pg.wait_ready("prefix_caching", "true" if setting else "false")
                # the reset makes llm_stat's TTFT this run's
                ctx.pg.sql("SELECT llm_stat_reset()")
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


def sql_workloads(rows):
    return [SqlStatement(rows), SqlTemplate(rows)]
