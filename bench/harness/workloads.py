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
