"""Several models in one driver: the worker's step loop (docs/MODELS.md).

`build/bench/multi_model` runs two engines the two ways a worker could step
them: "turns" (one thread steps A then B, both on one shared pool of T
threads: what the worker does) and "split" (two threads, one engine each,
each with a pool of its own of T/2 threads).  Each side is measured with
both models busy (B requests each) and with only one busy (the other idle).
"""
import json
import os

from .common import BenchError, run_cmd


def build(root):
    run_cmd(["make", "-s", "build/bench/multi_model"], timeout=900, cwd=root)
    exe = os.path.join(root, "build", "bench", "multi_model")
    if not os.access(exe, os.X_OK):
        raise BenchError("make did not produce build/bench/multi_model")
    return exe


def run(exe, model, mode, batch, batch_b, n_prompt, n_gen, threads, timeout=900):
    out = run_cmd([exe, "-m", model, "-b", str(batch), "-B", str(batch_b), "-p", str(n_prompt),
                   "-n", str(n_gen), "-t", str(threads), "--mode", mode], timeout=timeout)
    return json.loads(out.strip().splitlines()[-1])


class StepLoop:
    """Two models, one driver: steps in turn on one pool vs two pools side by side."""

    id = "models"
    title = "two models, one worker"
    peer = "split pools"
    batch = 8

    def __init__(self):
        self.exe = None
        self.error = None

    def unavailable(self, ctx):
        if ctx.threads < 2:
            return "needs at least 2 threads"
        try:
            self.exe = build(ctx.root)
        except BenchError as e:
            return "build/bench/multi_model unavailable: %s" % e
        return None

    def sides(self, ctx):
        def side(mode):
            def run_side(r):
                both = run(self.exe, ctx.model, mode, self.batch, self.batch, ctx.n_prompt, ctx.n_gen, ctx.threads)
                one = run(self.exe, ctx.model, mode, self.batch, 0, ctx.n_prompt, ctx.n_gen, ctx.threads)
                return {"both_busy_tps": both["aggregate_tps"], "one_busy_tps": one["aggregate_tps"],
                        "both_wall_s": both["wall_s"], "one_wall_s": one["wall_s"]}
            return run_side
        return [("turns", side("turns")), ("split", side("split"))]

    def rows(self, ctx, o, p):
        from .workloads import row
        return [
            row("both models busy: aggregate tokens/s", "tokens/s", o.get("both_busy_tps"), p.get("both_busy_tps")),
            row("one model busy, one idle: tokens/s", "tokens/s", o.get("one_busy_tps"), p.get("one_busy_tps")),
        ]
