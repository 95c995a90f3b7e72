# The worker killed while sessions wait: every waiter gets a clean ERROR at
# once, the worker restarts, the next call (also on an old session, whose
# channel must be rebuilt) works, and the postmaster never crash-restarts.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LlmTest::new_node('worker_kill');

# a session with a channel to the first worker
my $old = $node->background_psql('postgres');
is($old->query_safe("SELECT llm_generate('Say yes.', max_tokens => 2) IS NOT NULL"), 't', 'old session works');

my $pid = LlmTest::worker_pid($node);
ok($pid > 0, "worker runs (pid $pid)");
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'llm worker' AND pid = $pid"),
	'1', 'worker visible in pg_stat_activity');

my @q = map {
	LlmTest::start_query($node,
		"SELECT llm_generate('Write a very long story about dragon number $_.', max_tokens => 3000, temperature => 0.7, seed => $_)")
} 1 .. 3;
ok($node->poll_query_until('postgres', 'SELECT requests_running >= 3 FROM llm_stat'), 'three requests running');

$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
for my $i (0 .. $#q)
{
	my ($secs, $out, $err) = LlmTest::time_to_finish($q[$i]);
	like($err, qr/ERROR:  llm worker exited while the request was in progress/, "waiter $i: clean error");
	cmp_ok($secs, '<', 5, "waiter $i: error within 5 s (took " . sprintf('%.2f', $secs) . ' s)');
}

ok($node->poll_query_until('postgres',
		"SELECT worker_pid IS NOT NULL AND worker_pid <> $pid AND model_status = 'ready' FROM llm_stat"),
	'worker restarted with a ready model');
is($node->safe_psql('postgres', "SELECT llm_generate('Say yes.', max_tokens => 2) IS NOT NULL"), 't', 'next call works');
is($old->query_safe("SELECT llm_generate('Say yes.', max_tokens => 2) IS NOT NULL"), 't',
	'old session works after the restart (channel rebuilt)');
$old->quit;

# a request submitted while no worker runs waits for the restarted one
$pid = LlmTest::worker_pid($node);
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
is($node->safe_psql('postgres', "SELECT llm_generate('Say yes.', max_tokens => 2) IS NOT NULL"), 't',
	'call during the restart waits for the new worker');

# cancel from SQL is ignored by the worker (SIGINT)
$pid = LlmTest::worker_pid($node);
$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
sleep 1;
is(LlmTest::worker_pid($node), $pid, 'pg_cancel_backend does not stop the worker');

LlmTest::wait_idle($node);
like(slurp_file($node->logfile), qr/background worker "llm worker" \(PID \d+\) exited with exit code 1/,
	'worker exited with code 1 (restart), not a crash');
LlmTest::no_crash($node);
$node->stop;
done_testing();
