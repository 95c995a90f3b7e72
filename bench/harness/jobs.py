"""Jobs: W4-style enrichment of the tickets as a durable job (llm_enrich,
docs/JOBS.md) against the one-statement UPDATE with the same prompts
(W4's shared instruction before each ticket, max_tokens 32, greedy).

Sides (each round starts from an empty prefix cache, as W4's):
  ours   llm_enrich('tickets', 'summary', <W4 prompt>, where id <= N); the
         time from the call to the job's state 'done' (looked at every 50 ms
         by a loop in one session)
  peer   BEGIN; UPDATE tickets SET summary = llm_generate(<W4 prompt>)
         WHERE id <= N; (digest; never committed)
The job's rows are compared with the statement's (md5 of every value): the
same greedy text either way.

After the rounds, once each:
  resume       a job killed mid-way (pg_terminate_backend of its runner,
               once a quarter of the rows are written; the runner's window
               is llm.batch_window = min(64, rows / 8)): seconds from the
               kill to the first row written by the new runner, and the rows
               lost / written twice (a trigger records every write)
  continuous   a continuous job on a table of its own: one row inserted at a
               time, seconds from its commit to the filled column (median,
               p90 over `latency_rows` inserts) and the worker's own time for
               the request (llm_recent_requests().total_ms), so the
               difference is what the job machinery adds
"""
import time

from .common import BenchError, log
from .workloads import W4_INSTRUCTION, row, sql_literal

W4_PROMPT = sql_literal(W4_INSTRUCTION) + " || E'\\n' || body"


def percentile(xs, q):
    xs = sorted(xs)
    if not xs:
        return None
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


class SqlJobs:
    id = "jobs"
    peer = "one UPDATE statement"

    def __init__(self, rows, latency_rows=10):
        self.rows_n = rows
        self.latency_rows = latency_rows
        self.title = "Jobs: W4 enrichment as a job (%d rows)" % rows
        self.reference = None

    def unavailable(self, ctx):
        return None if ctx.pg else "no PostgreSQL server (%s)" % ctx.pg_error

    def _prepare(self, pg):
        pg.sql("ALTER TABLE tickets ADD COLUMN IF NOT EXISTS summary text")
        pg.sql("UPDATE tickets SET summary = NULL WHERE summary IS NOT NULL")

    def _digest(self, pg):
        return pg.sql("SELECT md5(string_agg(coalesce(summary, '<null>'), '|' ORDER BY id)) FROM tickets "
                      "WHERE id <= %d" % self.rows_n).strip()

    def _wait_job(self, pg, job, state="done", timeout=7200):
        # one session looks every 50 ms, server-side: a psql started per look (a process, a
        # connection, a backend: tens of ms of CPU each) would take a share of the 2 cores from
        # the llm worker's compute threads that the statement side, whose client just waits,
        # does not pay
        s = pg.sql("DO $$ DECLARE s text; t0 timestamptz := clock_timestamp(); BEGIN LOOP "
                   "SELECT state INTO s FROM llm_jobs WHERE id = %s; "
                   "EXIT WHEN s IS NULL OR s IN ('%s', 'failed', 'cancelled') "
                   "OR clock_timestamp() - t0 > interval '%d seconds'; "
                   "PERFORM pg_sleep(0.05); END LOOP; END $$; "
                   "SELECT state FROM llm_jobs WHERE id = %s" % (job, state, timeout, job),
                   timeout=timeout + 60).strip()
        t = time.time()
        if s == state:
            return t
        if s in ("failed", "cancelled"):
            raise BenchError("job %s ended %s: %s" % (
                job, s, pg.sql("SELECT last_error FROM llm_jobs WHERE id = %s" % job).strip()))
        raise BenchError("job %s not %s after %d s (%s)" % (job, state, timeout, s or "no such job"))

    def sides(self, ctx):
        pg = ctx.pg
        self._prepare(pg)
        enrich = ("SELECT llm_enrich('tickets', 'summary', %s, max_tokens => 32, where_clause => 'id <= %d')"
                  % (sql_literal(W4_PROMPT), self.rows_n))
        update = ("UPDATE tickets SET summary = llm_generate(%s, max_tokens => 32) WHERE id <= %d"
                  % (W4_PROMPT, self.rows_n))

        def check(digest, side):
            if self.reference is None:
                self.reference = (digest, side)
            elif digest != self.reference[0]:
                raise BenchError("%s wrote other text than %s" % (side, self.reference[1]))

        def run_job(r):
            pg.fresh_engine(prefix_caching=True, warm_up=True)
            t0 = time.time()
            job = pg.sql(enrich).strip()
            t1 = self._wait_job(pg, job)
            dt = t1 - t0
            d = pg.stat()
            check(self._digest(pg), "the job")
            pg.sql("UPDATE tickets SET summary = NULL")
            return {"wall_s": dt, "rows_per_s": self.rows_n / dt, "tokens_per_s": d["completion_tokens"] / dt,
                    "max_batch": d["max_batch_size"]}

        def run_statement(r):
            pg.fresh_engine(prefix_caching=True, warm_up=True)
            t0 = time.time()
            # one session, never committed: psql prints the last result (the digest) and exits
            digest = pg.sql("BEGIN; %s; SELECT md5(string_agg(coalesce(summary, '<null>'), '|' ORDER BY id)) "
                            "FROM tickets WHERE id <= %d" % (update, self.rows_n)).strip()
            dt = time.time() - t0
            d = pg.stat()
            check(digest, "the statement")
            return {"wall_s": dt, "rows_per_s": self.rows_n / dt, "tokens_per_s": d["completion_tokens"] / dt,
                    "max_batch": d["max_batch_size"]}

        return [("ours", run_job), ("peer", run_statement)]

    def after_rounds(self, ctx, meds):
        pg = ctx.pg
        out = {}
        try:
            out["resume"] = self._resume(pg)
        except BenchError as e:
            out["resume"] = {"error": str(e)}
        try:
            out["continuous"] = self._continuous(pg)
        except BenchError as e:
            out["continuous"] = {"error": str(e)}
        self.extra = out
        log("jobs after rounds: %s" % out)
        return out

    def _resume(self, pg):
        pg.sql("UPDATE tickets SET summary = NULL; "
               "CREATE TABLE IF NOT EXISTS job_writes (id int, at timestamptz DEFAULT clock_timestamp()); "
               "TRUNCATE job_writes; "
               "CREATE OR REPLACE FUNCTION job_write() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
               "IF NEW.summary IS DISTINCT FROM OLD.summary AND NEW.summary IS NOT NULL THEN "
               "INSERT INTO job_writes (id) VALUES (NEW.id); "
               "END IF; RETURN NEW; END $$; "
               "DROP TRIGGER IF EXISTS job_write ON tickets; "
               "CREATE TRIGGER job_write AFTER UPDATE ON tickets FOR EACH ROW EXECUTE FUNCTION job_write()")
        # the runner's window (read from the server's settings): the default 64 at
        # BENCHMARKS.md's size; smaller for a small smoke run, so the kill lands mid-job
        window = min(64, max(4, self.rows_n // 8))
        pg.sql("ALTER SYSTEM SET llm.batch_window = %d" % window)
        pg.sql("SELECT pg_reload_conf()")
        time.sleep(0.5)
        try:
            return self._kill_runner(pg, window)
        finally:
            pg.sql("ALTER SYSTEM RESET llm.batch_window")
            pg.sql("SELECT pg_reload_conf()")

    def _kill_runner(self, pg, window):
        job = pg.sql("SELECT llm_enrich('tickets', 'summary', %s, max_tokens => 32, where_clause => 'id <= %d')"
                     % (sql_literal(W4_PROMPT), self.rows_n)).strip()
        t0 = time.time()
        while int(pg.sql("SELECT count(*) FROM job_writes").strip()) < max(1, self.rows_n // 4):
            if time.time() - t0 > 3600:
                raise BenchError("the job wrote too little")
            time.sleep(0.05)
        killed = pg.sql("SELECT extract(epoch FROM clock_timestamp()) FROM "
                        "(SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE backend_type = 'llm job runner') k").strip().splitlines()
        if not killed:
            raise BenchError("the job ended before its runner could be killed (too few rows)")
        kill_at = float(killed[0])
        self._wait_job(pg, job)
        first = pg.sql("SELECT extract(epoch FROM min(at)) FROM job_writes WHERE extract(epoch FROM at) > %f"
                       % kill_at).strip()
        lost = pg.sql("SELECT count(*) FROM tickets WHERE id <= %d AND summary IS NULL" % self.rows_n).strip()
        doubled = pg.sql("SELECT count(*) FROM (SELECT id FROM job_writes GROUP BY id HAVING count(*) > 1) d").strip()
        pg.sql("DROP TRIGGER job_write ON tickets; UPDATE tickets SET summary = NULL")
        return {"runner_window": window, "kill_to_first_write_s": float(first) - kill_at if first else None,
                "rows_lost": int(lost), "rows_written_twice": int(doubled)}

    def _continuous(self, pg):
        pg.sql("DROP TABLE IF EXISTS inbox; CREATE TABLE inbox (id int PRIMARY KEY, body text, summary text)")
        job = pg.sql("SELECT llm_enrich('inbox', 'summary', %s, max_tokens => 32, mode => 'continuous')"
                     % sql_literal(W4_PROMPT)).strip()
        bodies = [r[0] for r in pg.rows("SELECT body FROM tickets ORDER BY id LIMIT %d" % self.latency_rows)]
        lat, worker = [], []
        for i, body in enumerate(bodies, 1):
            pg.sql("SELECT llm_stat_reset()")
            committed = float(pg.sql("INSERT INTO inbox VALUES (%d, %s) RETURNING extract(epoch FROM "
                                     "clock_timestamp())" % (i, sql_literal(body))).strip())
            t0 = time.time()
            while pg.sql("SELECT summary IS NOT NULL FROM inbox WHERE id = %d" % i).strip() != "t":
                if time.time() - t0 > 600:
                    raise BenchError("row %d not filled after 600 s" % i)
                time.sleep(0.01)
            lat.append(time.time() - committed)
            w = pg.sql("SELECT max(total_ms) FROM llm_recent_requests()").strip()
            worker.append(float(w) / 1000.0 if w else None)
        pg.sql("SELECT llm_job_cancel(%s)" % job)
        gen = [w for w in worker if w is not None]
        return {"commit_to_filled_p50_s": percentile(lat, 0.5), "commit_to_filled_p90_s": percentile(lat, 0.9),
                "worker_request_p50_s": percentile(gen, 0.5),
                "overhead_p50_s": (percentile([a - b for a, b in zip(lat, worker) if b is not None], 0.5)
                                   if gen else None)}

    def table_rows(self, ctx, meds):
        o, p = meds.get("ours", {}), meds.get("peer", {})
        rows = [row("rows/s (job / statement, target >= 0.95)", "rows/s", o.get("rows_per_s"), p.get("rows_per_s")),
                row("output tokens/s", "tokens/s", o.get("tokens_per_s"), p.get("tokens_per_s")),
                row("largest engine batch", "requests", o.get("max_batch"), p.get("max_batch"))]
        extra = getattr(self, "extra", {}) or {}
        r = extra.get("resume") or {}
        if r.get("kill_to_first_write_s") is not None:
            rows.append(row("killed runner -> first new write (s, lower is better)", "s",
                            r["kill_to_first_write_s"], None, ratio=False))
            rows.append(row("rows lost / written twice after the kill", "rows",
                            r["rows_lost"] + r["rows_written_twice"], None, ratio=False))
        c = extra.get("continuous") or {}
        if c.get("commit_to_filled_p50_s") is not None:
            rows.append(row("continuous: commit -> filled p50 (s)", "s", c["commit_to_filled_p50_s"], None,
                            ratio=False))
            rows.append(row("continuous: worker's own time p50 (s)", "s", c["worker_request_p50_s"], None,
                            ratio=False))
        return rows
