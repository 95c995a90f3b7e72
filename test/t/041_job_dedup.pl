# Shared calls within a job (docs/JOBS.md, "Shared calls"): the rows of one
# job whose requests are identical and deterministic share one request.
# 60 rows holding 3 distinct prompts cost 3 requests, each row written with
# the answer an unshared run (llm.dedup_calls = off for the database's
# runner: one request per row) writes; rows deleted while the request they
# share runs do not abort it for the rows left; a shared request that fails
# gives each of its rows its own attempts.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LlmTest::new_node('job_dedup', q{
llm.job_naptime = 200ms
llm.batch_window = 16
max_worker_processes = 16
});

sub q1 { return $node->safe_psql('postgres', $_[0]); }

sub wait_state { LlmTest::wait_job_state($node, @_); }

sub finished { return q1('SELECT requests_finished FROM llm_stat'); }

sub shared_calls { return q1('SELECT coalesce(sum(calls_shared), 0) FROM llm_usage'); }

# The runner of a job that ended leaves; the next one reads the database's settings anew.
sub wait_no_runner
{
	my ($what) = @_;
	ok($node->poll_query_until('postgres',
			"SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'llm job runner'"),
		"the runner left ($what)");
}

my $N = 60;
my $MT = 8;
LlmTest::job_table($node, $N, q{'Say the number ' || (i % 3) || ' in words.'});
my $enrich = "SELECT llm_enrich('tickets', 'summary', \$\$'Summarize: ' || body\$\$, max_tokens => $MT)";

# ---------- shared: 3 requests for 60 rows ----------
my ($f0, $s0) = (finished(), shared_calls());
my $job = q1($enrich);
wait_state($job, 'done', 'shared');
is(finished() - $f0, 3, '60 rows holding 3 distinct prompts: 3 requests');
is(shared_calls() - $s0, $N - 3, 'llm_usage.calls_shared counts the 57 rows answered by a shared request');
is(q1("SELECT rows_done, rows_failed, rows_skipped FROM llm_jobs WHERE id = $job"), "$N|0|0",
	'every row done');
is(q1('SELECT count(*), count(DISTINCT id) FROM writes'), "$N|$N", 'each row written once');
is(q1(qq{SELECT count(*) FROM tickets
         WHERE summary IS DISTINCT FROM llm_generate('Summarize: ' || body, max_tokens => $MT)}),
	'0', 'each row holds what its prompt generates');
q1('CREATE TABLE shared_run AS SELECT id, summary FROM tickets');

# ---------- llm.dedup_calls = off for the database's runner: one request per row ----------
wait_no_runner('after the shared run');
q1('ALTER DATABASE postgres SET llm.dedup_calls = off');
q1('UPDATE tickets SET summary = NULL; TRUNCATE writes');
($f0, $s0) = (finished(), shared_calls());
$job = q1($enrich);
wait_state($job, 'done', 'unshared');
is(finished() - $f0, $N, 'llm.dedup_calls off: one request per row');
is(shared_calls() - $s0, 0, 'no call shared');
is(q1('SELECT count(*) FROM tickets t JOIN shared_run s USING (id) WHERE t.summary = s.summary'), $N,
	'every row has the same answer as in the shared run');
wait_no_runner('after the unshared run');
q1('ALTER DATABASE postgres RESET llm.dedup_calls');

# ---------- rows deleted while the request they share runs ----------
# seeded sampling is shared; 400 tokens of a story keep the request running
my $R = 20;
my $story = "'Write a very long story about a lighthouse keeper.'";
my $opts = 'max_tokens => 400, temperature => 0.7, seed => 7';
q1(qq{CREATE TABLE stories (id int PRIMARY KEY, body text NOT NULL, story text);
      INSERT INTO stories SELECT i, $story FROM generate_series(1, $R) i});
my ($a0) = q1('SELECT requests_aborted FROM llm_stat');
$f0 = finished();
$job = q1("SELECT llm_enrich('stories', 'story', 'body', $opts)");
ok($node->poll_query_until('postgres',
		"SELECT rows_in_flight >= 10 FROM llm_jobs WHERE id = $job"),
	'the rows are claimed, their request runs');
# the first rows claimed, the one whose request the others share among them
q1('DELETE FROM stories WHERE id <= 10');
ok($node->poll_query_until('postgres', "SELECT rows_skipped = 10 FROM llm_jobs WHERE id = $job"),
	'the deleted rows are skipped');
is(q1("SELECT rows_done FROM llm_jobs WHERE id = $job"), '0',
	'they were skipped while the shared request ran');
wait_state($job, 'done', 'rows deleted in flight');
is(q1("SELECT rows_done, rows_failed FROM llm_jobs WHERE id = $job"), '10|0', 'the rows left are done');
is(q1('SELECT requests_aborted FROM llm_stat') - $a0, 0, 'no request aborted');
is(finished() - $f0, 1, 'one request for the 20 rows');
is(q1(qq{SELECT count(*) FROM stories WHERE story IS NOT DISTINCT FROM llm_generate($story, $opts)}),
	'10', 'each row left holds the story its prompt generates');

# ---------- a shared request that fails: each row its own attempts ----------
my $F = 10;
q1(qq{CREATE TABLE toolong (id int PRIMARY KEY, body text NOT NULL, out text);
      INSERT INTO toolong SELECT i, repeat('word ', 20000) FROM generate_series(1, $F) i});
my ($e0) = q1('SELECT requests_failed FROM llm_stat');
$job = q1("SELECT llm_enrich('toolong', 'out', 'body', max_tokens => 4, max_attempts => 2)");
wait_state($job, 'done', 'a failing shared request');
is(q1("SELECT rows_done, rows_failed FROM llm_jobs WHERE id = $job"), "0|$F", 'every row failed');
is(q1("SELECT count(*) FROM llm_job_errors WHERE job_id = $job AND attempts = 2 AND sqlstate = '54000'"),
	$F, 'each row failed after its own 2 attempts, with the request\'s SQLSTATE');
my $failed = q1('SELECT requests_failed FROM llm_stat') - $e0;
ok($failed > 0 && $failed < 2 * $F, "fewer failed requests ($failed) than attempts (" . (2 * $F) . ')');

LlmTest::no_crash($node);
$node->stop;
done_testing();
