# Durable jobs on partitioned tables, under TRUNCATE, and the rights of a
# job's prompt.
#
# A continuous job on a partitioned table: PostgreSQL clones its row
# triggers onto every partition (those created or attached later too, in
# their own column layout); writes through the parent and into partitions
# queue their rows, a row moved to another partition is queued under its
# new key and its old key skipped, a detached partition is no longer
# filled and writing into it never fails; a second job on a partition of
# the job's table (or on the parent of a job's partition) is refused.
# A TRUNCATE rolled back loses nothing; a committed one stops the requests
# of the rows in flight and the job counts them skipped as deleted.  A
# prompt calling a function its owner cannot EXECUTE is refused at creation
# (42501); a right revoked later fails the job, shown in llm_jobs.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LlmTest::new_node('jobs_partitions', q{
llm.job_naptime = 200ms
llm.batch_window = 16
max_worker_processes = 16
});

my $MT = 4;
my $prompt = q{'Summarize: ' || body};

sub q1 { return $node->safe_psql('postgres', $_[0]); }

sub wait_state { LlmTest::wait_job_state($node, @_); }

sub wait_until
{
	my ($sql, $what, $job) = @_;
	ok($node->poll_query_until('postgres', $sql), $what)
	  or diag(q1("SELECT * FROM llm_jobs" . ($job ? " WHERE id = $job" : '')));
}

# Every filled row of $table holds what its prompt over its final inputs generates.
sub check_fresh
{
	my ($table, $what) = @_;
	is(q1(qq{SELECT count(*) FROM $table t WHERE t.out IS NOT NULL
	         AND t.out IS DISTINCT FROM llm_generate($prompt, max_tokens => $MT)}),
		'0', "$what: every value generated from the row's final inputs");
}

# ---------- a continuous job on a partitioned table ----------
q1(q{CREATE TABLE pr (id int, part int, body text, out text, PRIMARY KEY (id, part)) PARTITION BY LIST (part);
CREATE TABLE pr_1 PARTITION OF pr FOR VALUES IN (1);});
my $job = q1(qq{SELECT llm_enrich('pr', 'out', \$\$$prompt\$\$, max_tokens => $MT, mode => 'continuous')});
is(q1(q{SELECT try_sql($$INSERT INTO pr VALUES (1, 1, 'Say the number one in words.')$$)}), 'ok',
	'a write into a partition of a continuous job\'s table succeeds');
is(q1(q{SELECT try_sql($$INSERT INTO pr_1 VALUES (2, 1, 'Say the number two in words.')$$)}), 'ok',
	'a write into the partition itself succeeds');

# a partition created after the job, and a table of another column layout attached after it
q1(q{CREATE TABLE pr_2 PARTITION OF pr FOR VALUES IN (2);
CREATE TABLE pr_3 (out text, junk int, body text, part int NOT NULL, id int NOT NULL);
ALTER TABLE pr_3 DROP COLUMN junk;
ALTER TABLE pr ATTACH PARTITION pr_3 FOR VALUES IN (3);
INSERT INTO pr VALUES (3, 2, 'Say the number three in words.'), (4, 3, 'Say the number four in words.');
INSERT INTO pr_3 (id, part, body) VALUES (5, 3, 'Say the number five in words.');});
wait_until(q{SELECT count(*) = 5 AND count(out) = 5 FROM pr}, 'every row of every partition filled', $job);
is(q1(q{SELECT count(*) FROM pr_3 WHERE out IS NOT NULL}), '2', 'the attached partition of another layout filled');
check_fresh('pr', 'continuous job on partitions');

# an input changed in the attached partition: its output cleared by the BEFORE trigger, generated again
q1(q{UPDATE pr SET body = 'Say the number forty in words.' WHERE id = 4});
wait_until(q{SELECT out IS NOT NULL FROM pr WHERE id = 4}, 'a changed row of the attached partition filled again', $job);
check_fresh('pr', 'changed row');

# ---------- a row moving to another partition ----------
# The job paused: the row's old and new keys are both queued; resumed, the
# old one is skipped (gone), the row is filled under its new key.
q1("SELECT llm_job_pause($job)");
q1(q{INSERT INTO pr VALUES (6, 1, 'Say the number six in words.');
UPDATE pr SET part = 2 WHERE id = 6;});
is(q1("SELECT rows_queued FROM llm_jobs WHERE id = $job"), '2', 'moved row queued under its old and its new key');
q1("SELECT llm_job_resume($job)");
wait_until("SELECT rows_queued = 0 FROM llm_jobs WHERE id = $job", 'the moved row\'s keys done', $job);
is(q1(q{SELECT tableoid::regclass || ':' || (out IS NOT NULL) FROM pr WHERE id = 6}), 'pr_2:true',
	'the moved row filled in its new partition');
is(q1("SELECT skipped_by_reason->>'deleted' FROM llm_jobs WHERE id = $job"), '1',
	'its old key skipped as deleted');
check_fresh('pr', 'moved row');

# A row moved right after its insert, the job running: filled under its new key.
q1(q{INSERT INTO pr VALUES (7, 1, 'Count from one to one hundred in words.')});
q1(q{UPDATE pr SET part = 3 WHERE id = 7});
wait_until(q{SELECT out IS NOT NULL FROM pr WHERE id = 7 AND part = 3}, 'a row moved while the job runs filled under its new key', $job);
wait_until("SELECT rows_queued = 0 FROM llm_jobs WHERE id = $job", 'nothing left queued', $job);
check_fresh('pr', 'row moved in flight');

# A row moved while its request runs: the request is aborted (its result
# would be for a key that no longer exists), the row is generated under its
# new key.
q1(q{CREATE TABLE mv (id int, part int, body text, out text, PRIMARY KEY (id, part)) PARTITION BY LIST (part);
CREATE TABLE mv_1 PARTITION OF mv FOR VALUES IN (1);
CREATE TABLE mv_2 PARTITION OF mv FOR VALUES IN (2);});
my $mv = q1(q{SELECT llm_enrich('mv', 'out', 'body', max_tokens => 300, mode => 'continuous')});
my $aborted = q1('SELECT requests_aborted FROM llm_stat');
# (a prompt the model answers at length: generating, it is still running when the row moves)
q1(q{INSERT INTO mv VALUES (1, 1, 'Write a very long story about a cat named 1.')});
wait_until("SELECT rows_in_flight = 1 FROM llm_jobs WHERE id = $mv", 'the row in flight', $mv);
wait_until(q{SELECT requests_running >= 1 FROM llm_stat}, 'its request generating');
q1(q{UPDATE mv SET part = 2 WHERE id = 1});
wait_until(q{SELECT out IS NOT NULL FROM mv WHERE id = 1 AND part = 2}, 'the row moved in flight filled under its new key', $mv);
LlmTest::wait_idle($node, 'after the move');
cmp_ok(q1('SELECT requests_aborted FROM llm_stat'), '>', $aborted, 'the request of its old key aborted');
is(q1("SELECT rows_done || ':' || (skipped_by_reason->>'deleted') FROM llm_jobs WHERE id = $mv"), '1:1',
	'written once, under its new key; its old key skipped as deleted');
q1("SELECT llm_job_cancel($mv)");

# ---------- a detached partition ----------
q1("SELECT llm_job_pause($job)");
q1(q{INSERT INTO pr VALUES (8, 2, 'Say the number eight in words.')});
my $deleted = q1("SELECT skipped_by_reason->>'deleted' FROM llm_jobs WHERE id = $job");
q1(q{ALTER TABLE pr DETACH PARTITION pr_2});
is(q1(q{SELECT count(*) FROM pg_trigger WHERE tgrelid = 'pr_2'::regclass AND tgname LIKE 'llm_job%'}), '0',
	'the detached partition lost the job\'s cloned triggers');
is(q1(q{SELECT try_sql($$INSERT INTO pr_2 VALUES (9, 2, 'Say the number nine in words.')$$)}), 'ok',
	'a write into the detached partition succeeds');
is(q1(q{SELECT try_sql($$UPDATE pr_2 SET body = body || '!' WHERE id = 3$$)}), 'ok',
	'an update of the detached partition succeeds');
q1("SELECT llm_job_resume($job)");
wait_until("SELECT rows_queued = 0 FROM llm_jobs WHERE id = $job", 'the queue of the detached rows done', $job);
is(q1(q{SELECT string_agg(id || ':' || (out IS NULL), ',' ORDER BY id) FROM pr_2 WHERE id IN (8, 9)}),
	'8:true,9:true', 'rows of the detached partition not filled');
cmp_ok(q1("SELECT skipped_by_reason->>'deleted' FROM llm_jobs WHERE id = $job"), '>', $deleted,
	'the row queued before the detach skipped as deleted');
is(q1(q{SELECT try_sql($$INSERT INTO pr VALUES (10, 1, 'Say the number ten in words.')$$)}), 'ok',
	'the job still fills its table');
wait_until(q{SELECT out IS NOT NULL FROM pr WHERE id = 10}, 'a row of a remaining partition filled', $job);

# ---------- one job per column across a partition tree ----------
like(q1(qq{SELECT try_sql(\$\$SELECT llm_enrich('pr_1', 'out', 'body', max_tokens => $MT)\$\$)}),
	qr/^42710: job $job \((running|queued)\) already fills column "out" of table pr$/,
	'a second job on a partition of a job\'s table refused (42710)');
q1(q{CREATE TABLE qr (id int, part int, body text, out text, PRIMARY KEY (id, part)) PARTITION BY LIST (part);
CREATE TABLE qr_1 PARTITION OF qr FOR VALUES IN (1) PARTITION BY LIST (id);
CREATE TABLE qr_1_1 PARTITION OF qr_1 FOR VALUES IN (1);
INSERT INTO qr VALUES (1, 1, 'Say the number one in words.');});
q1(qq{SELECT llm_job_pause(llm_enrich('qr_1_1', 'out', \$\$$prompt\$\$, max_tokens => $MT))});
my $leaf_job = q1(q{SELECT id FROM llm_jobs WHERE "table" = 'qr_1_1'::regclass});
like(q1(qq{SELECT try_sql(\$\$SELECT llm_enrich('qr', 'out', 'body', max_tokens => $MT)\$\$)}),
	qr/^42710: job $leaf_job \(paused\) already fills column "out" of table qr_1_1$/,
	'a job on the root of a job\'s partition refused (42710)');
is(q1(qq{SELECT try_sql(\$\$SELECT llm_enrich('qr_1_1', 'body', 'id::text', max_tokens => $MT)\$\$)}), 'ok',
	'another column of the same partition is free');
q1("SELECT llm_job_cancel(id) FROM llm_jobs WHERE \"table\" = 'qr_1_1'::regclass AND state NOT IN ('done', 'cancelled')");

# ---------- a once job on the partitioned table ----------
q1("SELECT llm_job_cancel($job)");
q1(q{UPDATE pr SET out = NULL});
my $once = q1(qq{SELECT llm_enrich('pr', 'out', \$\$$prompt\$\$, max_tokens => $MT)});
wait_state($once, 'done', 'once job on a partitioned table');
is(q1(q{SELECT count(*) FROM pr WHERE out IS NULL}), '0', 'every row of every partition filled');
check_fresh('pr', 'once job');

# ---------- TRUNCATE ----------
q1(q{CREATE TABLE tr (id int PRIMARY KEY, body text, out text);
INSERT INTO tr SELECT i, 'Say the number ' || i || ' in words.' FROM generate_series(1, 24) i;});
$job = q1(qq{SELECT llm_enrich('tr', 'out', \$\$$prompt\$\$, max_tokens => $MT)});
wait_until("SELECT rows_done >= 1 FROM llm_jobs WHERE id = $job", 'truncated job running', $job);
my $s = $node->background_psql('postgres');
$s->query_safe('BEGIN');
$s->query_safe('TRUNCATE tr');
# a few naptimes with the TRUNCATE uncommitted
sleep 2;
$s->query_safe('ROLLBACK');
$s->quit;
wait_state($job, 'done', 'job under a rolled back TRUNCATE');
is(q1("SELECT rows_done || ':' || rows_skipped FROM llm_jobs WHERE id = $job"), '24:0',
	'a rolled back TRUNCATE loses nothing');
is(q1(q{SELECT count(*) FROM tr WHERE out IS NULL}), '0', 'every row filled');

# rows generating long when the TRUNCATE commits: their requests are aborted
q1(q{UPDATE tr SET out = NULL, body = 'Write a very long story about a cat named ' || id || '.';
INSERT INTO tr SELECT i, 'Write a very long story about a cat named ' || i || '.' FROM generate_series(25, 64) i;});
$aborted = q1('SELECT requests_aborted FROM llm_stat');
$job = q1(qq{SELECT llm_enrich('tr', 'out', 'body', max_tokens => 400)});
wait_until(q{SELECT requests_running >= 1 FROM llm_stat}, 'rows of the job generating');
q1('TRUNCATE tr');
wait_state($job, 'done', 'job after a committed TRUNCATE');
# the llm worker takes the aborts after the step it is in
LlmTest::wait_idle($node, 'after the TRUNCATE');
cmp_ok(q1('SELECT requests_aborted FROM llm_stat'), '>', $aborted,
	'the requests of truncated rows were aborted, not generated to the end')
  or diag(q1("SELECT * FROM llm_jobs WHERE id = $job") . "\n"
	. q1('SELECT outcome, completion_tokens, finished_at FROM llm_recent_requests() ORDER BY seq DESC LIMIT 30'));
is(q1("SELECT rows_done + (skipped_by_reason->>'deleted')::int FROM llm_jobs WHERE id = $job"), '64',
	'every row either written before the TRUNCATE or skipped as deleted');
cmp_ok(q1("SELECT (skipped_by_reason->>'deleted')::int FROM llm_jobs WHERE id = $job"), '>', 0,
	'the truncated rows are counted as deleted');
is(q1("SELECT rows_skipped = (skipped_by_reason->>'deleted')::int FROM llm_jobs WHERE id = $job"), 't',
	'rows_skipped is the sum of its reasons');

# the other reasons
q1(q{INSERT INTO tr SELECT i, 'Say the number ' || i || ' in words.' FROM generate_series(1, 4) i});
q1(q{SELECT llm_job_pause(llm_enrich('tr', 'out', $$CASE WHEN id = 3 THEN NULL ELSE 'Summarize: ' || body END$$,
                                     where_clause => 'id <> 4 OR body NOT LIKE $q$%!$q$', max_tokens => 4))});
$job = q1(q{SELECT max(id) FROM llm_jobs WHERE "table" = 'tr'::regclass});
q1(q{UPDATE tr SET out = 'by hand' WHERE id = 1; DELETE FROM tr WHERE id = 2; UPDATE tr SET body = body || '!' WHERE id = 4});
q1("SELECT llm_job_resume($job)");
wait_state($job, 'done', 'job skipping rows for every reason');
is(q1(qq{SELECT skipped_by_reason = '{"filled": 1, "deleted": 1, "where_false": 1, "prompt_null": 1}'
         FROM llm_jobs WHERE id = $job}), 't', 'skipped rows counted by reason')
  or diag(q1("SELECT skipped_by_reason FROM llm_jobs WHERE id = $job"));

# ---------- EXECUTE on the prompt's functions ----------
q1(q{CREATE ROLE alice LOGIN;
GRANT llm_user TO alice;
CREATE TABLE ex (id int PRIMARY KEY, body text, out text);
INSERT INTO ex SELECT i, 'Say the number ' || i || ' in words.' FROM generate_series(1, 4) i;
GRANT SELECT, UPDATE ON ex TO alice;
CREATE FUNCTION secret(t text) RETURNS text LANGUAGE sql IMMUTABLE AS $$SELECT 'Summarize: ' || t$$;
REVOKE EXECUTE ON FUNCTION secret(text) FROM PUBLIC;});
like(q1(qq{SET ROLE alice; SELECT try_sql(\$\$SELECT llm_enrich('ex', 'out', 'secret(body)', max_tokens => $MT)\$\$)}),
	qr/^42501: permission denied for function secret$/, 'a prompt calling a function its owner cannot EXECUTE refused');
like(q1(qq{SET ROLE alice; SELECT try_sql(\$\$SELECT llm_enrich('ex', 'out', 'body', max_tokens => $MT,
                                                               where_clause => 'secret(body) IS NOT NULL')\$\$)}),
	qr/^42501: permission denied for function secret$/, 'a where clause calling it refused');
like(q1(qq{SET ROLE alice; SELECT try_sql(\$\$SELECT llm_enrich('ex', 'out', 'secret(\$s\$x\$s\$)', max_tokens => $MT)\$\$)}),
	qr/^42501: permission denied for function secret$/, 'a call the planner folds refused');
is(q1(q{SELECT count(*) FROM llm_jobs WHERE "table" = 'ex'::regclass}), '0', 'no job recorded');

q1(q{GRANT EXECUTE ON FUNCTION secret(text) TO alice});
# created paused: no row runs before the right is revoked
q1(qq{SET ROLE alice; SELECT llm_job_pause(llm_enrich('ex', 'out', 'secret(body)', max_tokens => $MT))});
$job = q1(qq{SELECT id FROM llm_jobs WHERE "table" = 'ex'::regclass});
q1(q{REVOKE EXECUTE ON FUNCTION secret(text) FROM alice});
q1("SELECT llm_job_resume($job)");
wait_state($job, 'failed', 'job whose role lost EXECUTE');
like(q1("SELECT last_error FROM llm_jobs WHERE id = $job"), qr/permission denied for function secret/,
	'the lost right is the job\'s last error');
is(q1("SELECT count(*) FROM llm_job_errors WHERE job_id = $job"), '0', 'no row given up on for it');
q1(q{GRANT EXECUTE ON FUNCTION secret(text) TO alice});
q1("SELECT llm_job_resume($job)");
wait_state($job, 'done', 'job resumed once the right is back');
is(q1(q{SELECT count(*) FROM ex WHERE out IS DISTINCT FROM llm_generate('Summarize: ' || body, max_tokens => 4)}), '0',
	'every row filled once the right is back');

LlmTest::no_crash($node);
$node->stop;
done_testing();
