"""Measurement helpers shared by every workload: commands, rounds, medians, table."""
import os
import statistics
import subprocess
import sys
import time


class BenchError(Exception):
    """A side of a comparison could not be measured (the reason is the message)."""


def log(msg):
    print("[bench %s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


def run_cmd(argv, timeout, cwd=None, env=None):
    """Run argv, return stdout; raise BenchError with the stderr tail on failure."""
    try:
        p = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BenchError("%s: timed out after %d s" % (os.path.basename(argv[0]), timeout))
    except OSError as e:
        raise BenchError("%s: %s" % (argv[0], e))
    if p.returncode != 0:
        tail = (p.stderr or p.stdout or "").strip().splitlines()[-6:]
        raise BenchError("%s exited %d: %s" % (os.path.basename(argv[0]), p.returncode, " | ".join(tail)))
    return p.stdout


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def load_average():
    try:
        return list(os.getloadavg())
    except OSError:
        return None


def cpu_busy(interval=0.5):
    """Fraction of all CPUs busy (not idle/iowait) over `interval` seconds, from /proc/stat."""
    def snap():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + v[4]
    try:
        t0, i0 = snap()
        time.sleep(interval)
        t1, i1 = snap()
    except (OSError, ValueError, IndexError):
        return None
    return 1.0 - (i1 - i0) / (t1 - t0) if t1 > t0 else None


def wait_quiet(max_wait, threshold=0.15):
    """Wait up to max_wait seconds for the other work on the machine to stop
    (CPU busy below threshold); returns the last busy fraction seen."""
    deadline = time.time() + max_wait
    busy = cpu_busy()
    warned = False
    while busy is not None and busy > threshold and time.time() < deadline:
        if not warned:
            log("machine busy (%.0f%% CPU), waiting up to %d s" % (100 * busy, max_wait))
            warned = True
        time.sleep(2)
        busy = cpu_busy()
    return busy


def alternate_rounds(rounds, sides, quiet_wait=0):
    """Run each side once per round, alternating which goes first (ours, peer /
    peer, ours, ...) so slow drifts of the machine hit both equally.

    sides: list of (name, fn) where fn(round_index) returns a dict of metrics.
    Each sample also records the CPU busy fraction just before it ran
    (_busy_before: other work on the machine), after waiting up to quiet_wait
    seconds for it to fall.
    Returns {name: {"samples": [dict...], "errors": [str...]}}.  A side that
    fails is recorded and skipped in later rounds (same error every time).
    """
    out = {name: {"samples": [], "errors": []} for name, _ in sides}
    dead = set()
    for r in range(rounds):
        order = sides if r % 2 == 0 else list(reversed(sides))
        for name, fn in order:
            if name in dead:
                continue
            busy = wait_quiet(quiet_wait) if quiet_wait > 0 else cpu_busy()
            t0 = time.time()
            try:
                m = fn(r)
                m["_busy_before"] = busy
                m["_load1"] = load_average()[0] if load_average() else None
                out[name]["samples"].append(m)
                log("round %d %s: %s (%.1f s)" % (r + 1, name, _short(m), time.time() - t0))
            except BenchError as e:
                out[name]["errors"].append(str(e))
                dead.add(name)
                msg = str(e)
                log("round %d %s FAILED: %s" % (r + 1, name, msg if len(msg) < 300 else msg[:300] + "..."))
    return out


def _short(m):
    return ", ".join("%s=%.1f" % (k, v) for k, v in m.items()
                     if not k.startswith("_") and isinstance(v, (int, float)) and not isinstance(v, bool))


def medians(samples):
    keys = []
    for s in samples:
        for k, v in s.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in keys:
                keys.append(k)
    return {k: median([s.get(k) for s in samples]) for k in keys}


def fmt_num(v, digits=1):
    if v is None:
        return "n/a"
    if abs(v) >= 100:
        return "%.0f" % v
    return "%.*f" % (digits, v)


def fmt_pct(v):
    return "n/a" if v is None else "%.0f%%" % (100 * v)


def table(headers, rows, left=2):
    """Markdown-style table: the first `left` columns left-aligned, the others right-aligned."""
    widths = [max(len(str(r[i])) for r in [headers] + rows) for i in range(len(headers))]

    def line(r):
        cells = []
        for i, c in enumerate(r):
            cells.append(str(c).ljust(widths[i]) if i < left else str(c).rjust(widths[i]))
        return "| " + " | ".join(cells) + " |"

    sep = "|" + "|".join("-" * (w + 2) if i < left else "-" * (w + 1) + ":" for i, w in enumerate(widths)) + "|"
    return "\n".join([line(headers), sep] + [line(r) for r in rows])
