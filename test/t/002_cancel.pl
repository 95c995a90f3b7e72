# Cancel, statement_timeout, terminate and a vanished client, while running
# and while queued: the backend errors (or exits) quickly, the worker aborts
# the request, KV blocks return to their baseline, nothing crashes.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

# one running request at a time, so a second one is queued
my $node = LlmTest::new_node('cancel', "llm.max_running_requests = 1\n");
my $long = "SELECT llm_generate('Write a very long story about a %s.', max_tokens => 3000, temperature => 0.7, seed => 7)";

# pg_cancel_backend while running
my $q = LlmTest::start_query($node, sprintf($long, 'cat'));
my $bpid = LlmTest::backend_pid($node, 'story about a cat');
ok($node->poll_query_until('postgres', 'SELECT requests_running = 1 FROM llm_stat'), 'running');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($bpid)");
my ($secs, $out, $err) = LlmTest::time_to_finish($q);
like($err, qr/canceling statement due to user request/, 'cancelled');
cmp_ok($secs, '<', 3, 'cancel within 3 s');
LlmTest::wait_idle($node, 'after cancel');

# statement_timeout
$q = LlmTest::start_query($node, "SET statement_timeout = '1s'; " . sprintf($long, 'dog'));
($out, $err, $secs) = LlmTest::finish_query($q);
like($err, qr/canceling statement due to statement timeout/, 'statement_timeout');
cmp_ok($secs, '<', 4, 'timeout error within 4 s of the start');
LlmTest::wait_idle($node, 'after statement_timeout');

# cancel a queued request: the running one continues
my $a = LlmTest::start_query($node, sprintf($long, 'horse'));
ok($node->poll_query_until('postgres', 'SELECT requests_running = 1 FROM llm_stat'), 'first running');
my $b = LlmTest::start_query($node, sprintf($long, 'goat'));
ok($node->poll_query_until('postgres', 'SELECT requests_waiting = 1 FROM llm_stat'), 'second queued');
$bpid = LlmTest::backend_pid($node, 'story about a goat');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($bpid)");
($secs, $out, $err) = LlmTest::time_to_finish($b);
like($err, qr/canceling statement due to user request/, 'queued request cancelled');
cmp_ok($secs, '<', 3, 'queued cancel within 3 s');
ok($node->poll_query_until('postgres', 'SELECT requests_waiting = 0 AND requests_running = 1 FROM llm_stat'),
	'queue empty, first still running');

# pg_terminate_backend of the running one
$bpid = LlmTest::backend_pid($node, 'story about a horse');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($bpid)");
($secs, $out, $err) = LlmTest::time_to_finish($a);
like($err, qr/terminating connection due to administrator command/, 'terminated');
cmp_ok($secs, '<', 3, 'terminate within 3 s');
LlmTest::wait_idle($node, 'after terminate');

# the client vanishes (psql killed): the backend notices the closed socket
$q = LlmTest::start_query($node, sprintf($long, 'fox'));
$bpid = LlmTest::backend_pid($node, 'story about a fox');
ok($node->poll_query_until('postgres', 'SELECT requests_running = 1 FROM llm_stat'), 'running before client kill');
$q->{h}->kill_kill;
ok($node->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $bpid"),
	'backend of the killed client exited');
LlmTest::wait_idle($node, 'after client kill');
like(slurp_file($node->logfile), qr/connection to client lost while waiting for the llm worker/,
	'closed client socket noticed while waiting');

# many cancelled calls: nothing leaks
my ($aborted0, $finished0) = split /\|/,
	$node->safe_psql('postgres', 'SELECT requests_aborted, requests_finished FROM llm_stat');
my $script = join('', map {
	"SET statement_timeout = '150ms'; " . sprintf($long, "bird $_") . ";\n"
} 1 .. 30);
$q = LlmTest::start_query($node, $script, script => 1);
($out, $err) = LlmTest::finish_query($q);
my $n_timeouts = () = $err =~ /statement timeout/g;
cmp_ok($n_timeouts, '>=', 1, "cancelled calls ($n_timeouts timed out)");
LlmTest::wait_idle($node, 'after many cancels');
# A statement can time out before its request reaches the worker (on a
# loaded machine), so the worker sees at most one abort per timeout; what it
# must never do is run a cancelled request to its end: only the statements
# that did not time out finish there.
my ($aborted1, $finished1) = split /\|/,
	$node->safe_psql('postgres', 'SELECT requests_aborted, requests_finished FROM llm_stat');
ok($aborted1 - $aborted0 >= 1 && $aborted1 - $aborted0 <= $n_timeouts,
	'cancelled requests aborted in the worker (' . ($aborted1 - $aborted0) . " of $n_timeouts)");
is($finished1 - $finished0, 30 - $n_timeouts, 'no cancelled request ran to its end');
is($node->safe_psql('postgres', "SELECT llm_generate('Say yes.', max_tokens => 2) IS NOT NULL"), 't', 'next call works');
LlmTest::no_crash($node);
$node->stop;
done_testing();
