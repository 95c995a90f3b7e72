"""A throwaway PostgreSQL 15 with pg_llm for the SQL workloads (W1, W3, W4).

Installs the extension (`make install`, as root or via sudo) into the
PostgreSQL that $PG_CONFIG names (default: this checkout's private copy of
the installation, test/private-pg, so the system's directories and other
checkouts are never touched), initdb's a
cluster in a temporary directory (as the unprivileged user `llmtest` when
run as root: PostgreSQL refuses root), starts it with the given llm.*
settings, creates the extension and loads bench/data/tickets.csv.
`ensure_plpython()` installs Debian's postgresql-plpython3-15 for the
pgai-style peer (one HTTP call per row from a plpython3u function).
"""
import glob
import os
import shutil
import subprocess
import tempfile
import threading
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
        self.pg_config = (os.environ.get("PG_CONFIG")
                          or run_cmd([os.path.join(root, "test", "private-pg")], 1800).strip())
        self.bindir = run_cmd([self.pg_config, "--bindir"], 30).strip()
        self.run = _runner()
        self.dir = None
        self._keep_priority = False

    def __enter__(self):
        sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
        run_cmd(sudo + ["make", "-s", "install", "PG_CONFIG=" + self.pg_config], timeout=1800, cwd=self.root)
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
        self.share_priority(data)
        csv = os.path.join(self.dir, "tickets.csv")
        shutil.copy(os.path.join(self.root, "bench", "data", "tickets.csv"), csv)
        os.chmod(csv, 0o644)
        self.sql("CREATE EXTENSION llm; "
                 "CREATE TABLE tickets (id int PRIMARY KEY, subject text, body text, product text, priority text);")
        self.sql("\\copy tickets FROM '%s' WITH (FORMAT csv, HEADER true)" % csv)
        self.wait_ready()
        return self

    def share_priority(self, data):
        """Give the server's processes this process's priority (bench/run
        --nice).  With autogroup scheduling a nice value only ranks processes
        of one session, and every PostgreSQL process is a session of its own
        (runuser and pg_ctl start the postmaster in one, and each backend and
        background worker calls setsid()), all at nice 0: without this the
        server side of a SQL workload (the llm worker's compute threads, the
        backends, job runners) competes with other work on equal terms while
        the client runs at -19.  Processes start later (backends, workers), so
        a thread applies it to the postmaster's children every 0.2 s."""
        nice = os.nice(0)
        if nice >= 0 or os.geteuid() != 0:
            return
        with open(os.path.join(data, "postmaster.pid")) as f:
            postmaster = int(f.readline())
        self._keep_priority = True
        done = set()

        def apply(pid):
            try:
                with open("/proc/%d/autogroup" % pid, "w") as f:
                    f.write(str(nice))
                done.add(pid)
            except OSError:
                pass  # gone already, or not ours to change

        def keep():
            while self._keep_priority:
                if postmaster not in done:
                    apply(postmaster)
                for d in os.listdir("/proc"):
                    if d.isdigit() and int(d) not in done:
                        try:
                            with open("/proc/%s/stat" % d) as f:
                                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                        except (OSError, ValueError, IndexError):
                            continue
                        if ppid == postmaster:
                            apply(int(d))
                time.sleep(0.2)

        threading.Thread(target=keep, daemon=True).start()

    def __exit__(self, *exc):
        self._keep_priority = False
        if self.dir:
            subprocess.run(self.run + [os.path.join(self.bindir, "pg_ctl"), "-D",
                                       os.path.join(self.dir, "data"), "-m", "fast", "stop"],
                           capture_output=True)
            shutil.rmtree(self.dir, ignore_errors=True)

    def psql_argv(self):
        return self.run + [os.path.join(self.bindir, "psql"), "-h", self.dir, "-p", str(self.port),
                           "-U", "postgres", "-d", "postgres", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"]

    def pgbench(self, script_text, clients, transactions, timeout=7200):
        """Run pgbench with a custom script: `clients` sessions, each running
        `transactions` transactions one after another (-n: no vacuum, -j 1).
        Returns (wall seconds, pgbench's stdout)."""
        path = os.path.join(self.dir, "bench-%d.sql" % clients)
        with open(path, "w") as f:
            f.write(script_text)
        os.chmod(path, 0o644)
        argv = self.run + [os.path.join(self.bindir, "pgbench"), "-n", "-h", self.dir, "-p", str(self.port),
                           "-U", "postgres", "-c", str(clients), "-j", "1", "-t", str(transactions),
                           "-f", path, "postgres"]
        t0 = time.time()
        out = run_cmd(argv, timeout)
        return time.time() - t0, out

    def ensure_plpython(self):
        """Make plpython3u available to this server: apt-get install Debian's
        postgresql-plpython3-15 if the system lacks it, and copy its files
        into a private PostgreSQL tree ($PG_CONFIG elsewhere) if needed."""
        pkglib = run_cmd([self.pg_config, "--pkglibdir"], 30).strip()
        share = run_cmd([self.pg_config, "--sharedir"], 30).strip()
        if os.path.exists(os.path.join(pkglib, "plpython3.so")):
            return
        sys_lib, sys_share = "/usr/lib/postgresql/15/lib", "/usr/share/postgresql/15"
        if not os.path.exists(os.path.join(sys_lib, "plpython3.so")):
            log("installing postgresql-plpython3-15 (apt-get) for the pgai-style peer")
            sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
            env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
            try:
                run_cmd(sudo + ["apt-get", "install", "-y", "-q", "postgresql-plpython3-15"], 1800, env=env)
            except BenchError:
                run_cmd(sudo + ["apt-get", "update", "-q"], 1800, env=env)
                run_cmd(sudo + ["apt-get", "install", "-y", "-q", "postgresql-plpython3-15"], 1800, env=env)
        if os.path.realpath(pkglib) != os.path.realpath(sys_lib):
            shutil.copy(os.path.join(sys_lib, "plpython3.so"), pkglib)
            for f in glob.glob(os.path.join(sys_share, "extension", "plpython3u*")):
                shutil.copy(f, os.path.join(share, "extension"))

    def sql(self, text, timeout=3600):
        """Run SQL through psql; returns unaligned, tuples-only output."""
        return run_cmd(self.psql_argv() + ["-c", text], timeout)

    def rows(self, text, timeout=3600):
        """Rows of a query as lists of strings (unaligned, '|'-separated; no '|' in values)."""
        return [line.split("|") for line in self.sql(text, timeout).splitlines() if line]

    def recent_requests(self):
        """llm_recent_requests() since the last llm_stat_reset(), as dicts
        (finished_at as epoch seconds; None for NULLs)."""
        cols = ["seq", "finished", "outcome", "prompt_tokens", "cached_tokens", "completion_tokens",
                "ttft_ms", "tpot_ms", "total_ms"]
        out = []
        for r in self.rows("SELECT seq, extract(epoch FROM finished_at), outcome, prompt_tokens, cached_tokens, "
                           "completion_tokens, ttft_ms, tpot_ms, total_ms FROM llm_recent_requests() ORDER BY seq"):
            d = {}
            for c, v in zip(cols, r):
                d[c] = v if c == "outcome" else (float(v) if v != "" else None)
            out.append(d)
        return out

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

    def set_prefix_caching(self, on):
        """Set llm.prefix_caching and wait for the worker to reload its engine with it."""
        self.sql("ALTER SYSTEM SET llm.prefix_caching = %s" % ("on" if on else "off"))
        self.sql("SELECT pg_reload_conf()")
        self.wait_ready("prefix_caching", "true" if on else "false")

    def set_engine_setting(self, name, value, info_key, expect):
        """ALTER SYSTEM SET name = value (RESET for None), reload, and wait
        until llm_model_info()'s model.<info_key> reads expect."""
        if value is None:
            self.sql("ALTER SYSTEM RESET %s" % name)
        else:
            self.sql("ALTER SYSTEM SET %s = %s" % (name, value))
        self.sql("SELECT pg_reload_conf()")
        self.wait_ready(info_key, expect)

    def fresh_engine(self, prefix_caching=True, warm_up=True):
        """Reload the worker's engine (switching llm.prefix_caching away and
        back), so a run starts with an empty prefix cache instead of the
        previous run's prompts; then one short warm-up request (like the
        peers' warm-up) and llm_stat_reset()."""
        for setting in (not prefix_caching, prefix_caching):
            self.set_prefix_caching(setting)
        if warm_up:
            self.sql("SELECT llm_generate('Say hi.', max_tokens => 2)")
        self.sql("SELECT llm_stat_reset()")

    def timed(self, text):
        t0 = time.time()
        out = self.sql(text)
        return time.time() - t0, out

    def stat(self):
        cols = ["requests_finished", "prompt_tokens", "completion_tokens", "prefix_query_tokens",
                "prefix_hit_tokens", "max_batch_size", "ttft_mean_ms", "tpot_mean_ms"]
        vals = self.sql("SELECT %s FROM llm_stat" % ", ".join(cols)).strip().split("|")
        return {c: (float(v) if v not in ("", None) else None) for c, v in zip(cols, vals)}
