"""Structured output: what constrained decoding and scoring cost (bench/run
workloads) and how accurate the AI functions are on the 512 tickets
(bench/structured_accuracy).  docs/PERFORMANCE.md "Constrained decoding and
the AI functions", docs/STRUCTURED_OUTPUT.md "Accuracy on the tickets".

Workloads:
  grammarB  B streams decoding N tokens each, greedy: with a grammar that no
            output of N tokens completes (so every stream decodes N tokens,
            like the ignore_eos side without one) vs without a grammar
            (build/bench/structured_bench --side grammar / plain); rows:
            decode tokens/s, the mask time per sampled row (p50, p99), and
            once after the rounds the realistic case, the 5-field ticket
            schema (--side json)
  classify  one statement classifying the tickets by product: llm_classify
            (SCORE requests, no decoding) vs the free-text way, llm_generate
            with the same prompt (max_tokens 8) and the label matched in SQL
"""
import json
import os

from .common import BenchError, run_cmd
from .workloads import row

PRODUCTS = ["Cloud Suite", "Billing", "Router RX", "Sync", "Mobile App"]
PRIORITIES = ["low", "normal", "high", "urgent"]

# The 5-field ticket schema of docs/STRUCTURED_OUTPUT.md.
TICKET_SCHEMA = {
    "type": "object",
    "properties": {
        "product": {"enum": PRODUCTS},
        "priority": {"enum": PRIORITIES},
        "customer": {"type": ["string", "null"], "maxLength": 40},
        "summary": {"type": "string", "maxLength": 120},
        "refund_requested": {"type": "boolean"},
    },
    "required": ["product", "priority", "customer", "summary", "refund_requested"],
}
# TICKET_SCHEMA's longest compact output in bytes (keys in schema order, the longest enum values, each
# string character at its longest canonical form: a control character's 6-byte \uXXXX escape): a token
# covers at least one byte, so max_tokens >= this always completes it
TICKET_SCHEMA_MAX_BYTES = 1057


def sql_literal(text):
    return "'" + text.replace("'", "''") + "'"


def sql_array(labels):
    return "ARRAY[%s]" % ", ".join(sql_literal(x) for x in labels)


def classify_prompt_sql(labels, input_sql="body"):
    """The user message llm_classify builds (pg/sql/ai_prompts.c, llm_prompt_classify),
    as a SQL expression: the free-text baseline sends the same prompt."""
    head = ("Classify the text into exactly one of these categories: %s.\nAnswer with the category only."
            "\n\nText:\n" % ", ".join(labels))
    return "%s || %s" % (sql_literal(head), input_sql)


def match_label_sql(out_sql, labels):
    """The label a free-text answer names: the one whose first case-insensitive
    occurrence comes first (the longer one on a tie), NULL if none occurs."""
    cases = " UNION ALL ".join("SELECT %s AS l, strpos(lower(%s), lower(%s)) AS p"
                               % (sql_literal(x), out_sql, sql_literal(x)) for x in labels)
    return "(SELECT l FROM (%s) m WHERE p > 0 ORDER BY p, length(l) DESC LIMIT 1)" % cases


def structured_bench(root):
    exe = os.path.join(root, "build", "bench", "structured_bench")
    run_cmd(["make", "-s", "build/bench/structured_bench"], timeout=900, cwd=root)
    return exe


class GrammarDecode:
    """B streams with and without a grammar (engine level)."""

    peer = "no grammar"

    def __init__(self, batch):
        self.batch = batch
        self.id = "grammar%d" % batch
        self.title = "%d streams, grammar" % batch

    def unavailable(self, ctx):
        return None

    def run(self, ctx, side):
        exe = structured_bench(ctx.root)
        out = run_cmd([exe, "-m", ctx.model, "-b", str(self.batch), "-n", str(ctx.n_gen), "-t", str(ctx.threads),
                       "-r", "1", "--side", side, "--json"], timeout=1800)
        d = json.loads(out)
        m = {"decode_tps": d["%s_decode_tps" % side]}
        if side != "plain":
            for k in ("mask_us_p50", "mask_us_p99", "mask_us_mean", "masked_rows"):
                m[k] = d["%s_%s" % (side, k)]
        return m

    def sides(self, ctx):
        return [("ours", lambda r: self.run(ctx, "grammar")), ("peer", lambda r: self.run(ctx, "plain"))]

    def after_rounds(self, ctx, meds):
        try:
            js = self.run(ctx, "json")
        except BenchError as e:
            return {"error": str(e)}
        ctx.medians[self.id + "_json"] = js
        return js

    def rows(self, ctx, o, p):
        rows = [row("decode tokens/s (grammar / none)", "tokens/s", o.get("decode_tps"), p.get("decode_tps")),
                row("mask us per row p50 (cold states)", "us", o.get("mask_us_p50"), None, ratio=False),
                row("mask us per row p99 (cold states)", "us", o.get("mask_us_p99"), None, ratio=False)]
        js = getattr(ctx, "medians", {}).get(self.id + "_json")
        if js:
            rows += [row("json schema: mask us p50", "us", js.get("mask_us_p50"), None, ratio=False),
                     row("json schema: mask us p99", "us", js.get("mask_us_p99"), None, ratio=False)]
        return rows


class SqlClassify:
    """llm_classify vs generate-then-match, one statement over the tickets."""

    id = "classify"
    peer = "llm_generate + match"

    def __init__(self, rows):
        self.rows_n = rows
        self.title = "classify %d tickets by product" % rows

    def unavailable(self, ctx):
        return None if ctx.pg else "no PostgreSQL server (%s)" % ctx.pg_error

    def sides(self, ctx):
        src = "(SELECT * FROM tickets ORDER BY id LIMIT %d) t" % self.rows_n
        q_ours = ("CREATE TABLE c1 AS SELECT id, product, llm_classify(body, %s) AS label FROM %s"
                  % (sql_array(PRODUCTS), src))
        q_peer = ("CREATE TABLE c2 AS SELECT id, product, %s AS label FROM "
                  "(SELECT id, product, llm_generate(%s, max_tokens => 8) AS out FROM %s) g"
                  % (match_label_sql("out", PRODUCTS), classify_prompt_sql(PRODUCTS), src))

        def run(q, table):
            def fn(r):
                ctx.pg.fresh_engine()
                dt, _ = ctx.pg.timed("DROP TABLE IF EXISTS %s; %s" % (table, q))
                correct = int(ctx.pg.sql("SELECT count(*) FROM %s WHERE label = product" % table).strip())
                st = ctx.pg.stat()
                return {"wall_s": dt, "rows_per_s": self.rows_n / dt, "accuracy": correct / self.rows_n,
                        "completion_tokens": st["completion_tokens"], "prompt_tokens": st["prompt_tokens"]}
            return fn

        return [("ours", run(q_ours, "c1")), ("peer", run(q_peer, "c2"))]

    def rows(self, ctx, o, p):
        return [row("rows/s", "rows/s", o.get("rows_per_s"), p.get("rows_per_s")),
                row("accuracy (product)", "fraction", o.get("accuracy"), p.get("accuracy"), ratio=False),
                row("completion tokens", "tokens", o.get("completion_tokens"), p.get("completion_tokens"),
                    ratio=False)]


def structured_workloads(batches, rows=None):
    return [GrammarDecode(b) for b in batches] + [SqlClassify(rows or 512)]
