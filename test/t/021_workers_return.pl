# Every background worker of the extension comes back after
# pg_terminate_backend: the llm worker (it serves again), and the job
# launcher and runner terminated together in the middle of a job, twice:
# the job goes on by itself, a trigger on the target records every write,
# and the audit finds 0 rows lost, 0 written twice, each value what the
# prompt generates.  llm_jobs shows a job nothing works on: with every
# runner slot held by another database's continuous job, a new job has no
# runner_pid and a stalled_since, both cleared once a slot is given.  Two
# jobs in one database share the runner's in-flight window: a job created
# while another holds it all never waits with a slot free, and reaches its
# share while the other still has rows to claim.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

# a small window (cap: 4 and a quarter more = 5) keeps the jobs going for
# several seconds on two cores; two running requests, one of them kept for
# interactive calls, make a job's rows finish one at a time, so every row
# that finishes frees one slot of the window (rows that finish together
# free several at once, which hides a job kept waiting while one is free)
my $WINDOW = 4;
my $CAP = 5;
my $node = LlmTest::new_node('workers_return', qq{
llm.job_naptime = 200ms
llm.batch_window = $WINDOW
llm.max_running_requests = 2
max_worker_processes = 16
});

sub q1 { return $node->safe_psql('postgres', $_[0]); }

my $MT = 12;

# ---------- the llm worker terminated comes back and serves ----------
my $reply = q1("SELECT llm_generate('Say hello.', max_tokens => 6)");
my $worker = LlmTest::worker_pid($node);
ok($worker > 0, "llm worker runs (pid $worker)");
q1("SELECT pg_terminate_backend($worker)");
ok($node->poll_query_until('postgres',
		"SELECT worker_pid > 0 AND worker_pid <> $worker FROM llm_stat"),
	'a new llm worker started');
LlmTest::wait_ready($node);
is(q1("SELECT llm_generate('Say hello.', max_tokens => 6)"), $reply, 'the new llm worker serves the same answer');

# ---------- launcher and runner terminated together, twice, mid-job ----------
my $N = 48;
LlmTest::job_table($node, $N, q{'Say the number ' || i || ' in words, then count to ten.'});
my $job = q1("SELECT llm_enrich('tickets', 'summary', \$\$'Summarize: ' || body\$\$, max_tokens => $MT)");
ok($job > 0, "job $job created");

my $JOB_PROCS = "backend_type IN ('llm job launcher', 'llm job runner')";
my $done_at_kill = 0;
for my $round (1, 2)
{
	my $want = $done_at_kill + 4;
	ok($node->poll_query_until('postgres', "SELECT rows_done >= $want FROM llm_jobs WHERE id = $job"),
		"round $round: $want rows done");
	ok($node->poll_query_until('postgres',
			"SELECT count(*) = 2 FROM pg_stat_activity WHERE $JOB_PROCS"),
		"round $round: a launcher and a runner run");
	my $pids = q1("SELECT string_agg(pid::text, ',') FROM pg_stat_activity WHERE $JOB_PROCS");
	is(q1("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity WHERE $JOB_PROCS"),
		'2', "round $round: launcher and runner terminated at once");
	$done_at_kill = q1("SELECT rows_done FROM llm_jobs WHERE id = $job");
	cmp_ok($done_at_kill, '<', $N, "round $round: the job is mid-way ($done_at_kill of $N rows done)");
	ok($node->poll_query_until('postgres',
			"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'llm job launcher' AND pid NOT IN ($pids)"),
		"round $round: a new launcher started");
	ok($node->poll_query_until('postgres',
			"SELECT runner_pid NOT IN ($pids) AND stalled_since IS NULL FROM llm_jobs WHERE id = $job"
			  . " OR (SELECT state = 'done' FROM llm_jobs WHERE id = $job)"),
		"round $round: a new runner works on the job");
}
LlmTest::wait_job_state($node, $job, 'done', 'after two rounds of terminations');
is(q1('SELECT count(*) FROM tickets WHERE summary IS NULL'), '0', 'terminations: 0 rows lost');
is(q1('SELECT count(*) FROM (SELECT id FROM writes GROUP BY id HAVING count(*) > 1) d'), '0',
	'terminations: 0 rows written twice');
is(q1('SELECT count(*) FROM writes'), $N, "terminations: $N writes recorded");
is(q1(qq{SELECT count(*) FROM tickets
         WHERE summary IS DISTINCT FROM llm_generate('Summarize: ' || body, max_tokens => $MT)}),
	'0', 'terminations: every value is what the prompt generates');
is(q1("SELECT rows_done || '|' || rows_failed || '|' || rows_in_flight FROM llm_jobs WHERE id = $job"),
	"$N|0|0", 'terminations: rows done / failed / in flight');

# ---------- two jobs share the runner's window ----------
# A second target with its own audit of writes.
q1(q{
CREATE TABLE tickets_b (id int PRIMARY KEY, body text NOT NULL, summary text);
INSERT INTO tickets_b SELECT i, 'Name the colour number ' || i || ' of the rainbow, then count to five.'
	FROM generate_series(1, 12) i;
CREATE TABLE writes_b (id int, summary text);
CREATE FUNCTION record_write_b() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.summary IS DISTINCT FROM OLD.summary AND NEW.summary IS NOT NULL THEN
		INSERT INTO writes_b VALUES (NEW.id, NEW.summary);
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER record_write_b AFTER UPDATE ON tickets_b FOR EACH ROW EXECUTE FUNCTION record_write_b();
-- samples of both jobs' rows in flight and waiting, each from its own snapshot, until job b is done
CREATE FUNCTION sample_jobs(a bigint, b bigint)
RETURNS TABLE (at timestamptz, a_in int, a_wait int, b_in int, b_wait int) LANGUAGE plpgsql AS $$
BEGIN
	LOOP
		RETURN QUERY SELECT clock_timestamp(), ja.rows_in_flight::int, (ja.rows_queued - ja.rows_in_flight)::int,
		                    jb.rows_in_flight::int, (jb.rows_queued - jb.rows_in_flight)::int
		             FROM llm_jobs ja, llm_jobs jb WHERE ja.id = a AND jb.id = b;
		EXIT WHEN (SELECT state IN ('done', 'failed') FROM llm_jobs WHERE id = b);
		PERFORM pg_sleep(0.01);
	END LOOP;
END $$;
CREATE TABLE samples (at timestamptz, a_in int, a_wait int, b_in int, b_wait int);
UPDATE tickets SET summary = NULL;
TRUNCATE writes;
});
# Job a takes the whole window while a session holds every row of its
# table, so its results cannot be written and it keeps all $CAP rows in
# flight until job b exists (no moment where a slot is free before the
# runner knows job b: each pass reads the active jobs first).  The session
# lets go once one result of job a has arrived: from then on rows of job a
# free slots one at a time.
my $hold = $node->background_psql('postgres');
$hold->query_safe('BEGIN');
is($hold->query_safe('SELECT count(*) FROM (SELECT id FROM tickets FOR UPDATE) held'), $N, 'every row of job a\'s table held');
my $finished = q1('SELECT requests_finished FROM llm_stat');
my $ja = q1("SELECT llm_enrich('tickets', 'summary', \$\$'Summarize: ' || body\$\$, max_tokens => $MT)");
ok($node->poll_query_until('postgres', "SELECT rows_in_flight = $CAP FROM llm_jobs WHERE id = $ja"),
	"job $ja holds the whole window ($CAP rows in flight)");
my $jb = q1("SELECT llm_enrich('tickets_b', 'summary', \$\$'Answer: ' || body\$\$, max_tokens => $MT)");
my $sampling = LlmTest::start_query($node, "INSERT INTO samples SELECT * FROM sample_jobs($ja, $jb)");
ok(LlmTest::backend_pid($node, 'INSERT INTO samples') > 0, 'sampling');
ok($node->poll_query_until('postgres', "SELECT requests_finished > $finished FROM llm_stat"),
	'a result of job a arrived while its rows were held');
$hold->query_safe('COMMIT');
$hold->quit;
my (undef, $sampling_err) = LlmTest::finish_query($sampling);
is($sampling_err, '', 'samples taken until job b was done');
cmp_ok(q1("SELECT count(*) FROM samples WHERE a_in = $CAP AND b_in = 0"), '>', 0, 'samples of job b waiting for a slot');
is(q1("SELECT count(*) FROM samples WHERE b_in = 0 AND b_wait > 0 AND a_in + b_in < $CAP"),
	'0', 'job b never waits with a slot of the window free')
  or diag(q1("SELECT string_agg(format('%s a %s+%s b %s+%s', at, a_in, a_wait, b_in, b_wait), E'\\n' ORDER BY at)"
		  . " FROM (SELECT * FROM samples WHERE b_in = 0 AND a_in + b_in < $CAP ORDER BY at LIMIT 10) s"));
my $share = int($WINDOW / 2);
cmp_ok(q1("SELECT count(*) FROM samples WHERE b_in >= $share AND a_wait > 0"), '>', 0,
	"job b reaches its share ($share rows in flight) while job a still has rows to claim");
is(q1("SELECT max(a_in + b_in) FROM samples"), $CAP, "never more than $CAP rows in flight");
LlmTest::wait_job_state($node, $jb, 'done', 'the second job');
LlmTest::wait_job_state($node, $ja, 'done', 'the first job');
is(q1('SELECT count(*) FROM tickets WHERE summary IS NULL') . '|' . q1('SELECT count(*) FROM tickets_b WHERE summary IS NULL'),
	'0|0', 'two jobs: 0 rows lost');
is(q1('SELECT (SELECT count(*) FROM (SELECT id FROM writes GROUP BY id HAVING count(*) > 1) d) +
              (SELECT count(*) FROM (SELECT id FROM writes_b GROUP BY id HAVING count(*) > 1) d)'),
	'0', 'two jobs: 0 rows written twice');

# ---------- stalled: no runner slot for the database ----------
q1('ALTER SYSTEM SET llm.max_job_runners = 1');
q1('SELECT pg_reload_conf()');
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'llm job runner'"),
	'the runner of postgres left with its jobs done');
q1('CREATE DATABASE other');
$node->safe_psql('other', q{CREATE EXTENSION llm;
CREATE TABLE o (id int PRIMARY KEY, body text, s text)});
my $jo = $node->safe_psql('other', "SELECT llm_enrich('o', 's', 'body', max_tokens => 4, mode => 'continuous')");
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'llm job runner' AND datname = 'other'"),
	'a continuous job in another database holds the only runner slot');
q1('UPDATE tickets SET summary = NULL WHERE id <= 8; TRUNCATE writes');
my $jc = q1("SELECT llm_enrich('tickets', 'summary', \$\$'Summarize: ' || body\$\$, max_tokens => $MT)");
ok($node->poll_query_until('postgres', "SELECT stalled_since IS NOT NULL FROM llm_jobs WHERE id = $jc"),
	'llm_jobs shows the job stalled');
is(q1("SELECT state || '|' || (runner_pid IS NULL) || '|' || rows_done || '|' || rows_in_flight"
		. " || '|' || (stalled_since >= created_at) FROM llm_jobs WHERE id = $jc"),
	'queued|true|0|0|true', 'stalled: no runner, nothing done or in flight, since the job wanted one');
is(q1("SELECT count(*) FROM llm_jobs WHERE stalled_since IS NOT NULL AND id <> $jc"), '0',
	'jobs done are never stalled');
q1('ALTER SYSTEM SET llm.max_job_runners = 2');
q1('SELECT pg_reload_conf()');
ok($node->poll_query_until('postgres',
		"SELECT runner_pid IS NOT NULL AND stalled_since IS NULL FROM llm_jobs WHERE id = $jc"),
	'a runner works on the job once a slot is free: no longer stalled');
LlmTest::wait_job_state($node, $jc, 'done', 'once a runner slot was free');
is(q1('SELECT count(*) FROM tickets WHERE summary IS NULL') . '|' . q1('SELECT count(*) FROM writes'),
	'0|8', 'the stalled job: 0 rows lost, each written once');
$node->safe_psql('other', "SELECT llm_job_cancel($jo)");

LlmTest::no_crash($node);
$node->stop;
done_testing();
