"""The llama.cpp peer: llama-bench for single-stream and a llama-server with
concurrent HTTP clients for batched serving.

The binaries come from scripts/build-llama-cpp.sh (llama.cpp vendored in the
PyPI sdist of llama-cpp-python==0.3.36, built once and cached outside the repo).
Flags follow llama.cpp's tools/llama-bench/llama-bench.cpp and
tools/server/README.md of that version.
"""
import json
import os
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

from .common import BenchError, log, run_cmd


def build(root):
    """Return the llama.cpp bin/ directory, building it only if the cache lacks it.

    $LLAMA_CPP_BUILD points at an existing build directory instead.
    """
    bdir = os.environ.get("LLAMA_CPP_BUILD")
    if not bdir:
        out = run_cmd([os.path.join(root, "scripts", "build-llama-cpp.sh")], timeout=3600, cwd=root)
        bdir = out.strip().splitlines()[-1]
    bindir = os.path.join(bdir, "bin")
    for exe in ("llama-bench", "llama-server"):
        if not os.access(os.path.join(bindir, exe), os.X_OK):
            raise BenchError("%s missing in %s" % (exe, bindir))
    return bindir


def cpu_backend(bindir):
    """What llama.cpp's CPU backend reported in scripts/build-llama-cpp.sh's smoke
    test of this build (its cpu-backend.txt: llama-server's system_info line,
    and the variant a dynamic-backend build loaded): {"system_info": the
    features, "amx": whether they include AMX (AMX_INT8 = 1, or a
    sapphirerapids variant)}, or None when the build has no such record."""
    try:
        with open(os.path.join(os.path.dirname(os.path.abspath(bindir)), "cpu-backend.txt")) as f:
            text = f.read()
    except OSError:
        return None
    feats = " ".join(line.split("|", 1)[1].strip() if "|" in line else line.strip()
                     for line in text.splitlines() if line.strip())
    return {"system_info": feats,
            "amx": "AMX_INT8 = 1" in text or "sapphirerapids" in text}


def version(bindir):
    try:
        p = subprocess.run([os.path.join(bindir, "llama-server"), "--version"], capture_output=True,
                           text=True, timeout=30)
        return (p.stdout + p.stderr).strip().splitlines()[-2:]
    except (OSError, subprocess.TimeoutExpired):
        return None


# llama-bench's flash-attention settings tried; the peer is the fastest of them per metric
FLASH_ATTN = (0, 1)


def llama_bench_tests(bindir, model, n_prompt, n_gen, depths, threads, timeout=600, fa=FLASH_ATTN, extra=()):
    """One llama-bench run (-r 1 after its own warm-up) of prompt processing of
    n_prompt tokens and generation of n_gen tokens at each depth, with every
    flash-attention setting in fa (-fa 0,1) and the extra arguments: its JSON
    test records.  A count of 0 skips that kind of test.  llama-bench feeds
    random token ids; the work does not depend on which ids they are."""
    argv = [os.path.join(bindir, "llama-bench"), "-m", model, "-p", str(n_prompt), "-n", str(n_gen),
            "-d", ",".join(str(d) for d in depths), "-t", str(threads), "-r", "1", "-o", "json",
            "-fa", ",".join(str(f) for f in fa)] + list(extra)
    out = run_cmd(argv, timeout=timeout)
    try:
        return json.loads(out)
    except ValueError:
        raise BenchError("llama-bench printed no JSON: %r" % out[-300:])


def _fastest(tests, pred):
    """(tokens/s, flash_attn, test) of the fastest test matching pred, or None."""
    best = None
    for t in tests:
        if pred(t) and (best is None or t["avg_ts"] > best[0]):
            best = (t["avg_ts"], int(t.get("flash_attn", -1)), t)
    return best


def llama_bench(bindir, model, n_prompt, n_gen, threads, timeout=900):
    """Single-stream peer numbers: prompt processing of n_prompt tokens from an
    empty context, and generation of n_gen tokens both from an empty context
    and after n_prompt tokens (-d 0,P), the latter being what `llm-cli bench`
    measures; each metric from llama.cpp's faster flash-attention setting
    (prefill_fa / decode_fa say which)."""
    tests = llama_bench_tests(bindir, model, n_prompt, n_gen, (0, n_prompt), threads, timeout)
    m = {}
    pp = _fastest(tests, lambda t: t["n_prompt"] > 0 and t["n_gen"] == 0 and t["n_depth"] == 0)
    tg = _fastest(tests, lambda t: t["n_gen"] > 0 and t["n_prompt"] == 0 and t["n_depth"] == n_prompt)
    tg0 = _fastest(tests, lambda t: t["n_gen"] > 0 and t["n_prompt"] == 0 and t["n_depth"] == 0)
    if pp is None or tg is None:
        raise BenchError("llama-bench JSON lacks the expected tests")
    m["prefill_tps"], m["prefill_fa"] = pp[0], pp[1]
    m["decode_tps"], m["decode_fa"] = tg[0], tg[1]
    m["step_ms"] = tg[2]["avg_ns"] / 1e6 / tg[2]["n_gen"]
    if tg0:
        m["decode_depth0_tps"] = tg0[0]
    for t in tests:
        kind = "pp" if t["n_gen"] == 0 else "tg"
        m["%s_d%d_fa%d_tps" % (kind, t["n_depth"], int(t.get("flash_attn", -1)))] = t["avg_ts"]
    return m


def llama_bench_long(bindir, model, depth, n_gen, threads, timeout=3600, kv_dtype="f16"):
    """Long-context peer numbers, each from llama.cpp's faster flash-attention
    setting: `llama-bench -p D` (prefill of D tokens from an empty context)
    and `llama-bench -n G -d D` (generation of G tokens after D).  kv_dtype
    q8_0: K and V caches in q8_0 (-ctk/-ctv), with -fa 1 only (llama.cpp
    quantizes the V cache only with flash attention)."""
    fa, extra = FLASH_ATTN, ()
    if kv_dtype != "f16":
        fa, extra = (1,), ("-ctk", kv_dtype, "-ctv", kv_dtype)
    pp_tests = llama_bench_tests(bindir, model, depth, 0, (0,), threads, timeout, fa=fa, extra=extra)
    tg_tests = llama_bench_tests(bindir, model, 0, n_gen, (depth,), threads, timeout, fa=fa, extra=extra)
    pp = _fastest(pp_tests, lambda t: t["n_prompt"] == depth)
    tg = _fastest(tg_tests, lambda t: t["n_gen"] == n_gen and t["n_depth"] == depth)
    if pp is None or tg is None:
        raise BenchError("llama-bench JSON lacks the long-context tests")
    m = {"prefill_tps": pp[0], "prefill_fa": pp[1], "decode_tps": tg[0], "decode_fa": tg[1],
         "step_ms": tg[2]["avg_ns"] / 1e6 / tg[2]["n_gen"]}
    for t in pp_tests + tg_tests:
        kind = "pp" if t["n_gen"] == 0 else "tg"
        m["%s_fa%d_tps" % (kind, int(t.get("flash_attn", -1)))] = t["avg_ts"]
    return m


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A llama-server child process with `slots` parallel slots and continuous batching."""

    def __init__(self, bindir, model, slots, ctx_per_slot, threads, log_path, extra=()):
        self.port = _free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.argv = [os.path.join(bindir, "llama-server"), "-m", model,
                     "-np", str(slots), "-c", str(slots * ctx_per_slot),
                     "-t", str(threads), "-tb", str(threads), "--cont-batching",
                     "-cram", "0", "--no-webui", "--host", "127.0.0.1", "--port", str(self.port)] + list(extra)
        self.log_path = log_path
        self.proc = None

    def __enter__(self):
        self.logf = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.argv, stdout=self.logf, stderr=subprocess.STDOUT)
        deadline = time.time() + 180
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise BenchError("llama-server exited %d at start (see %s)" % (self.proc.returncode, self.log_path))
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.25)
        self.__exit__(None, None, None)
        raise BenchError("llama-server not healthy after 180 s (see %s)" % self.log_path)

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.logf.close()

    def complete(self, prompt_ids, n_predict, timeout=900):
        """POST /completion with a token-id prompt, greedy, no prompt cache; returns the JSON reply."""
        body = json.dumps({
            "prompt": prompt_ids,
            "n_predict": n_predict,
            "ignore_eos": True,
            "temperature": 0,
            "cache_prompt": False,
            "stream": False,
        }).encode()
        req = urllib.request.Request(self.url + "/completion", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())


    def post(self, path, body, timeout=900):
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())

    def complete_text(self, text, n_predict, timeout=900):
        """POST /completion with a text prompt whose special tokens
        (<|im_start|>, ...) the server parses, greedy, stopping at
        end-of-generation like llm_generate; llama-server's default prompt
        cache stays on (cache_prompt), like pg_llm's prefix cache."""
        return self.post("/completion", {"prompt": text, "n_predict": n_predict, "temperature": 0,
                                         "stream": False}, timeout)

    def tokenize(self, text):
        """Token ids the server makes of text, special tokens parsed (as /completion does)."""
        return self.post("/tokenize", {"content": text, "add_special": True, "parse_special": True})["tokens"]

    def metrics(self):
        """Counters of /metrics (needs --metrics): {name without 'llamacpp:': value}."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=30) as r:
            text = r.read().decode()
        out = {}
        for line in text.splitlines():
            if line.startswith("llamacpp:"):
                k, _, v = line.partition(" ")
                try:
                    out[k[len("llamacpp:"):]] = float(v)
                except ValueError:
                    pass
        return out


def session_completions(server, sessions, n_predict):
    """W3's peer: one thread and connection per session, each sending its
    texts one at a time (the next after the previous reply), all sessions
    started together.  Returns (wall seconds, replies in session order)."""
    n = len(sessions)
    replies = [[] for _ in range(n)]
    errors = []
    barrier = threading.Barrier(n + 1)

    def client(i):
        barrier.wait()
        for text in sessions[i]:
            try:
                replies[i].append(server.complete_text(text, n_predict))
            except (urllib.error.URLError, OSError, ValueError) as e:
                errors.append("session %d: %s" % (i, e))
                return

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.time()
    for t in threads:
        t.join()
    wall = time.time() - t0
    if errors:
        raise BenchError("llama-server: " + "; ".join(errors[:3]))
    return wall, [r for rs in replies for r in rs]


def concurrent_completions(server, prompts, n_predict):
    """Send every prompt at once (one thread and connection each, released
    together by a barrier); returns metrics from the clients' wall clock and
    from the server's own per-request timings.

    wall_tps         all generated tokens / (last reply - first send)
    decode_tps       sum over requests of the server's predicted_per_second
                     (time after each request's first token): the aggregate
                     decode rate while all slots generate together
    prefill_tps      all prompt tokens / the longest prompt_ms (the prompts
                     are processed together in the first batches)
    """
    n = len(prompts)
    replies = [None] * n
    errors = []
    times = [None] * n
    barrier = threading.Barrier(n)

    def client(i):
        barrier.wait()
        t0 = time.time()
        try:
            replies[i] = server.complete(prompts[i], n_predict)
        except (urllib.error.URLError, OSError, ValueError) as e:
            errors.append("request %d: %s" % (i, e))
        times[i] = (t0, time.time())

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise BenchError("llama-server: " + "; ".join(errors[:3]))
    wall = max(t[1] for t in times) - min(t[0] for t in times)
    predicted = [r["timings"]["predicted_n"] for r in replies]
    short = [p for p in predicted if p != n_predict]
    if short:
        log("warning: llama-server generated %s tokens instead of %d for %d requests"
            % (sorted(set(short)), n_predict, len(short)))
    return {
        "wall_tps": sum(predicted) / wall,
        "wall_s": wall,
        "decode_tps": sum(r["timings"]["predicted_per_second"] for r in replies),
        "prefill_tps": sum(r["timings"]["prompt_n"] for r in replies)
        / (max(r["timings"]["prompt_ms"] for r in replies) / 1e3),
        "step_ms": statistics_median([r["timings"]["predicted_ms"] / max(1, r["timings"]["predicted_n"])
                                      for r in replies]),
        "generated": sum(predicted),
        "prompt_tokens": sum(r["timings"]["prompt_n"] for r in replies),
    }


def statistics_median(xs):
    xs = sorted(xs)
    k = len(xs) // 2
    return xs[k] if len(xs) % 2 else (xs[k - 1] + xs[k]) / 2
