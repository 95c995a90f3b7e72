"""A throwaway PostgreSQL 15 with pg_llm for the SQL workloads (W1, W4).

Installs the extension (`make install`, as root or via sudo), initdb's a
cluster in a temporary directory (as the unprivileged user `llmtest` when
run as root: PostgreSQL refuses root), starts it with the given llm.*
settings, creates the extension and loads bench/data/tickets.csv.
"""
import os
import shutil
import subprocess
import tempfile
import time

from .common import BenchError, log, run_cmd


def _runner():
    if os.geteuid() != 0:
        return []
    if subprocess.run(["id", "llmtest"], capture_output=True).returncode != 0:
        run_cmd(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "llmtest"], 60)
    return ["runuser", "-u", "llmtest", "--"]


class Server:
    def __init__(self, root, threads, port=54339, settings=None):
        self.root = root
        self.threads = threads
        self.port = port
        self.settings = dict(settings or {})
        self.bindir = run_cmd(["pg_config", "--bindir"], 30).strip()
        self.run = _runner()
        self.dir = None

    def __enter__(self):
        sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
        run_cmd(sudo + ["make", "-s", "install"], timeout=1800, cwd=self.root)
        self.dir = tempfile.mkdtemp(prefix="pg_llm_bench.")
        if self.run:
            shutil.chown(self.dir, "llmtest")
        data = os.path.join(self.dir, "data")
        run_cmd(self.run + [os.path.join(self.bindir, "initdb"), "-D", data, "-U", "postgres",
                            "-E", "UTF8", "--no-locale"], 300)
        conf = {"shared_preload_libraries": "'llm'", "port": str(self.port),
                "unix_socket_directories": "'%s'" % self.dir, "listen_addresses": "''",
                "llm.threads": str(self.threads)}
        conf.update(self.settings)
        with open(os.path.join(data, "postgresql.conf"), "a") as f:
            for k, v in conf.items():
                f.write("%s = %s\n" % (k, v))
        run_cmd(self.run + [os.path.join(self.bindir, "pg_ctl"), "-D", data, "-l",
                            os.path.join(self.dir, "server.log"), "-w", "start"], 300)
        csv = os.path.join(self.dir, "tickets.csv")
        shutil.copy(os.path.join(self.root, "bench", "data", "tickets.csv"), csv)
        os.chmod(csv, 0o644)
        self.sql("CREATE EXTENSION llm; "
                 "CREATE TABLE tickets (id int PRIMARY KEY, subject text, body text, product text, priority text);")
        self.sql("\\copy tickets FROM '%s' WITH (FORMAT csv, HEADER true)" % csv)
        self.wait_ready()
        return self

    def __exit__(self, *exc):
        if self.dir:
            subprocess.run(self.run + [os.path.join(self.bindir, "pg_ctl"), "-D",
                                       os.path.join(self.dir, "data"), "-m", "fast", "stop"],
                           capture_output=True)
            shutil.rmtree(self.dir, ignore_errors=True)

    def sql(self, text, timeout=3600):
        """Run SQL through psql; returns unaligned, tuples-only output."""
        return run_cmd(self.run + [os.path.join(self.bindir, "psql"), "-h", self.dir, "-p", str(self.port),
                                   "-U", "postgres", "-d", "postgres", "-X", "-q", "-A", "-t",
                                   "-v", "ON_ERROR_STOP=1", "-c", text], timeout)

    def wait_ready(self, key=None, value=None, timeout=120):
        """Wait until the worker's engine is loaded (and, if given, model setting key = value)."""
        t0 = time.time()
        while time.time() - t0 < timeout:
            q = "SELECT llm_model_info()->>'status'"
            if key:
                q += ", llm_model_info()->'model'->>'%s'" % key
            out = self.sql(q).strip().split("|")
            if out[0] == "ready" and (key is None or out[1] == value):
                return
            time.sleep(0.2)
        raise BenchError("llm worker not ready after %d s" % timeout)

    def timed(self, text):
        t0 = time.time()
        out = self.sql(text)
        return time.time() - t0, out

    def stat(self):
        cols = ["requests_finished", "prompt_tokens", "completion_tokens", "prefix_query_tokens",
                "prefix_hit_tokens", "max_batch_size", "ttft_mean_ms", "tpot_mean_ms"]
        vals = self.sql("SELECT %s FROM llm_stat" % ", ".join(cols)).strip().split("|")
        return {c: (float(v) if v not in ("", None) else None) for c, v in zip(cols, vals)}
