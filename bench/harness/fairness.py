"""Mixed load and speculative decoding.

fair  An interactive session calls llm_generate('What is 2+2?', max_tokens
      => 8) every 2 s while another session runs a bulk UPDATE of the
      tickets (W1's instruction, max_tokens 48, rolled back).  Sides: ours
      (the interactive calls in the interactive class: defaults), "no
      classes" (the same calls with priority => 'batch': fair share between
      the two sessions only) and the bulk UPDATE alone.  Latency is measured
      by the client over one persistent psql session (no connection set-up
      per call); the idle value is the median of 10 calls on an idle server
      at the start of the ours side.  Targets: the interactive p99 under
      load <= 2 x the idle median + one step (the bulk's median time per
      output token in that run, from llm_recent_requests), and the bulk's
      rows/s at most 10% below the bulk alone.

fair-engine  The same load at the engine, without PostgreSQL (llm-cli
      generate --batch --interactive-every 2000 --window 64, chat template,
      greedy): the first N tickets' W1 prompts (max_tokens 48) in the batch
      class, an 8-token interactive call arriving every 2 s, its latency
      counted from its arrival (so the wait for the step in progress is in
      it).  Sides: ours (defaults: llm.batch_step_ms 100,
      llm.interactive_step_slowdown 25) and "long steps" (--batch-step-ms 0
      --interactive-step-slowdown 100, the scheduling before them).  Besides
      the latencies, the engine's step counters: tokens and forward ms per
      step with interactive work and per batch-only step, the longest
      batch-only step (what an arriving call waits at most); tokens per step
      do not depend on the machine's load.  The bulk's outputs must be
      identical on both sides (scheduling never changes greedy text).

spec  Speculative decoding by prompt lookup, engine level (llm-cli generate
      --batch, chat template, greedy): summaries (W1's instruction) and
      extractions (copying fields from the ticket) of the first N tickets,
      at batch 1 (--max-running 1) and 4, with --spec 4 and --spec 0.
      Output tokens/s, the acceptance rate (accepted / draft tokens), and
      whether every output is identical with and without speculation.
"""
import os
import re
import subprocess
import threading
import time

from . import workloads
from .common import BenchError, log, run_cmd

INTERACTIVE_SQL = "SELECT length(llm_generate('What is 2+2?', max_tokens => 8%s));"
EXTRACT_INSTRUCTION = ("Copy from this support ticket, word for word: the product name, any order or "
                       "invoice number, and the sentence that describes the problem.")


class PsqlSession:
    """One psql process kept open: statements written to its stdin, each
    followed by an \\echo marker, so a call's latency is the time from
    writing it to reading its marker (no connection set-up per call)."""

    def __init__(self, pg):
        # psql's stdout is a pipe: line-buffer it (stdbuf) so each marker arrives when printed
        argv = pg.run + ["stdbuf", "-oL"] + pg.psql_argv()[len(pg.run):-2] + ["-v", "ON_ERROR_STOP=0"]
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        self.n = 0

    def call(self, sql, timeout=600):
        self.n += 1
        marker = "@@done%d@@" % self.n
        t0 = time.time()
        self.p.stdin.write(sql + "\n\\echo " + marker + "\n")
        self.p.stdin.flush()
        out = []
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise BenchError("psql session ended: %s" % "".join(out)[-300:])
            if line.strip() == marker:
                break
            out.append(line)
            if time.time() - t0 > timeout:
                raise BenchError("interactive call timed out")
        text = "".join(out)
        if "ERROR" in text:
            raise BenchError("interactive call failed: %s" % text.strip()[-300:])
        return time.time() - t0

    def close(self):
        try:
            self.p.stdin.close()
            self.p.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.p.kill()


def pct(xs, q):
    return workloads.percentile(xs, q)


class FairLatency:
    """Interactive latency under a bulk UPDATE, and the bulk's throughput."""

    id = "fair"
    peer = "no classes"
    needs_pg = True

    def __init__(self, rows):
        self.rows_n = rows
        self.title = "fair: 8-token call every 2 s during a %d-row UPDATE" % rows

    def unavailable(self, ctx):
        return None if ctx.pg else "no PostgreSQL server (%s)" % ctx.pg_error

    def bulk_sql(self):
        return ("BEGIN; UPDATE tickets SET subject = llm_generate(%s || E'\\n' || body, max_tokens => 48) "
                "WHERE id <= %d; ROLLBACK;" % (workloads.sql_literal(workloads.W1_INSTRUCTION), self.rows_n))

    def run_loaded(self, ctx, priority, idle):
        ctx.pg.fresh_engine()
        sess = PsqlSession(ctx.pg)
        try:
            out = {}
            if idle:
                lat = []
                for _ in range(10):
                    lat.append(sess.call(INTERACTIVE_SQL % priority))
                    time.sleep(0.3)
                out["idle_p50_ms"] = 1e3 * pct(lat, 50)
                out["idle_p99_ms"] = 1e3 * pct(lat, 99)
                ctx.pg.sql("SELECT llm_stat_reset()")
            done = {}

            def bulk():
                t0 = time.time()
                try:
                    ctx.pg.sql(self.bulk_sql())
                    done["wall"] = time.time() - t0
                except BenchError as e:
                    done["error"] = str(e)

            th = threading.Thread(target=bulk)
            th.start()
            time.sleep(1.0)
            lat = []
            while th.is_alive():
                t_next = time.time() + 2.0
                lat.append(sess.call(INTERACTIVE_SQL % priority))
                while th.is_alive() and time.time() < t_next:
                    time.sleep(0.05)
            th.join()
            if "error" in done:
                raise BenchError("bulk UPDATE failed: %s" % done["error"])
            reqs = workloads.wait_recent(ctx.pg, self.rows_n + len(lat))
            bulk_reqs = [r for r in reqs if r["prompt_tokens"] and r["prompt_tokens"] > 60]
            out.update({
                "calls": len(lat),
                "loaded_p50_ms": 1e3 * pct(lat, 50) if lat else None,
                "loaded_p99_ms": 1e3 * pct(lat, 99) if lat else None,
                "loaded_max_ms": 1e3 * max(lat) if lat else None,
                "bulk_wall_s": done["wall"],
                "bulk_rows_per_s": self.rows_n / done["wall"],
                "bulk_tpot_p50_ms": pct([r["tpot_ms"] for r in bulk_reqs], 50),
            })
            return out
        finally:
            sess.close()

    def sides(self, ctx):
        def ours(r):
            return self.run_loaded(ctx, "", True)

        def no_classes(r):
            return self.run_loaded(ctx, ", priority => 'batch'", False)

        def alone(r):
            ctx.pg.fresh_engine()
            dt, _ = ctx.pg.timed(self.bulk_sql())
            return {"bulk_wall_s": dt, "bulk_rows_per_s": self.rows_n / dt}

        return [("ours", ours), ("no classes", no_classes), ("bulk alone", alone)]

    def table_rows(self, ctx, meds):
        o, n, a = meds.get("ours", {}), meds.get("no classes", {}), meds.get("bulk alone", {})
        rows = []
        target = None
        if o.get("idle_p50_ms") is not None and o.get("bulk_tpot_p50_ms") is not None:
            target = 2 * o["idle_p50_ms"] + o["bulk_tpot_p50_ms"]
        rows.append(workloads.row("interactive idle p50 / p99 (ms)", "ms", o.get("idle_p50_ms"), o.get("idle_p99_ms"),
                                  peer_name="p99", ratio=False))
        rows.append(workloads.row("interactive p99 under load (ms) vs target 2 x idle p50 + one step", "ms",
                                  o.get("loaded_p99_ms"), target, peer_name="target"))
        rows.append(workloads.row("interactive p99 under load (ms)", "ms", o.get("loaded_p99_ms"),
                                  n.get("loaded_p99_ms")))
        rows.append(workloads.row("interactive p50 under load (ms)", "ms", o.get("loaded_p50_ms"),
                                  n.get("loaded_p50_ms")))
        for name, side in (("ours", o), ("no classes", n)):
            if side.get("bulk_rows_per_s") and a.get("bulk_rows_per_s"):
                rows.append(workloads.row("bulk rows/s with the calls (%s) vs alone (loss target <= 10%%)" % name,
                                          "rows/s", side["bulk_rows_per_s"], a["bulk_rows_per_s"],
                                          peer_name="bulk alone"))
        ctx.fair_summary = {"target_ms": target, "ours": o, "no_classes": n, "alone": a}
        return rows


_MIXED_BULK = re.compile(r"bulk: (\d+) prompts, (\d+) tokens in ([0-9.]+) s \(([0-9.]+) prompts/s\), "
                         r"TPOT p50 ([0-9.]+) ms")
_MIXED_INTER = re.compile(r"interactive: idle p50 ([0-9.]+) ms; under load (\d+) calls, p50 ([0-9.]+) ms, "
                          r"p99 ([0-9.]+) ms, max ([0-9.]+) ms; target 2 x idle p50 \+ TPOT p50 = ([0-9.]+) ms")
_MIXED_STEPS = re.compile(r"steps with interactive work: (\d+), ([0-9.]+) tokens and ([0-9.]+) ms each; "
                          r"batch-only steps: (\d+), ([0-9.]+) tokens and ([0-9.]+) ms each, longest ([0-9.]+) ms")


class FairEngine:
    """The fair load at the engine (llm-cli), with the step counters."""

    id = "fair-engine"
    peer = "long steps"

    def __init__(self, rows):
        self.rows_n = rows
        self.title = "fair-engine: 8-token call every 2 s during %d W1 prompts, engine only" % rows
        self.outputs = {}

    def unavailable(self, ctx):
        return ctx.ours_error

    def prompt_file(self, ctx):
        tickets = workloads.ticket_prompts(ctx)
        path = ctx.results_path("fair-engine-%d.txt" % self.rows_n)
        with open(path, "w") as f:
            for i in sorted(tickets)[:self.rows_n]:
                f.write(tickets[i].replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t") + "\n")
        return path

    def run(self, ctx, extra):
        argv = [ctx.cli, "generate", "-m", ctx.model, "--chat", "-t", str(ctx.threads), "-n", "48",
                "--window", "64", "--interactive-every", "2000", "--batch", self.prompt_file(ctx)] + extra
        p = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
        if p.returncode != 0:
            raise BenchError("llm-cli generate exited %d: %s" % (p.returncode, p.stderr[-300:]))
        b, i, st = _MIXED_BULK.search(p.stderr), _MIXED_INTER.search(p.stderr), _MIXED_STEPS.search(p.stderr)
        if not (b and i and st):
            raise BenchError("unexpected llm-cli output: %r" % p.stderr[-400:])
        out = {"bulk_wall_s": float(b.group(3)), "bulk_rows_per_s": float(b.group(4)),
               "bulk_tpot_p50_ms": float(b.group(5)), "idle_p50_ms": float(i.group(1)), "calls": int(i.group(2)),
               "loaded_p50_ms": float(i.group(3)), "loaded_p99_ms": float(i.group(4)),
               "loaded_max_ms": float(i.group(5)), "target_ms": float(i.group(6)),
               "interactive_steps": int(st.group(1)), "interactive_step_tokens": float(st.group(2)),
               "interactive_step_ms": float(st.group(3)), "batch_steps": int(st.group(4)),
               "batch_step_tokens": float(st.group(5)), "batch_step_ms": float(st.group(6)),
               "batch_step_max_ms": float(st.group(7))}
        return out, re.split(r"^### \d+ ", p.stdout, flags=re.M)[1:]

    def sides(self, ctx):
        def side(name, extra):
            def fn(r):
                m, outputs = self.run(ctx, extra)
                self.outputs.setdefault(name, outputs)
                return m
            return fn
        return [("ours", side("ours", [])),
                ("long steps", side("long steps", ["--batch-step-ms", "0", "--interactive-step-slowdown", "100"]))]

    def table_rows(self, ctx, meds):
        o, n = meds.get("ours", {}), meds.get("long steps", {})
        a, b = self.outputs.get("ours"), self.outputs.get("long steps")
        same = sum(1 for x, y in zip(a or [], b or []) if x == y)
        rows = [
            workloads.row("interactive p99 under load (ms) vs target 2 x idle p50 + bulk TPOT p50", "ms",
                          o.get("loaded_p99_ms"), o.get("target_ms"), peer_name="target"),
            workloads.row("interactive p99 under load (ms)", "ms", o.get("loaded_p99_ms"), n.get("loaded_p99_ms")),
            workloads.row("interactive p50 under load (ms)", "ms", o.get("loaded_p50_ms"), n.get("loaded_p50_ms")),
            workloads.row("bulk prompts/s (loss target <= 10%%; %d/%d outputs identical)" % (same, len(a or [])),
                          "prompts/s", o.get("bulk_rows_per_s"), n.get("bulk_rows_per_s")),
            workloads.row("tokens per step with interactive work", "tokens", o.get("interactive_step_tokens"),
                          n.get("interactive_step_tokens"), ratio=False),
            workloads.row("ms per step with interactive work", "ms", o.get("interactive_step_ms"),
                          n.get("interactive_step_ms"), ratio=False),
            workloads.row("tokens per batch-only step", "tokens", o.get("batch_step_tokens"),
                          n.get("batch_step_tokens"), ratio=False),
            workloads.row("ms per batch-only step (mean)", "ms", o.get("batch_step_ms"), n.get("batch_step_ms"),
                          ratio=False),
            workloads.row("longest batch-only step (ms)", "ms", o.get("batch_step_max_ms"),
                          n.get("batch_step_max_ms"), ratio=False),
        ]
        ctx.fair_engine_summary = {"ours": o, "long_steps": n, "identical": same, "outputs": len(a or [])}
        return rows


_SUMMARY = re.compile(r"(\d+) prompts, (\d+) tokens generated in ([0-9.]+) s \(([0-9.]+) tokens/s\); "
                      r"draft tokens (\d+), accepted (\d+)")


def cli_generate(ctx, prompts_file, batch, spec, n_gen):
    """llm-cli generate --batch over the prompts (chat template, greedy);
    returns (metrics, outputs by prompt index)."""
    argv = [ctx.cli, "generate", "-m", ctx.model, "--chat", "-t", str(ctx.threads), "-n", str(n_gen),
            "--max-running", str(batch), "--spec", str(spec), "--spec-max-batch", "4", "--batch", prompts_file]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        raise BenchError("llm-cli generate exited %d: %s" % (p.returncode, p.stderr[-300:]))
    m = _SUMMARY.search(p.stderr)
    if not m:
        raise BenchError("unexpected llm-cli output: %r" % p.stderr[-300:])
    outputs = re.split(r"^### \d+ ", p.stdout, flags=re.M)[1:]
    drafted, accepted = int(m.group(5)), int(m.group(6))
    return ({"tokens": int(m.group(2)), "wall_s": float(m.group(3)), "tokens_per_s": float(m.group(4)),
             "draft_tokens": drafted, "accepted_tokens": accepted,
             "acceptance": accepted / drafted if drafted else None}, outputs)


class Speculative:
    """Prompt-lookup speculation on ticket summaries and extractions, batch 1 and 4."""

    id = "spec"
    peer = "speculation off"

    def __init__(self, prompts):
        self.n = prompts
        self.title = "spec: prompt lookup, %d tickets" % prompts
        self.outputs = {}

    def unavailable(self, ctx):
        return ctx.ours_error

    def prompt_file(self, ctx, task):
        tickets = workloads.ticket_prompts(ctx)
        path = ctx.results_path("spec-%s-%d.txt" % (task, self.n))
        with open(path, "w") as f:
            for i in sorted(tickets)[:self.n]:
                body = tickets[i].split("\n", 1)[1]
                text = (workloads.W1_INSTRUCTION if task == "summary" else EXTRACT_INSTRUCTION) + "\n" + body
                f.write(text.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t") + "\n")
        return path

    def sides(self, ctx):
        out = []
        for task, n_gen in (("extract", 64), ("summary", 48)):
            path = self.prompt_file(ctx, task)
            for batch in (1, 4):
                for spec in (4, 0):
                    name = "%s b%d %s" % (task, batch, "spec" if spec else "plain")

                    def fn(r, path=path, batch=batch, spec=spec, n_gen=n_gen, name=name):
                        m, outputs = cli_generate(ctx, path, batch, spec, n_gen)
                        self.outputs.setdefault(name, outputs)
                        return m
                    out.append((name, fn))
        return out

    def table_rows(self, ctx, meds):
        rows = []
        summary = {}
        for task in ("extract", "summary"):
            for batch in (1, 4):
                s = meds.get("%s b%d spec" % (task, batch), {})
                p = meds.get("%s b%d plain" % (task, batch), {})
                a = self.outputs.get("%s b%d spec" % (task, batch))
                b = self.outputs.get("%s b%d plain" % (task, batch))
                same = sum(1 for x, y in zip(a or [], b or []) if x == y)
                rows.append(workloads.row("%s, batch %d: output tokens/s (acceptance %s, %d/%d outputs identical)"
                                          % (task, batch, "n/a" if s.get("acceptance") is None
                                             else "%.0f%%" % (100 * s["acceptance"]), same, len(a or [])),
                                          "tokens/s", s.get("tokens_per_s"), p.get("tokens_per_s"),
                                          peer_name="speculation off"))
                summary["%s_b%d" % (task, batch)] = {"spec": s, "plain": p, "identical": same,
                                                     "outputs": len(a or [])}
        ctx.spec_summary = summary
        return rows


def fairness_workloads(rows=None, spec_prompts=None):
    return [FairLatency(rows or 512), FairEngine(rows or 512), Speculative(spec_prompts or 32)]
