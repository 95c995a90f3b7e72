# Durable jobs write every row finished in one pass together (one
# subtransaction, one statement per step).  A session holds every row of
# the target locked while the job's results arrive, so they pile up in the
# runner and are written together once it commits; meanwhile it changes
# rows under the job.  The batch must keep each row's rules: a row updated
# in flight is generated again, not written; a row deleted or filled by
# someone else is skipped; a row whose write fails (a CHECK) or whose
# prompt fails when it is evaluated again is an attempt of that row alone,
# the others are written.  A trigger records every write: 0 lost, 0 written
# twice, 0 stale.  Then the class ceiling: a job created in the interactive
# class by a role whose llm.max_priority is lowered afterwards runs in the
# batch class, with PostgreSQL's precedence of role and database settings.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LlmTest::new_node('jobs_batch', q{
llm.job_naptime = 200ms
llm.batch_window = 32
max_worker_processes = 16
});

my $N = 16;
my $MT = 4;
LlmTest::job_table($node, $N, q{'Say the number ' || i || ' in words.'});
$node->safe_psql('postgres', qq{
-- rows filled per UPDATE statement: more than one only when rows are written together
CREATE TABLE statements (filled int);
CREATE FUNCTION record_statement() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN
	INSERT INTO statements SELECT count(*) FROM filled f JOIN gone g USING (id)
	WHERE f.summary IS NOT NULL AND g.summary IS NULL;
	RETURN NULL;
END \$\$;
CREATE TRIGGER record_statement AFTER UPDATE ON tickets REFERENCING NEW TABLE AS filled OLD TABLE AS gone
	FOR EACH STATEMENT EXECUTE FUNCTION record_statement();
});

sub q1 { return $node->safe_psql('postgres', $_[0]); }

sub wait_state { LlmTest::wait_job_state($node, @_); }

# A session holding every row of tickets (FOR UPDATE) until release_rows.
sub hold_rows
{
	my $s = $node->background_psql('postgres');
	$s->query_safe('BEGIN');
	is($s->query_safe('SELECT count(*) FROM (SELECT id FROM tickets FOR UPDATE) held'), $N, 'every row held');
	return $s;
}

# Run $sql in the holding session, commit, end it.
sub release_rows
{
	my ($s, $sql) = @_;
	$s->query_safe($sql);
	$s->query_safe('COMMIT');
	$s->quit;
}

# Wait until the llm worker finished $n more requests than $before and the runner took them.
sub wait_results
{
	my ($before, $n) = @_;
	ok($node->poll_query_until('postgres', "SELECT requests_finished >= $before + $n FROM llm_stat"),
		"$n results arrived while the rows were held");
	sleep 1;
}

# 0 lost, 0 doubled, 0 stale over the rows of tickets the job should fill
sub check_writes
{
	my ($what, $prompt, $expect_null) = @_;
	is(q1('SELECT count(*) FROM tickets WHERE summary IS NULL'), $expect_null // '0', "$what: 0 rows lost");
	is(q1('SELECT count(*) FROM (SELECT id, body FROM writes GROUP BY id, body HAVING count(*) > 1) d'),
		'0', "$what: 0 rows written twice");
	is(q1(qq{SELECT count(*) FROM tickets t WHERE t.summary IS NOT NULL AND t.summary <> 'by hand'
	         AND t.summary IS DISTINCT FROM llm_generate($prompt, max_tokens => $MT)}),
		'0', "$what: 0 stale results");
	is(q1(q{SELECT count(*) FROM writes w JOIN tickets t USING (id) WHERE w.body <> t.body}),
		'0', "$what: nothing written from inputs a row no longer has");
}

# ---------- a batch with rows changed, deleted and filled under it ----------
my $prompt = q{'Summarize: ' || body};
my $before = q1('SELECT requests_finished FROM llm_stat');
my $h = hold_rows();
my $job = q1("SELECT llm_enrich('tickets', 'summary', \$\$$prompt\$\$, max_tokens => $MT)");
wait_results($before, $N);
is(q1('SELECT count(*) FROM writes'), '0', 'nothing written while the rows are held');
release_rows($h, q{UPDATE tickets SET body = 'Say the number five hundred in words.' WHERE id = 5;
DELETE FROM tickets WHERE id = 6;
UPDATE tickets SET summary = 'by hand' WHERE id = 7;});
wait_state($job, 'done', 'batch with changed rows');
cmp_ok(q1('SELECT max(filled) FROM statements'), '>', 1, 'rows finished together were written in one statement');
is(q1("SELECT rows_done, rows_skipped, rows_requeued, rows_failed FROM llm_job WHERE id = $job"),
	($N - 2) . '|2|1|0', 'done: all but the deleted and the filled row; the changed row requeued');
is(q1('SELECT summary FROM tickets WHERE id = 7'), 'by hand', 'a row filled meanwhile is not overwritten');
is(q1('SELECT count(*) FROM writes WHERE id = 5'), '1', 'the changed row written once, from its new inputs');
check_writes('batch with changed rows', $prompt);

# ---------- poison rows in a batch ----------
q1(q{INSERT INTO tickets VALUES (6, 'Say the number 6 in words.'); UPDATE tickets SET summary = NULL});
q1('TRUNCATE writes, statements');
q1('ALTER TABLE tickets ADD CONSTRAINT not_9 CHECK (id <> 9 OR summary IS NULL)');
$prompt = q{'Summarize: ' || body || CASE WHEN body LIKE '%boom%' THEN (1 / (id - id))::text ELSE '' END};
$before = q1('SELECT requests_finished FROM llm_stat');
$h = hold_rows();
$job = q1("SELECT llm_enrich('tickets', 'summary', \$\$$prompt\$\$, max_tokens => $MT, max_attempts => 2)");
wait_results($before, $N);
release_rows($h, q{UPDATE tickets SET body = body || ' boom' WHERE id = 3;
UPDATE tickets SET body = 'Say the number eleven hundred in words.' WHERE id = 11;});
wait_state($job, 'done', 'batch with poison rows');
is(q1("SELECT string_agg(key[1] || ':' || sqlstate, ',' ORDER BY key[1]::int) FROM llm_job_errors WHERE job_id = $job"),
	'3:22012,9:23514', 'the row whose prompt now fails and the row the CHECK refuses failed, alone');
is(q1("SELECT rows_done, rows_failed FROM llm_job WHERE id = $job"), ($N - 2) . '|2', 'every other row written');
cmp_ok(q1("SELECT rows_requeued FROM llm_job WHERE id = $job"), '>=', 1, 'the changed row requeued');
# the other rows' prompts are the plain one (the CASE adds nothing to them)
check_writes('batch with poison rows', q{'Summarize: ' || body}, '2');
q1('ALTER TABLE tickets DROP CONSTRAINT not_9');

# ---------- the class ceiling of the job's owner, as it is when the runner submits ----------
q1(q{CREATE ROLE jobber LOGIN; GRANT llm_user TO jobber;
     CREATE TABLE t3 AS SELECT i AS id, 'Say ' || i || '.' AS body, NULL::text AS s FROM generate_series(1, 8) i;
     ALTER TABLE t3 ADD PRIMARY KEY (id); GRANT SELECT, UPDATE ON t3 TO jobber});

sub as_jobber { return $node->safe_psql('postgres', $_[0], extra_params => ['-U', 'jobber']); }

# a job of jobber's in the interactive class, created and paused in one statement
sub paused_interactive_job
{
	q1('UPDATE t3 SET s = NULL');
	return as_jobber(q{SELECT j FROM (SELECT llm_enrich('t3', 's', 'body', max_tokens => 4,
	                   priority => 'interactive') AS j) e, LATERAL llm_job_pause(e.j) p});
}

# run job to the end; the requests it added in each class, "interactive|batch"
sub classes_of_run
{
	my ($job, $what) = @_;
	LlmTest::wait_idle($node, $what);
	my ($i0, $b0) = split /\|/, q1(q{SELECT coalesce(sum(interactive_requests), 0), coalesce(sum(batch_requests), 0)
	                                 FROM llm_usage WHERE role = 'jobber'});
	as_jobber("SELECT llm_job_resume($job)");
	wait_state($job, 'done', $what);
	$node->poll_query_until('postgres', qq{SELECT coalesce(sum(interactive_requests + batch_requests), 0) >= $i0 + $b0 + 8
	                                      FROM llm_usage WHERE role = 'jobber'});
	return q1(qq{SELECT coalesce(sum(interactive_requests), 0) - $i0 || '|' || coalesce(sum(batch_requests), 0) - $b0
	             FROM llm_usage WHERE role = 'jobber'});
}

$job = paused_interactive_job();
is(classes_of_run($job, 'ceiling unchanged'), '8|0', 'the ceiling unchanged: the job runs interactive');
$job = paused_interactive_job();
q1(q{ALTER ROLE jobber SET llm.max_priority = 'batch'});
is(classes_of_run($job, 'ceiling lowered'), '0|8', 'ceiling lowered after the job was created: it runs in the batch class');
q1(q{ALTER ROLE jobber IN DATABASE postgres SET llm.max_priority = 'interactive'});
$job = paused_interactive_job();
is(classes_of_run($job, 'ceiling of the role in the database'), '8|0',
	"the role's setting in the database comes before its setting everywhere");
q1(q{ALTER ROLE jobber IN DATABASE postgres RESET llm.max_priority; ALTER ROLE jobber RESET llm.max_priority});
$job = paused_interactive_job();
q1(q{ALTER DATABASE postgres SET llm.max_priority = 'batch'});
is(classes_of_run($job, "the database's ceiling"), '0|8', "the database's setting, lowered meanwhile, applies to the role");
q1(q{ALTER DATABASE postgres RESET llm.max_priority});

LlmTest::no_crash($node);
$node->stop;
done_testing();
