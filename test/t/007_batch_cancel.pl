# The LLM Batch node (batch_scan.c) under cancellation and early
# termination: a cancelled, timed-out or failing statement aborts every
# request it has in flight (KV blocks back to baseline), and a LIMIT aborts
# the rows read ahead, so nothing keeps running after the statement.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = LlmTest::new_node('batch', "llm.max_running_requests = 8\n");
$node->safe_psql('postgres', q{
CREATE TABLE tickets AS
  SELECT i AS id, 'Write a very long story about animal number ' || i || '.' AS body
  FROM generate_series(1, 64) i});
my $long = "SELECT id, llm_generate(body, max_tokens => 2000, temperature => 0.7, seed => 7) FROM tickets";

like($node->safe_psql('postgres', "EXPLAIN (COSTS OFF) $long"), qr/Custom Scan \(LLM Batch\)/,
	'the statement runs through the batch node');

# cancel mid-statement: several rows' requests are in flight
my $q = LlmTest::start_query($node, "$long /* cancel me */");
my $bpid = LlmTest::backend_pid($node, 'cancel me');
ok($node->poll_query_until('postgres', 'SELECT requests_running >= 4 FROM llm_stat'),
	'several requests of one statement in flight');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($bpid)");
my ($secs, $out, $err) = LlmTest::time_to_finish($q);
like($err, qr/canceling statement due to user request/, 'cancelled');
cmp_ok($secs, '<', 3, 'cancel within 3 s');
LlmTest::wait_idle($node, 'after cancel');

# statement_timeout mid-statement
$q = LlmTest::start_query($node, "SET statement_timeout = '2s'; $long");
($out, $err, $secs) = LlmTest::finish_query($q);
like($err, qr/canceling statement due to statement timeout/, 'statement_timeout');
cmp_ok($secs, '<', 5, 'timeout error within 5 s of the start');
LlmTest::wait_idle($node, 'after statement_timeout');

# an error at a later row aborts the earlier rows' requests still in flight
$q = LlmTest::start_query($node,
	"SELECT llm_generate(body, max_tokens => CASE WHEN id = 1 THEN 0 ELSE 2000 END, temperature => 0.7, seed => 7) FROM tickets");
($out, $err) = LlmTest::finish_query($q);
like($err, qr/max_tokens must be at least 1/, 'error at row 1 (rows 2.. in flight)');
LlmTest::wait_idle($node, 'after an error mid-statement');

# LIMIT over a node that filters (the node stays below the Limit, since its
# qual decides which rows the Limit counts): the rows read ahead beyond it
# are aborted, nothing keeps running (rows after the first two would
# generate 2000 tokens each).  A LIMIT over a node that only projects has
# the node above it, and nothing is read ahead (the batch suites).
my ($aborted0, $completion0) = split /\|/,
  $node->safe_psql('postgres', 'SELECT requests_aborted, completion_tokens FROM llm_stat');
my $rows = $node->safe_psql('postgres',
	"SELECT count(*) FROM (SELECT id FROM tickets WHERE llm_generate(body, max_tokens => CASE WHEN id <= 2 THEN 8 ELSE 2000 END, "
	  . "temperature => 0.7, seed => 7) <> '' LIMIT 2) s");
is($rows, '2', 'LIMIT 2 returns 2 rows');
ok($node->poll_query_until('postgres', 'SELECT requests_running = 0 AND requests_waiting = 0 FROM llm_stat'),
	'no request running after the LIMIT statement');
cmp_ok($node->safe_psql('postgres', 'SELECT requests_aborted FROM llm_stat') - $aborted0, '>=', 1,
	'read-ahead requests beyond the LIMIT aborted');
LlmTest::wait_idle($node, 'after LIMIT');
cmp_ok($node->safe_psql('postgres', 'SELECT completion_tokens FROM llm_stat') - $completion0, '<', 1000,
	'no generation beyond the window');

# a cursor closed early: the same, at CLOSE, not only at the end of the
# transaction (the rows read ahead beyond the first would generate 2000
# tokens each, so they are still running at CLOSE; the transaction then
# sleeps, and nothing may run while it does)
($aborted0, $completion0) = split /\|/,
  $node->safe_psql('postgres', 'SELECT requests_aborted, completion_tokens FROM llm_stat');
my $cq = LlmTest::start_query($node, q{
BEGIN;
DECLARE c CURSOR FOR SELECT id, llm_generate(body, max_tokens => CASE WHEN id = 1 THEN 8 ELSE 2000 END,
                                             temperature => 0.7, seed => 7) <> '' FROM tickets;
FETCH 1 FROM c;
CLOSE c;
SELECT pg_sleep(60) /* cursor closed */;
COMMIT;
}, script => 1);
my $sleeping = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%cursor closed */%' "
  . "AND state = 'active' AND pid <> pg_backend_pid()";
my $closed = 0;
for (1 .. 1500)
{
	$cq->{h}->pump_nb;			# feeds the script to psql
	last if ($closed = $node->safe_psql('postgres', "SELECT ($sleeping) = 1") eq 't');
	usleep(200_000);
}
ok($closed, 'cursor closed, its transaction still open');
ok($node->poll_query_until('postgres', 'SELECT requests_running = 0 AND requests_waiting = 0 FROM llm_stat'),
	'no request running after CLOSE');
is($node->safe_psql('postgres', $sleeping), '1', '... while the transaction is still open');
cmp_ok($node->safe_psql('postgres', 'SELECT requests_aborted FROM llm_stat') - $aborted0, '>=', 1,
	'read-ahead requests of the closed cursor aborted');
$node->safe_psql('postgres',
	"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE '%cursor closed */%' AND pid <> pg_backend_pid()");
my ($fetched) = LlmTest::finish_query($cq);
like($fetched, qr/^1\|t$/m, 'cursor fetched the first row, with text');
LlmTest::wait_idle($node, 'after closing a cursor');
cmp_ok($node->safe_psql('postgres', 'SELECT completion_tokens FROM llm_stat') - $completion0, '<', 1000,
	'no generation beyond the window after CLOSE');

is($node->safe_psql('postgres', "SELECT count(llm_generate(body, max_tokens => 2) IS NOT NULL) FROM tickets WHERE id <= 4"),
	'4', 'next statement works');
LlmTest::no_crash($node);
$node->stop;
done_testing();
