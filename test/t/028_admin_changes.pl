# What an administrator changes under running jobs and models.
#
# llm.enable_jobs turned off by a reload stops the jobs that are running:
# the database's runner leaves (llm_jobs shows no runner_pid and, after a
# few naptimes, a stalled_since) and no row is written while it is off;
# turned on again, a runner comes back and finishes the job, and the audit
# of every write finds no row lost, none written twice, each value what the
# prompt generates.
#
# A table with its own job attached as a partition of a table whose job
# fills the same column (which llm_enrich would have refused, 42710): the
# newer job fails with the reason, the older one fills every row.
#
# A model added to llm.models whose entry asks for a KV cache over the
# memory share fails alone, its error naming the entry's setting (not the
# llm.kv_cache_size GUC, which it does not use), with 53400 for its calls.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LlmTest::new_node('admin_changes', q{
llm.job_naptime = 200ms
llm.batch_window = 4
max_worker_processes = 16
});

sub q1 { return $node->safe_psql('postgres', $_[0]); }

my $ROWS = 60;
LlmTest::job_table($node, $ROWS, q{'Say the number ' || i || ' in words.'});
my $job = q1(q{SELECT llm_enrich('tickets', 'summary', 'body', max_tokens => 8)});
ok($node->poll_query_until('postgres', "SELECT rows_done >= 1 FROM llm_jobs WHERE id = $job"), 'the job writes rows');

q1('ALTER SYSTEM SET llm.enable_jobs = off');
$node->reload;
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'llm job runner'"),
	'the runner left once llm.enable_jobs is off')
  or diag(q1("SELECT * FROM llm_jobs WHERE id = $job"));
ok($node->poll_query_until('postgres',
		"SELECT runner_pid IS NULL AND stalled_since IS NOT NULL FROM llm_jobs WHERE id = $job"),
	'llm_jobs shows the job without a runner, stalled');
like(slurp_file($node->logfile), qr/llm job runner: llm\.enable_jobs is off, the jobs of this database wait/,
	'the runner logged why it left');
my $done = q1("SELECT rows_done FROM llm_jobs WHERE id = $job");
my $writes = q1('SELECT count(*) FROM writes');
cmp_ok($done, '<', $ROWS, "the job is not finished ($done rows done)");
# a few naptimes with the jobs off
sleep 2;
is(q1("SELECT rows_done FROM llm_jobs WHERE id = $job"), $done, 'no row done while llm.enable_jobs is off');
is(q1('SELECT count(*) FROM writes'), $writes, 'no row written while llm.enable_jobs is off');
is(q1("SELECT state FROM llm_jobs WHERE id = $job"), 'running', 'the job still wants to run');

q1('ALTER SYSTEM SET llm.enable_jobs = on');
$node->reload;
LlmTest::wait_job_state($node, $job, 'done', 'once llm.enable_jobs is on again');
is(q1("SELECT rows_done || ':' || rows_skipped FROM llm_jobs WHERE id = $job"), "$ROWS:0", 'every row done, none skipped');
is(q1('SELECT count(*) FROM tickets WHERE summary IS NULL'), '0', 'no row lost');
is(q1('SELECT count(*) FROM (SELECT id FROM writes GROUP BY id HAVING count(*) > 1) d'), '0', 'no row written twice');
is(q1(q{SELECT count(*) FROM tickets WHERE summary IS DISTINCT FROM llm_generate(body, max_tokens => 8)}), '0',
	'each value what the prompt generates');
is(q1("SELECT count(*) FROM llm_job_errors WHERE job_id = $job"), '0', 'no row given up on');

# ---------- one job per column across a partition tree, after ATTACH ----------
# llm_enrich refuses a second job in a partition tree (42710), but a table
# with its own job attached later as a partition of a table with a job on
# the same column would make two jobs fill the same rows, each with its own
# prompt: the newer job fails with the reason, the older one fills the rows.
q1(q{CREATE TABLE p (id int, part int, body text, out text, PRIMARY KEY (id, part)) PARTITION BY LIST (part);
CREATE TABLE p_1 PARTITION OF p FOR VALUES IN (1);
CREATE TABLE x (id int NOT NULL, part int NOT NULL, body text, out text, PRIMARY KEY (id, part));});
my $older = q1(q{SELECT llm_enrich('p', 'out', 'body', max_tokens => 4, mode => 'continuous')});
my $newer = q1(q{SELECT llm_enrich('x', 'out', $$'Reverse: ' || body$$, max_tokens => 4, mode => 'continuous')});
q1(q{ALTER TABLE p ATTACH PARTITION x FOR VALUES IN (2)});
q1(q{INSERT INTO p VALUES (1, 2, 'Say hello'), (2, 1, 'Say goodbye')});
LlmTest::wait_job_state($node, $newer, 'failed', 'the newer job of the tree after the attach');
like(q1("SELECT last_error FROM llm_jobs WHERE id = $newer"),
	qr/^job $older \((queued|running)\) already fills column "out" of table p, in the partition tree of this job's table$/,
	'its last error names the older job');
ok($node->poll_query_until('postgres', q{SELECT count(out) = 2 FROM p}), 'the older job fills every row of the tree');
is(q1(q{SELECT count(*) FROM p WHERE out IS DISTINCT FROM llm_generate(body, max_tokens => 4)}), '0',
	'each row filled by the older job\'s prompt');
is(q1("SELECT state FROM llm_jobs WHERE id = $older"), 'running', 'the older job still runs');
# a once job on a table then attached under a table whose job fills the column
q1(q{CREATE TABLE y (id int NOT NULL, part int NOT NULL, body text, out text, PRIMARY KEY (id, part));
INSERT INTO y SELECT i, 3, 'Say the number ' || i FROM generate_series(1, 4) i;});
my $paused = q1(q{SELECT llm_enrich('y', 'out', $$'Reverse: ' || body$$, max_tokens => 4)});
q1("SELECT llm_job_pause($paused)");
q1(q{ALTER TABLE p ATTACH PARTITION y FOR VALUES IN (3)});
q1("SELECT llm_job_resume($paused)");
LlmTest::wait_job_state($node, $paused, 'failed', 'a resumed job of a table attached into a tree with a job');
is(q1(q{SELECT count(*) FROM y WHERE out IS NOT NULL}), '0', 'it wrote nothing');
q1("SELECT llm_job_cancel($older)");

# ---------- a new llm.models entry with a KV cache over the memory share ----------
my $path = q1("SELECT llm_model_info()->>'model_path'");
q1("ALTER SYSTEM SET llm.models = 'big=$path (kv_cache_size=1TB)'");
$node->reload;
ok($node->poll_query_until('postgres', q{SELECT state = 'failed' FROM llm_models WHERE alias = 'big'}),
	'the entry over the memory share fails');
like(q1(q{SELECT error FROM llm_models WHERE alias = 'big'}),
	qr/^kv_cache_size = '1048576MB' \(llm\.models\) refused: a KV cache of 1048576 MB is more than half of the physical memory/,
	'its error names the entry\'s setting');
like(q1(q{SELECT try_sql($$SELECT llm_generate('hi', max_tokens => 2, model => 'big')$$)}),
	qr/^53400: llm model big is not available: kv_cache_size = '1048576MB' \(llm\.models\) refused/,
	'a call to it fails with 53400 and the reason');
is(q1(q{SELECT state FROM llm_models WHERE alias = 'default'}), 'ready', 'the default model serves');
q1('ALTER SYSTEM RESET llm.models');
$node->reload;

LlmTest::no_crash($node);
$node->stop;
done_testing();
