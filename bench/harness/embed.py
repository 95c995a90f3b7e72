"""Embeddings: the tickets embedded by one SQL statement (llm_embed,
batched by the LLM Batch node) against llama.cpp's llama-server
--embedding on the same GGUF with the same threads.

The bench's GGUF (-m) is served as alias emb (llm.models) beside the
server's default model.  Sides (rows = --sql-rows, default 512; the ticket
bodies as they are):
  ours        CREATE TEMP TABLE ... AS SELECT id, llm_embed(body) FROM tickets
  batched     llama-server --embedding (-np B slots, continuous batching),
              the bodies POSTed to /embedding B (32) at a time, one request
              after another, from the bench's own process (no PostgreSQL)
  pgai-style  a plpython3u function POSTing one body per row to that
              llama-server (-np 1), called in the same SELECT
  ours, no batch caps
              ours with llm.batch_step_ms = 0 and llm.batch_prefill_tokens = 0:
              the statement's calls are batch-class work, whose steps the
              engine keeps short for interactive calls' sake; a bulk job alone
              on the server can turn that off
Pooling: an encoder (bert) GGUF's own (<arch>.pooling_type) on both sides;
a decoder model (SmolLM2) by its last token (--pooling last).
After the rounds the two sides' vectors are compared on a few tickets
(cosine; llama-server L2-normalizes its pooled vectors, llm_embed returns
the engine's vector, so only the direction is compared).
"""
import json
import math
import time

from . import llamacpp
from .common import BenchError, log
from .workloads import row

BATCH = 32
SLOT_CTX = 512

PGAI_EMBED = """
CREATE OR REPLACE FUNCTION pgai_embed(input text, url text) RETURNS real[]
LANGUAGE plpython3u AS $pgai$
# what users of in-database AI extensions run today: one HTTP call per row
import json
import urllib.request
body = json.dumps({"content": input}).encode()
req = urllib.request.Request(url + "/embedding", data=body, headers={"Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=600) as r:
    reply = json.loads(r.read())
return reply[0]["embedding"][0]
$pgai$;
"""


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else float("nan")


def _vector(reply_item):
    e = reply_item["embedding"]
    return e[0] if e and isinstance(e[0], list) else e


class SqlEmbed:
    id = "embed"
    peer = "llama-server --embedding"

    def __init__(self, rows, sides=None):
        self.rows_n = rows
        self.only_sides = set(sides or [])
        self.title = "Embeddings: %d tickets, 1 statement" % rows

    def unavailable(self, ctx):
        if not ctx.pg:
            return "no PostgreSQL server (%s)" % ctx.pg_error
        return None

    def _server(self, ctx, slots, log_name):
        extra = ["--embedding", "-b", str(slots * SLOT_CTX), "-ub", str(SLOT_CTX)]
        if (ctx.model_info or {}).get("arch") != "bert":
            extra += ["--pooling", "last"]
        return llamacpp.Server(ctx.llama_bin, ctx.model, slots, SLOT_CTX, ctx.threads,
                               ctx.results_path(log_name), extra=extra)

    def _bodies(self, ctx):
        if not hasattr(self, "bodies"):
            out = ctx.pg.sql("SELECT json_agg(body ORDER BY id) FROM (SELECT id, body FROM tickets "
                             "ORDER BY id LIMIT %d) t" % self.rows_n)
            self.bodies = json.loads(out)
        return self.bodies

    def _serve(self, ctx):
        """The bench's GGUF served as alias emb (llm.models), beside the server's default model."""
        if getattr(self, "served", False):
            return
        ctx.pg.sql("ALTER SYSTEM SET llm.models = 'emb=%s'" % ctx.model.replace("'", "''"))
        ctx.pg.sql("SELECT pg_reload_conf()")
        for _ in range(600):
            if ctx.pg.sql("SELECT count(*) FROM llm_models WHERE alias = 'emb' AND state = 'ready'").strip() == "1":
                break
            time.sleep(0.2)
        else:
            raise BenchError("model %s not ready as alias emb" % ctx.model)
        self.served = True

    def sides(self, ctx):
        q_ours = ("CREATE TEMP TABLE e_ours AS SELECT id, llm_embed(body, model => 'emb') AS e FROM "
                  "(SELECT id, body FROM tickets ORDER BY id LIMIT %d) t" % self.rows_n)

        def run_ours(r):
            self._serve(ctx)
            ctx.pg.fresh_engine()
            ctx.pg.sql("DROP TABLE IF EXISTS e_ours")
            dt, _ = ctx.pg.timed(q_ours)
            return {"wall_s": dt, "rows_per_s": self.rows_n / dt}

        def run_uncapped(r):
            # a bulk statement alone on the server: the batch class's per-step caps off
            # (llm.batch_step_ms, llm.batch_prefill_tokens keep interactive calls' latency)
            ctx.pg.sql("ALTER SYSTEM SET llm.batch_step_ms = 0")
            ctx.pg.set_engine_setting("llm.batch_prefill_tokens", "0", "batch_prefill_tokens", "0")
            try:
                return run_ours(r)
            finally:
                ctx.pg.sql("ALTER SYSTEM RESET llm.batch_step_ms")
                ctx.pg.set_engine_setting("llm.batch_prefill_tokens", None, "batch_prefill_tokens", "128")

        def run_batched(r):
            if ctx.peer_error:
                raise BenchError(ctx.peer_error)
            bodies = self._bodies(ctx)
            with self._server(ctx, BATCH, "llama-server-embed-r%d.log" % (r + 1)) as srv:
                srv.post("/embedding", {"content": ["warm up"]})
                t0 = time.time()
                vecs = []
                for i in range(0, len(bodies), BATCH):
                    vecs += [_vector(x) for x in srv.post("/embedding", {"content": bodies[i:i + BATCH]})]
                dt = time.time() - t0
            self.peer_vectors = vecs
            return {"wall_s": dt, "rows_per_s": len(bodies) / dt}

        def run_pgai(r):
            if ctx.peer_error:
                raise BenchError(ctx.peer_error)
            if not getattr(ctx, "plpython_ok", False):
                ctx.pg.ensure_plpython()
                ctx.pg.sql("CREATE EXTENSION IF NOT EXISTS plpython3u")
                ctx.plpython_ok = True
            ctx.pg.sql(PGAI_EMBED)
            with self._server(ctx, 1, "llama-server-embed-pgai-r%d.log" % (r + 1)) as srv:
                srv.post("/embedding", {"content": "warm up"})
                ctx.pg.sql("DROP TABLE IF EXISTS e_pgai")
                dt, _ = ctx.pg.timed("CREATE TEMP TABLE e_pgai AS SELECT id, pgai_embed(body, '%s') AS e FROM "
                                     "(SELECT id, body FROM tickets ORDER BY id LIMIT %d) t"
                                     % (srv.url, self.rows_n))
            return {"wall_s": dt, "rows_per_s": self.rows_n / dt}

        sides = [("ours", "ours", run_ours), ("batched", "llama-server batched %d" % BATCH, run_batched),
                 ("pgai", "pgai-style", run_pgai), ("uncapped", "ours, no batch caps", run_uncapped)]
        return [(name, fn) for key, name, fn in sides if not self.only_sides or key in self.only_sides]

    def after_rounds(self, ctx, meds):
        """Cosine of our vectors and llama-server's on the first 8 tickets."""
        vecs = getattr(self, "peer_vectors", None)
        if not vecs:
            return None
        out = ctx.pg.sql("SELECT json_agg(llm_embed(body, model => 'emb') ORDER BY id) FROM "
                         "(SELECT id, body FROM tickets ORDER BY id LIMIT 8) t")
        ours = json.loads(out)
        cos = [cosine(a, b) for a, b in zip(ours, vecs[:8])]
        ctx.embed_cosine = {"min": min(cos), "rows": len(cos)}
        log("embed: cosine ours vs llama-server on %d tickets: min %.6f" % (len(cos), min(cos)))
        return ctx.embed_cosine

    def table_rows(self, ctx, meds):
        rows = []
        for ours in ("ours", "ours, no batch caps"):
            o = (meds.get(ours) or {}).get("rows_per_s")
            for n in ("llama-server batched %d" % BATCH, "pgai-style"):
                p = (meds.get(n) or {}).get("rows_per_s")
                rows.append(row("rows/s (%s)" % ours, "rows/s", o, p, peer_name=n))
        return rows
