# Durable enrichment jobs (llm_enrich) under faults.  Every write of a
# job's target column is recorded by a trigger; after each fault the job
# resumes by itself and the record shows 0 rows lost, 0 written twice and
# 0 stale results: each stored value equals what the prompt over the row's
# final inputs generates now (greedy generation is batch-invariant, so the
# same prompt gives the same text alone or in any batch).  A job on a
# second model (llm.models, model =>) runs there, in the batch class, and
# fails, not its rows, when its model leaves the list.  Jobs with choices
# and json_schema killed mid-job resume under the same grammar.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LlmTest::new_node('jobs', q{
llm.job_naptime = 200ms
llm.batch_window = 8
max_worker_processes = 16
});

my $N = 32;
LlmTest::job_table($node, $N, q{'Say the number ' || i || ' in words.'});

my $MT = 4;
my $enrich = "SELECT llm_enrich('tickets', 'summary', \$\$'Summarize: ' || body\$\$, max_tokens => $MT)";

sub q1 { return $node->safe_psql('postgres', $_[0]); }

sub wait_state { LlmTest::wait_job_state($node, @_); }

sub wait_rows_done
{
	my ($id, $n) = @_;
	$node->poll_query_until('postgres', "SELECT rows_done >= $n FROM llm_jobs WHERE id = $id");
}

sub reset_table
{
	q1('UPDATE tickets SET summary = NULL; TRUNCATE writes');
}

# 0 lost, 0 doubled, 0 stale over table tickets
sub check_writes
{
	my ($what, $expect_null) = @_;
	is(q1('SELECT count(*) FROM tickets WHERE summary IS NULL'), $expect_null // '0', "$what: 0 rows lost");
	is(q1('SELECT count(*) FROM (SELECT id, body FROM writes GROUP BY id, body HAVING count(*) > 1) d'),
		'0', "$what: 0 rows written twice");
	is(q1(qq{SELECT count(*) FROM tickets t WHERE t.summary IS NOT NULL
	         AND t.summary IS DISTINCT FROM llm_generate('Summarize: ' || t.body, max_tokens => $MT)}),
		'0', "$what: 0 stale results");
	is(q1(q{SELECT count(*) FROM writes w JOIN tickets t USING (id) WHERE w.body <> t.body
	        AND w.at > (SELECT max(at) FROM writes w2 WHERE w2.id = w.id AND w2.body = t.body)}),
		'0', "$what: no write from old inputs after the last write from the final ones");
}

# ---------- a plain run ----------
my $job = q1($enrich);
ok($job > 0, "job $job created");
wait_state($job, 'done', 'plain run');
check_writes('plain run');
is(q1("SELECT rows_total, rows_done, rows_failed, rows_in_flight FROM llm_jobs WHERE id = $job"), "$N|$N|0|0",
	"rows total / done / failed / in flight");
cmp_ok(q1("SELECT tokens_out FROM llm_jobs WHERE id = $job"), '>', 0, 'tokens counted');

# ---------- refusals ----------
reset_table();
$job = q1($enrich);
q1("SELECT llm_job_pause($job)");
like(q1(qq{SELECT try_sql(\$q\$$enrich\$q\$)}), qr/^42710: job $job \(\w+\) already fills column "summary"/,
	'a second job on the same column is refused');
q1("SELECT llm_job_cancel($job)");
is(q1("SELECT state FROM llm_jobs WHERE id = $job"), 'cancelled', 'cancelled');
is(q1("SELECT count(*) FROM llm_job_queue WHERE job_id = $job"), '0', 'a cancelled job has no queue');
q1('CREATE TABLE nopk (id int, body text, summary text)');
like(q1(q{SELECT try_sql($$SELECT llm_enrich('nopk', 'summary', 'body')$$)}),
	qr/^55000: table "nopk" has no primary key/, 'a table without a primary key is refused');

# ---------- the runner killed mid-job ----------
reset_table();
$job = q1($enrich);
wait_rows_done($job, 8);
my $runner = q1("SELECT pid FROM pg_stat_activity WHERE backend_type = 'llm job runner'");
ok($runner > 0, "runner runs (pid $runner)");
q1("SELECT pg_terminate_backend($runner)");
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'llm job runner' AND pid <> $runner"),
	'a new runner started');
wait_state($job, 'done', 'after the runner was killed');
check_writes('runner killed');

# ---------- structured jobs killed mid-job: resumed under the same grammar ----------
q1('ALTER TABLE tickets ADD COLUMN label text, ADD COLUMN info jsonb');
my $labels = "ARRAY['one', 'two', 'three', 'other']";
my $schema = q{'{"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 99},
  "even": {"type": "boolean"}}, "required": ["n", "even"]}'};
my $jl = q1("SELECT llm_enrich('tickets', 'label', \$\$'Classify: ' || body\$\$, max_tokens => 8, choices => $labels)");
my $jj = q1("SELECT llm_enrich('tickets', 'info', \$\$'Describe: ' || body\$\$, max_tokens => 24, json_schema => $schema)");
wait_rows_done($jl, 4);
$runner = q1("SELECT pid FROM pg_stat_activity WHERE backend_type = 'llm job runner'");
q1("SELECT pg_terminate_backend($runner)");
my $left = q1("SELECT (SELECT count(*) FROM tickets WHERE label IS NULL) + (SELECT count(*) FROM tickets WHERE info IS NULL)");
cmp_ok($left, '>', 0, "rows left for the next runner ($left)");
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'llm job runner' AND pid <> $runner"),
	'a new runner started');
wait_state($jl, 'done', 'the choices job after the runner was killed');
wait_state($jj, 'done', 'the json_schema job after the runner was killed');
is(q1("SELECT count(*) FROM tickets WHERE label IS NULL OR NOT label = ANY ($labels)"), '0',
	'every label is one of the choices');
is(q1(qq{SELECT count(*) FROM tickets
         WHERE label IS DISTINCT FROM llm_generate('Classify: ' || body, max_tokens => 8, choices => $labels)}),
	'0', 'each label is what llm_generate with the same choices gives');
is(q1(q{SELECT count(*) FROM tickets WHERE info IS NULL OR jsonb_typeof(info -> 'n') <> 'number'
        OR jsonb_typeof(info -> 'even') <> 'boolean' OR (SELECT count(*) FROM jsonb_object_keys(info)) <> 2
        OR (info ->> 'n')::numeric NOT BETWEEN 0 AND 99 OR (info ->> 'n')::numeric <> round((info ->> 'n')::numeric)}),
	'0', 'every info is valid against the schema');
is(q1(qq{SELECT count(*) FROM tickets
         WHERE info IS DISTINCT FROM llm_generate('Describe: ' || body, max_tokens => 24, json_schema => $schema)::jsonb}),
	'0', 'each info is what llm_generate with the same schema gives');

# priority => 'interactive' (the creator may: llm.max_priority) puts a job's requests in that class
q1('UPDATE tickets SET label = NULL');
LlmTest::wait_idle($node, 'before the interactive job');
my ($b0, $i0) = split /\|/, q1(q{SELECT coalesce(sum(batch_requests), 0),
	coalesce(sum(interactive_requests), 0) FROM llm_usage WHERE role = current_user});
$job = q1("SELECT llm_enrich('tickets', 'label', \$\$'Classify: ' || body\$\$, max_tokens => 8, choices => $labels,
	priority => 'interactive')");
wait_state($job, 'done', 'the interactive job');
ok($node->poll_query_until('postgres',
		"SELECT coalesce(sum(interactive_requests), 0) >= $i0 + $N FROM llm_usage WHERE role = current_user"),
	'priority => interactive: the job ran in the interactive class');
is(q1("SELECT coalesce(sum(batch_requests), 0) - $b0 FROM llm_usage WHERE role = current_user"), '0',
	'none of it in the batch class');
q1('ALTER TABLE tickets DROP COLUMN label, DROP COLUMN info');

# ---------- the llm worker killed mid-job ----------
reset_table();
$job = q1($enrich);
wait_rows_done($job, 8);
q1('SELECT pg_terminate_backend(worker_pid) FROM llm_stat');
wait_state($job, 'done', 'after the llm worker was killed');
check_writes('llm worker killed');
is(q1("SELECT rows_failed FROM llm_jobs WHERE id = $job"), '0', 'lost requests are no failed rows');

# ---------- immediate shutdown and restart ----------
reset_table();
$job = q1($enrich);
wait_rows_done($job, 8);
$node->stop('immediate');
$node->start;
LlmTest::wait_ready($node);
wait_state($job, 'done', 'after an immediate shutdown and restart');
check_writes('immediate restart');

# ---------- rows updated while their results are in flight ----------
reset_table();
q1('ALTER TABLE tickets ADD COLUMN round int DEFAULT 0');
$job = q1($enrich);
my $requeued = 0;
for my $round (1 .. 20)
{
	$node->poll_query_until('postgres',
		"SELECT count(*) > 0 FROM llm_job_queue WHERE job_id = $job AND claimed_by IS NOT NULL")
	  or last;
	q1(qq{UPDATE tickets SET body = body || ' Again.', round = round + 1 WHERE summary IS NULL AND id IN
	      (SELECT key[1]::int FROM llm_job_queue WHERE job_id = $job AND claimed_by IS NOT NULL)});
	$requeued = q1("SELECT rows_requeued FROM llm_job WHERE id = $job");
	last if $requeued > 0 && $round >= 3;
	sleep 0.2;
}
wait_state($job, 'done', 'with rows updated in flight');
cmp_ok(q1("SELECT rows_requeued FROM llm_job WHERE id = $job"), '>', 0,
	'results of changed rows were not written: the rows were generated again');
check_writes('rows updated in flight');
q1(q{UPDATE tickets SET body = 'Say the number ' || id || ' in words.'});
q1('ALTER TABLE tickets DROP COLUMN round');

# ---------- poison rows: one fails evaluating, one fails writing ----------
reset_table();
q1('ALTER TABLE tickets ADD CONSTRAINT not_17 CHECK (id <> 17 OR summary IS NULL)');
$job = q1(qq{SELECT llm_enrich('tickets', 'summary',
	\$\$'Summarize: ' || body || CASE WHEN id = 13 THEN (1 / (id - 13))::text ELSE '' END\$\$,
	max_tokens => $MT, max_attempts => 2)});
wait_state($job, 'done', 'with two poison rows');
is(q1("SELECT rows_done, rows_failed FROM llm_jobs WHERE id = $job"), ($N - 2) . '|2', 'two rows failed');
is(q1("SELECT string_agg(key[1] || ':' || attempts || ':' || sqlstate, ',' ORDER BY key[1]::int) FROM llm_job_errors WHERE job_id = $job"),
	'13:2:22012,17:2:23514', 'each failed row recorded with its attempts and SQLSTATE');
check_writes('poison rows', '2');
q1('ALTER TABLE tickets DROP CONSTRAINT not_17');
is(q1("SELECT llm_job_retry_failed($job)"), '2', 'retry_failed queues the two rows');
wait_state($job, 'done', 'retried');
is(q1("SELECT rows_failed FROM llm_jobs WHERE id = $job"), '1', 'the evaluation poison fails again, the other is written');
check_writes('after retry', '1');

# ---------- pause, resume ----------
reset_table();
$job = q1($enrich);
wait_rows_done($job, 4);
q1("SELECT llm_job_pause($job)");
ok($node->poll_query_until('postgres',
		"SELECT rows_in_flight = 0 FROM llm_jobs WHERE id = $job"), 'paused: nothing in flight');
my $done = q1("SELECT rows_done FROM llm_jobs WHERE id = $job");
sleep 1;
is(q1("SELECT rows_done FROM llm_jobs WHERE id = $job"), $done, 'paused: no progress');
q1("SELECT llm_job_resume($job)");
wait_state($job, 'done', 'resumed');
check_writes('paused and resumed');

# ---------- DROP COLUMN and DROP TABLE of a job's target ----------
q1("CREATE TABLE t2 AS SELECT i AS id, 'Say ' || i || '.' AS body, NULL::text AS s FROM generate_series(1, 200) i");
q1('ALTER TABLE t2 ADD PRIMARY KEY (id)');
$job = q1("SELECT llm_enrich('t2', 's', 'body', max_tokens => 16)");
wait_rows_done($job, 2);
q1('ALTER TABLE t2 DROP COLUMN s');
wait_state($job, 'failed', 'its output column dropped');
like(q1("SELECT last_error FROM llm_jobs WHERE id = $job"), qr/column "s"/, 'last error names the column');
q1('ALTER TABLE t2 ADD COLUMN s text');
like(q1(q{SELECT try_sql($$SELECT llm_enrich('t2', 's', 'body')$$)}), qr/^42710: job $job \(failed\) already fills/,
	'a failed job still holds its column');
q1("SELECT llm_job_resume($job)");
my $before = q1("SELECT rows_done FROM llm_job WHERE id = $job");
ok($node->poll_query_until('postgres', "SELECT rows_done > $before FROM llm_job WHERE id = $job"),
	'a failed job resumed once its column is back');
q1('DROP TABLE t2');
wait_state($job, 'failed', 'its table dropped');
like(q1("SELECT last_error FROM llm_job WHERE id = $job"), qr/no longer exists|does not exist/, 'last error: the table is gone');

# ---------- the job's role dropped ----------
q1(q{CREATE ROLE jobber LOGIN; GRANT llm_user TO jobber;
     CREATE TABLE t3 AS SELECT i AS id, 'Say ' || i || '.' AS body, NULL::text AS s FROM generate_series(1, 200) i;
     ALTER TABLE t3 ADD PRIMARY KEY (id); GRANT SELECT, UPDATE ON t3 TO jobber});
$job = $node->safe_psql('postgres', "SELECT llm_enrich('t3', 's', 'body', max_tokens => 16)",
	extra_params => ['-U', 'jobber']);
is(q1("SELECT owner FROM llm_jobs WHERE id = $job"), 'jobber', 'the job runs as its creator');
wait_rows_done($job, 2);
is(q1("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'llm job runner'"), '1', 'one runner');
q1('DROP OWNED BY jobber; DROP ROLE jobber');
wait_state($job, 'failed', 'its role dropped');
q1('DROP TABLE t3');

# ---------- a job on a second model (llm.models) ----------
my $smol = q1("SELECT boot_val FROM pg_settings WHERE name = 'llm.model'");
my $small = "small=$smol (context_length=512, kv_cache_size=64MB)";

sub set_models
{
	q1("ALTER SYSTEM SET llm.models = '$_[0]'");
	$node->reload;
}
set_models($small);
ok($node->poll_query_until('postgres', "SELECT state = 'ready' FROM llm_models WHERE alias = 'small'"),
	'a second model, small, is ready');
reset_table();
LlmTest::wait_idle($node, 'before the job on small');
my ($small_before, $default_before) = split /\|/, q1(q{SELECT
	(SELECT requests_finished FROM llm_models WHERE alias = 'small'),
	(SELECT requests_finished FROM llm_models WHERE alias = 'default')});
my ($batch_before, $interactive_before) = split /\|/, q1(q{SELECT coalesce(sum(batch_requests), 0),
	coalesce(sum(interactive_requests), 0) FROM llm_usage WHERE role = current_user});
$job = q1("SELECT llm_enrich('tickets', 'summary', \$\$'Summarize: ' || body\$\$, max_tokens => $MT, model => 'small')");
wait_state($job, 'done', 'on the second model');
ok($node->poll_query_until('postgres',
		"SELECT requests_finished >= $small_before + $N FROM llm_models WHERE alias = 'small'"),
	"the job's requests went to small");
is(q1("SELECT requests_finished - $default_before FROM llm_models WHERE alias = 'default'"), '0',
	'none went to the default model');
ok($node->poll_query_until('postgres',
		"SELECT coalesce(sum(batch_requests), 0) >= $batch_before + $N FROM llm_usage WHERE role = current_user"),
	'the job ran in the batch class');
is(q1("SELECT coalesce(sum(interactive_requests), 0) - $interactive_before FROM llm_usage WHERE role = current_user"),
	'0', 'none of it in the interactive class');
is(q1(qq{SELECT count(*) FROM tickets
         WHERE summary IS DISTINCT FROM llm_generate('Summarize: ' || body, max_tokens => $MT, model => 'small')}),
	'0', 'each row holds what llm_generate on small gives');

# its model removed from llm.models: the job fails (no row is given up on), and resumes once it is back
q1("CREATE TABLE t4 AS SELECT i AS id, 'Say ' || i || '.' AS body, NULL::text AS s FROM generate_series(1, 200) i");
q1('ALTER TABLE t4 ADD PRIMARY KEY (id)');
$job = q1("SELECT llm_enrich('t4', 's', 'body', max_tokens => 16, model => 'small')");
wait_rows_done($job, 2);
set_models('');
wait_state($job, 'failed', 'its model removed from llm.models');
like(q1("SELECT last_error FROM llm_jobs WHERE id = $job"), qr/unknown model "small"/, 'last error names the model');
is(q1("SELECT count(*) FROM llm_job_errors WHERE job_id = $job"), '0', 'no row was given up on');
set_models($small);
ok($node->poll_query_until('postgres', "SELECT state = 'ready' FROM llm_models WHERE alias = 'small'"),
	'small is back');
my $t4_done = q1("SELECT rows_done FROM llm_job WHERE id = $job");
q1("SELECT llm_job_resume($job)");
ok($node->poll_query_until('postgres', "SELECT rows_done > $t4_done FROM llm_job WHERE id = $job"),
	'the job resumed on small');
q1("SELECT llm_job_cancel($job)");
q1('DROP TABLE t4');
q1('ALTER SYSTEM RESET llm.models');
$node->reload;
ok($node->poll_query_until('postgres', 'SELECT count(*) = 1 FROM llm_models'), 'back to the default model alone');

# ---------- a second database with jobs gets its own runner ----------
q1('CREATE DATABASE other');
$node->safe_psql('other', q{CREATE EXTENSION llm;
CREATE TABLE o (id int PRIMARY KEY, body text, s text);
INSERT INTO o SELECT i, 'Say ' || i || '.' FROM generate_series(1, 10) i});
reset_table();
my $jobo = $node->safe_psql('other', "SELECT llm_enrich('o', 's', 'body', max_tokens => 4)");
$job = q1($enrich);
ok($node->poll_query_until('other', "SELECT state = 'done' FROM llm_jobs WHERE id = $jobo"),
	'the other database\'s job done');
wait_state($job, 'done', 'beside the other database\'s job');
is($node->safe_psql('other', 'SELECT count(*) FROM o WHERE s IS NULL'), '0', 'other database: every row filled');
check_writes('two databases');

LlmTest::no_crash($node);
$node->stop;
done_testing();
