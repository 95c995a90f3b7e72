"""W10 (shards): W1's statement over the tickets split evenly between two
shard instances with one compute thread each, issued as ONE statement on a
coordinator through scripts/llm_shard_helpers.sql (dblink fan-out: every
shard runs its half at once, batching its rows in its own worker), against
one instance with one thread (the target: two shards >= 1.8x) and one
instance with two threads (the same cores in one server: what sharding costs
or gains over it).

Servers (pg.Server, each a throwaway cluster with its own llm worker):
  single   all tickets; llm.threads switched between 1 and 2 by side (a
           reload); also the coordinator (dblink, postgres_fdw, the helpers)
  shard1   tickets 1 .. N/2 of the first N by id, llm.threads = 1
  shard2   tickets N/2+1 .. N, llm.threads = 1
Every side returns (id, md5 of the text) for all N rows, compared with the
first side measured: the same greedy text wherever it is computed.
"""
import os

from . import pg
from .common import BenchError, log
from .workloads import W1_INSTRUCTION, row, sql_literal

SINGLE_PORT = 54340
SHARD_PORTS = (54341, 54342)
SHARD_NAMES = ("shard1", "shard2")


def split_ids(ids, shards):
    """The first len(ids) ids in order, cut into `shards` contiguous runs of
    equal size (the remainder, if any, is left out so every shard does the
    same number of rows)."""
    ids = sorted(ids)
    per = len(ids) // shards
    return [ids[i * per:(i + 1) * per] for i in range(shards)]


def window_overlap(windows):
    """Concurrency of shards from their request windows [(start, end), ...]:
    (length of the time all windows overlap, shortest window).  Sequential
    shards overlap 0; shards running together overlap about the shortest."""
    if not windows:
        return 0.0, 0.0
    start = max(a for a, _ in windows)
    end = min(b for _, b in windows)
    return max(0.0, end - start), min(b - a for a, b in windows)


class SqlShards:
    id = "w10"
    peer = "one instance"

    def __init__(self, rows):
        self.rows_n = rows - rows % len(SHARD_NAMES)
        self.title = "W10 shards (%d rows, 2 shards x 1 thread)" % self.rows_n
        self.single = None
        self.shards = []
        self.reference = None
        self.error = None

    def unavailable(self, ctx):
        if self.rows_n < len(SHARD_NAMES):
            return "needs at least %d rows" % len(SHARD_NAMES)
        if self.single is None and self.error is None:
            try:
                self.start(ctx)
            except BenchError as e:
                self.error = str(e)
                self.close()
        return self.error

    def start(self, ctx):
        """Three servers; the shards keep their halves of the first N
        tickets; the single server becomes the coordinator."""
        log("W10: starting one instance and two shards (bench/harness/pg.py)")
        settings = {"llm.max_running_requests": "64"}
        self.single = pg.Server(ctx.root, 1, port=SINGLE_PORT, settings=settings).__enter__()
        ids = [int(r[0]) for r in self.single.rows("SELECT id FROM tickets ORDER BY id LIMIT %d" % self.rows_n)]
        if len(ids) < self.rows_n:
            raise BenchError("only %d tickets loaded, %d needed" % (len(ids), self.rows_n))
        for name, port, part in zip(SHARD_NAMES, SHARD_PORTS, split_ids(ids, len(SHARD_NAMES))):
            s = pg.Server(ctx.root, 1, port=port, settings=settings).__enter__()
            self.shards.append(s)
            s.sql("DELETE FROM tickets WHERE id < %d OR id > %d" % (part[0], part[-1]))
            s.sql("VACUUM ANALYZE tickets")
            got = s.sql("SELECT count(*) FROM tickets").strip()
            if got != str(len(part)):
                raise BenchError("%s holds %s tickets, not %d" % (name, got, len(part)))
        c = self.single
        c.sql("CREATE EXTENSION dblink; CREATE EXTENSION postgres_fdw; CREATE TYPE w10_row AS (id int, s text)")
        for name, s in zip(SHARD_NAMES, self.shards):
            c.sql("CREATE SERVER %s FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host %s, port '%d', dbname 'postgres');"
                  "CREATE USER MAPPING FOR CURRENT_USER SERVER %s OPTIONS (user 'postgres')"
                  % (name, sql_literal(s.dir), s.port, name))
        helpers = os.path.join(ctx.root, "sql", "contrib", "llm_shard_helpers.sql")
        with open(helpers) as f:
            c.sql(f.read())

    def close(self):
        for s in self.shards + ([self.single] if self.single else []):
            s.__exit__(None, None, None)
        self.shards, self.single = [], None

    def set_threads(self, n):
        """llm.threads of the single instance; the worker reloads its engine."""
        self.single.sql("ALTER SYSTEM SET llm.threads = %d" % n)
        self.single.sql("SELECT pg_reload_conf()")
        self.single.wait_ready("threads", str(n))

    def shard_statement(self):
        servers = "ARRAY[%s]::name[]" % ", ".join(sql_literal(n) for n in SHARD_NAMES)
        inner = ("SELECT id, llm_generate(%s || E'\\n' || body, max_tokens => 48) FROM tickets"
                 % sql_literal(W1_INSTRUCTION))
        return ("CREATE TEMP TABLE w10 AS SELECT * FROM llm_shard_query(%s, %s, NULL::w10_row)"
                % (servers, sql_literal(inner)))

    def single_statement(self):
        # W1's statement (bench/harness/workloads.py SqlStatement)
        return ("CREATE TEMP TABLE w10 AS SELECT id, llm_generate(%s || E'\\n' || body, max_tokens => 48) AS s "
                "FROM (SELECT * FROM tickets ORDER BY id LIMIT %d) t" % (sql_literal(W1_INSTRUCTION), self.rows_n))

    def check_rows(self, side, out):
        rows = [line.split("|") for line in out.splitlines() if line]
        got = {int(i): h for i, h in rows}
        if len(got) != self.rows_n:
            raise BenchError("%s returned %d rows, not %d" % (side, len(got), self.rows_n))
        if self.reference is None:
            self.reference = got
        return sum(1 for i, h in got.items() if self.reference.get(i) == h)

    def sides(self, ctx):
        digest = "; SELECT id, md5(coalesce(s, '')) FROM w10 ORDER BY id"

        def run_single(threads):
            name = "one instance, %d thread%s" % (threads, "s" if threads > 1 else "")

            def fn(r):
                self.set_threads(threads)
                self.single.fresh_engine()
                dt, out = self.single.timed(self.single_statement() + digest)
                st = self.single.stat()
                return {"wall_s": dt, "rows_per_s": self.rows_n / dt,
                        "tokens_per_s": st["completion_tokens"] / dt,
                        "same_rows": self.check_rows(name, out), "max_batch_size": st["max_batch_size"]}
            return name, fn

        def run_shards(r):
            for s in self.shards:
                s.fresh_engine()
            dt, out = self.single.timed(self.shard_statement() + digest)
            windows, tokens, per_shard = [], 0, []
            for s in self.shards:
                t0, t1, n = s.rows("SELECT extract(epoch FROM min(finished_at - total_ms * interval '1 ms')), "
                                   "extract(epoch FROM max(finished_at)), count(*) FROM llm_recent_requests() "
                                   "WHERE outcome IN ('stop', 'length')")[0]
                windows.append((float(t0), float(t1)))
                per_shard.append(int(n))
                tokens += s.stat()["completion_tokens"]
            if per_shard != [self.rows_n // len(self.shards)] * len(self.shards):
                raise BenchError("shards generated %s rows, not %d each" % (per_shard, self.rows_n // len(self.shards)))
            overlap, shortest = window_overlap(windows)
            return {"wall_s": dt, "rows_per_s": self.rows_n / dt, "tokens_per_s": tokens / dt,
                    "same_rows": self.check_rows("two shards", out),
                    "overlap_fraction": overlap / shortest if shortest > 0 else None,
                    "shard_window_sum_s": sum(b - a for a, b in windows)}

        return [("two shards, 1 thread each", run_shards), run_single(1), run_single(2)]

    def table_rows(self, ctx, meds):
        sh = meds.get("two shards, 1 thread each", {})
        one = meds.get("one instance, 1 thread", {})
        two = meds.get("one instance, 2 threads", {})
        return [
            row("rows/s (target >= 1.8x)", "rows/s", sh.get("rows_per_s"), one.get("rows_per_s"),
                peer_name="one instance, 1 thread"),
            row("rows/s", "rows/s", sh.get("rows_per_s"), two.get("rows_per_s"), peer_name="one instance, 2 threads"),
            row("output tokens/s", "tokens/s", sh.get("tokens_per_s"), one.get("tokens_per_s"),
                peer_name="one instance, 1 thread"),
            row("rows identical to the shards' (of %d): one instance 1 thread / 2 threads" % self.rows_n, "rows",
                one.get("same_rows"), two.get("same_rows"), peer_name="2 threads", ratio=False),
            row("shards' request windows overlapping (fraction of the shorter)", "fraction",
                sh.get("overlap_fraction"), None, ratio=False),
        ]

    def after_rounds(self, ctx, meds):
        self.close()
        return None
