"""Fewest model calls: analytic queries with model calls in joins, filters,
GROUP BY, ORDER BY ... LIMIT, views and row-level security, each run with
the call-saving rules off and on; calls (llm_stat's finished requests),
tokens (prompt + completion) and wall time per query, and whether the
answers are equal (each query ends in ORDER BY where rows are returned).

Sides (the whole query list each, one psql session per query):
  rules off      llm.lift_filters = off, llm.dedup_calls = off: PostgreSQL's
                 placement, one call per row that reaches it
  lift           llm.lift_filters = on: model-calling filters above joins
  lift + dedup   both on (the defaults)

QUERIES is the list: one dict per query (id, what, sql, optional role).
A new rule adds its queries (and, if it has one, its switch to SIDES).
"""
import hashlib
import time

from .common import BenchError, log
from .workloads import row

# the tables: cust (500 customers, 10 gold, 5 regions), tick (1,000 tickets,
# 20 from gold customers, each text distinct), tick2 (the same with 2
# distinct texts: call sharing's case), tk (60 of bench/data/tickets.csv's tickets, each given a
# customer), notes on some tickets, an RLS copy of cust and a
# security-barrier view
SETUP = """
DROP TABLE IF EXISTS cust, cust_rls, tick, tick2, tk, notes, regions CASCADE;
CREATE TABLE regions (name text PRIMARY KEY, manager text);
INSERT INTO regions VALUES ('north', 'Ana'), ('south', 'Ben'), ('east', 'Chloe'), ('west', 'Dev'), ('central', 'Eli');
CREATE TABLE cust (id int PRIMARY KEY, name text, tier text, region text);
INSERT INTO cust SELECT i, 'Customer ' || i,
    CASE WHEN i % 50 = 0 THEN 'gold' WHEN i % 10 = 0 THEN 'silver' ELSE 'basic' END,
    (ARRAY['north','south','east','west','central'])[1 + i % 5]
  FROM generate_series(1, 500) i;
CREATE TABLE tick (id int PRIMARY KEY, cust_id int, body text);
INSERT INTO tick SELECT i,
    CASE WHEN i <= 20 THEN 50 * (1 + (i - 1) % 10) ELSE 1 + (i % 490) + (i % 490) / 49 END,
    (ARRAY['I love eating pizza with cheese.', 'Secret: the vault code is 4411.',
           'Fresh apples and bananas are on sale.'])[1 + i % 3] || ' (ticket ' || i || ')'
  FROM generate_series(1, 1000) i;
CREATE TABLE tick2 AS SELECT id, cust_id,
    CASE WHEN id % 2 = 0 THEN 'I love eating pizza with cheese.'
      ELSE 'Secret: the vault code is 4411.' END AS body FROM tick;
CREATE TABLE tk AS SELECT id, 1 + (id * 37) % 500 AS cust_id, subject, body, product, priority
  FROM tickets WHERE id <= 60;
ALTER TABLE tk ADD PRIMARY KEY (id);
CREATE TABLE notes AS SELECT id AS tick_id, 'called back on day ' || (id % 5) AS note FROM tk WHERE id % 4 = 0;
CREATE TABLE cust_rls AS SELECT * FROM cust;
ALTER TABLE cust_rls ADD PRIMARY KEY (id);
ALTER TABLE cust_rls ENABLE ROW LEVEL SECURITY;
CREATE POLICY north_only ON cust_rls FOR SELECT USING (region = 'north');
DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'bench_reader') THEN
    CREATE ROLE bench_reader IN ROLE llm_user;
  END IF;
END $$;
GRANT SELECT ON cust_rls, tk, cust, regions TO bench_reader;
CREATE OR REPLACE VIEW north_cust WITH (security_barrier) AS SELECT * FROM cust WHERE region = 'north';
CREATE OR REPLACE VIEW gold_tk AS SELECT t.*, c.region FROM tk t JOIN cust c ON c.id = t.cust_id WHERE c.tier = 'gold';
ANALYZE;
"""

Q = "llm_filter(%s, '%s')"
QUERIES = [
    {"id": "example", "what": "the example: gold customers' food tickets (1,000 tickets, 20 gold)",
     "sql": "SELECT count(*) FROM tick t JOIN cust c ON c.id = t.cust_id "
            "WHERE c.tier = 'gold' AND llm_filter(t.body, 'Is this about food or eating?')"},
    {"id": "example-2texts", "what": "the example over tickets holding 2 distinct texts (call sharing)",
     "sql": "SELECT count(*) FROM tick2 t JOIN cust c ON c.id = t.cust_id "
            "WHERE c.tier = 'gold' AND llm_filter(t.body, 'Is this about food or eating?')"},
    {"id": "group-region", "what": "crash tickets of gold and silver customers per region (GROUP BY)",
     "sql": "SELECT c.region, count(*) FROM tk t JOIN cust c ON c.id = t.cust_id "
            "WHERE c.tier IN ('gold', 'silver') AND llm_filter(t.subject, 'Is this about a crash or a bug?') "
            "GROUP BY c.region ORDER BY 1"},
    {"id": "top-limit", "what": "latest 5 billing tickets of gold and silver customers (ORDER BY ... LIMIT)",
     "sql": "SELECT t.id, t.subject FROM tk t JOIN cust c ON c.id = t.cust_id "
            "WHERE c.tier IN ('gold', 'silver') AND llm_filter(t.subject, 'Is this about billing or payment?') "
            "ORDER BY t.id DESC LIMIT 5"},
    {"id": "view", "what": "refund requests through a view of gold customers' tickets",
     "sql": "SELECT id, region FROM gold_tk WHERE llm_filter(subject, 'Does the customer ask for a refund?') "
            "ORDER BY id"},
    {"id": "rls", "what": "login tickets of customers a row-level security policy shows (one region)",
     "role": "bench_reader",
     "sql": "SELECT count(*) FROM tk t JOIN cust_rls c ON c.id = t.cust_id "
            "WHERE llm_filter(t.subject, 'Is this about logging in or a password?')"},
    {"id": "sb-view", "what": "the same through a security-barrier view of one region",
     "sql": "SELECT count(*) FROM tk t JOIN north_cust c ON c.id = t.cust_id "
            "WHERE llm_filter(t.subject, 'Is this about logging in or a password?')"},
    {"id": "semi", "what": "crash tickets that have a gold customer (EXISTS: semi join)",
     "sql": "SELECT t.id FROM tk t WHERE llm_filter(t.subject, 'Is this about a crash or a bug?') "
            "AND EXISTS (SELECT 1 FROM cust c WHERE c.id = t.cust_id AND c.tier IN ('gold', 'silver')) ORDER BY 1"},
    {"id": "left-notes", "what": "gold and silver complaints with their notes (LEFT JOIN, preserved side)",
     "sql": "SELECT t.id, n.note FROM tk t LEFT JOIN notes n ON n.tick_id = t.id JOIN cust c ON c.id = t.cust_id "
            "WHERE c.tier IN ('gold', 'silver') AND llm_filter(t.subject, 'Is the customer unhappy?') ORDER BY 1"},
    {"id": "three-way", "what": "north region manager's urgent tickets (3 tables)",
     "sql": "SELECT r.manager, count(*) FROM tk t JOIN cust c ON c.id = t.cust_id JOIN regions r ON r.name = c.region "
            "WHERE r.name = 'north' AND c.tier <> 'basic' AND llm_filter(t.subject, 'Is this urgent?') "
            "GROUP BY r.manager ORDER BY 1"},
    {"id": "generate", "what": "a generation as the filter: one-word product answers of gold and silver tickets",
     "sql": "SELECT t.id FROM tk t JOIN cust c ON c.id = t.cust_id WHERE c.tier IN ('gold', 'silver') "
            "AND llm_generate('Answer yes or no. Is this about a mobile phone? ' || t.subject, max_tokens => 1) "
            "ILIKE 'yes%' ORDER BY 1"},
    {"id": "two-subqueries", "what": "refund requests among high-priority tickets and among gold customers' "
                                   "(two subqueries asking the same of overlapping rows: call sharing across nodes)",
     "sql": "SELECT (SELECT count(*) FROM tk WHERE priority = 'high' "
            "AND llm_filter(subject, 'Does the customer ask for a refund?')) AS high, "
            "(SELECT count(*) FROM tk t JOIN cust c ON c.id = t.cust_id WHERE c.tier IN ('gold', 'silver') "
            "AND llm_filter(t.subject, 'Does the customer ask for a refund?')) AS gold_silver"},
    {"id": "high-priority", "what": "high-priority tickets' refund requests per product (one table, no join)",
     "sql": "SELECT product, count(*) FROM tk WHERE priority = 'high' "
            "AND llm_filter(subject, 'Does the customer ask for a refund?') GROUP BY product ORDER BY 1"},
]

SIDES = [
    ("rules off", {"llm.lift_filters": "off", "llm.dedup_calls": "off"}),
    ("lift", {"llm.lift_filters": "on", "llm.dedup_calls": "off"}),
    ("lift + dedup", {"llm.lift_filters": "on", "llm.dedup_calls": "on"}),
]


class SqlCalls:
    id = "calls"
    peer = "rules off"
    needs_pg = True
    title = "Model calls: %d analytic queries, rules off vs on" % len(QUERIES)

    def unavailable(self, ctx):
        if not ctx.pg:
            return "no PostgreSQL server (%s)" % ctx.pg_error
        return None

    def _setup(self, ctx):
        if not getattr(self, "ready", False):
            ctx.pg.sql(SETUP)
            self.ready = True

    def _run(self, ctx, settings, q):
        pre = "".join("SET %s = %s; " % kv for kv in settings.items())
        if q.get("role"):
            pre += "SET ROLE %s; " % q["role"]
        before = ctx.pg.stat()
        dt, out = ctx.pg.timed(pre + q["sql"])
        after = ctx.pg.stat()
        calls = after["requests_finished"] - before["requests_finished"]
        tokens = ((after["prompt_tokens"] - before["prompt_tokens"])
                  + (after["completion_tokens"] - before["completion_tokens"]))
        return {"calls": calls, "tokens": tokens, "s": dt,
                "answer": hashlib.md5(out.encode()).hexdigest()[:12], "rows_out": len(out.splitlines())}

    def sides(self, ctx):
        def side(name, settings):
            def run(r):
                self._setup(ctx)
                ctx.pg.fresh_engine()
                m = {}
                per = {}
                for q in QUERIES:
                    res = self._run(ctx, settings, q)
                    per[q["id"]] = res
                    log("calls %s %s: %d calls, %d tokens, %.2f s" % (name, q["id"], res["calls"],
                                                                      res["tokens"], res["s"]))
                    for k in ("calls", "tokens", "s"):
                        m["%s.%s" % (q["id"], k)] = res[k]
                self.answers = getattr(self, "answers", {})
                self.answers[name] = {k: v["answer"] for k, v in per.items()}
                return m
            return run
        return [(name, side(name, settings)) for name, settings in SIDES]

    def after_rounds(self, ctx, meds):
        """Whether each query's answer is the same on every side; the markdown table."""
        answers = getattr(self, "answers", {})
        same = {q["id"]: len({a.get(q["id"]) for a in answers.values()}) == 1 for q in QUERIES}
        lines = ["| query | what | calls off / lift / lift+dedup | tokens off / lift / lift+dedup "
                 "| s off / lift / lift+dedup | answers equal |",
                 "|---|---|---|---|---|---|"]
        names = [n for n, _ in SIDES]
        for q in QUERIES:
            def col(k, fmt):
                return " / ".join(fmt % meds[n].get("%s.%s" % (q["id"], k), float("nan")) for n in names)
            lines.append("| %s | %s | %s | %s | %s | %s |" % (q["id"], q["what"], col("calls", "%.0f"),
                                                            col("tokens", "%.0f"), col("s", "%.2f"),
                                                            "yes" if same[q["id"]] else "NO"))
        table = "\n".join(lines)
        print(table)
        with open(ctx.results_path("calls.md"), "w") as f:
            f.write(table + "\n")
        return {"answers_equal": same, "markdown": table}

    def table_rows(self, ctx, meds):
        names = [n for n, _ in SIDES]
        on, off = meds[names[-1]], meds[names[0]]
        rows = []
        for q in QUERIES:
            for k, unit in (("calls", "calls"), ("s", "s")):
                key = "%s.%s" % (q["id"], k)
                rows.append(row("%s %s" % (q["id"], k), unit, on.get(key), off.get(key), peer_name="rules off"))
        return rows
