# A stream read through a cursor ends with a clean error when the worker
# exits after rows were sent, and a cancel during a FETCH aborts its
# request in the worker (KV blocks freed) while the session is still in
# its failed transaction.
#
# llm_submit(..., notify => channel): when the request ends (done, failed,
# cancelled) a session that LISTENs on the channel receives the payload
# '<id> <status>' and nothing of the prompt or the text; the result stays
# in llm_result.  The channel is checked at submission as pg_notify checks
# it; the requests of a failed statement are dropped and notify nobody.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LlmTest::new_node('stream_notify');
sub q1 { return $node->safe_psql('postgres', $_[0]); }

# ---------- streams: the worker exits, a cancel ----------
my $long = q{SELECT (x).delta FROM (SELECT llm_generate_stream('1, 2, 3, 4, 5,', raw => true, max_tokens => 4000) AS x) r};
my $bg = $node->background_psql('postgres', on_error_stop => 0);
my $bg_pid = $bg->query_safe('SELECT pg_backend_pid()');
$bg->query_safe("BEGIN; DECLARE c CURSOR FOR $long");
isnt($bg->query_safe('FETCH 1 FROM c'), '', 'a stream: the first row');
my $worker = LlmTest::worker_pid($node);
q1("SELECT pg_terminate_backend($worker)");
$bg->query('FETCH ALL FROM c');
like($bg->{stderr}, qr/ERROR:  llm worker exited while the request was in progress/,
	'the worker exits after rows were sent: the next FETCH ends with its error');
$bg->{stderr} = '';
$bg->query('ROLLBACK');
ok($node->poll_query_until('postgres',
		"SELECT worker_pid <> $worker AND model_status = 'ready' FROM llm_stat"),
	'the worker is back');

my $aborted = q1('SELECT requests_aborted FROM llm_stat');
$bg->query_safe("BEGIN; DECLARE c CURSOR FOR $long");
isnt($bg->query_safe('FETCH 1 FROM c'), '', 'a second stream: the first row');
$bg->{stdin} .= "FETCH ALL FROM c;\n";
$bg->{run}->pump_nb();
ok($node->poll_query_until('postgres',
		"SELECT state = 'active' AND query LIKE 'FETCH ALL%' FROM pg_stat_activity WHERE pid = $bg_pid"),
	'FETCH ALL running');
q1("SELECT pg_cancel_backend($bg_pid)");
$bg->query('SELECT 1');
like($bg->{stderr}, qr/ERROR:  canceling statement due to user request/, 'the FETCH is cancelled');
$bg->{stderr} = '';
LlmTest::wait_idle($node, 'the cancelled stream, its transaction not yet rolled back');
cmp_ok(q1('SELECT requests_aborted FROM llm_stat'), '>', $aborted, 'counted aborted');
$bg->query('ROLLBACK');
$bg->quit;

q1(q{CREATE ROLE n_sub IN ROLE llm_user; CREATE ROLE n_listen});

my $listener = $node->background_psql('postgres');
$listener->query_safe('SET ROLE n_listen');
$listener->query_safe('LISTEN llm_done');
$listener->query_safe('LISTEN "Mixed Case"');
my $heard = '';

# Wait until the listener has received a notification matching $re.
sub hear
{
	my ($re, $what) = @_;
	for (my $i = 0; $i < 600; $i++)
	{
		$heard .= $listener->query('SELECT 1') // '';
		return pass($what) if $heard =~ $re;
		select(undef, undef, undef, 0.1);
	}
	diag("heard so far: $heard");
	return fail($what);
}

sub as_sub { return q1("SET ROLE n_sub; $_[0]"); }

# ---------- done ----------
my $id = as_sub(q{SELECT llm_submit('Say the secret word banana.', max_tokens => 6, notify => 'llm_done')});
like($id, qr/^\d+$/, 'submitted with a channel');
hear(qr/notification "llm_done" with payload "$id done"/, 'the listener hears "<id> done"');
like(as_sub("SELECT status || ':' || completion_tokens FROM llm_result($id)"), qr/^done:\d+$/,
	'the result stays in llm_result');
unlike($heard, qr/banana|secret/i, 'the payload carries nothing of the prompt');
my $text = as_sub("SELECT text FROM llm_result($id)");
unlike($heard, qr/\Q$text\E/, 'nor of the text') if length($text) > 3;

# ---------- failed ----------
$id = q1(q{SET llm.debug_poison_logits = 1; SELECT llm_submit('Say yes.', max_tokens => 4, notify => 'llm_done')});
hear(qr/payload "$id failed"/, 'a failed request: "<id> failed"');

# ---------- cancelled: running, and queued ----------
$id = as_sub(q{SELECT llm_submit('1, 2, 3, 4, 5,', raw => true, max_tokens => 2000, notify => 'Mixed Case')});
is(as_sub("SELECT llm_cancel($id)"), 't', 'cancelled');
hear(qr/notification "Mixed Case" with payload "$id cancelled"/,
	'a cancelled request: "<id> cancelled" on a quoted channel name');
LlmTest::wait_idle($node, 'after the cancel');

# ---------- a failed statement's request is dropped: no notification ----------
my $before = () = $heard =~ /Asynchronous notification/g;
my $ret = as_sub(q{SELECT try_sql($$SELECT llm_submit('Say no.', max_tokens => 4, notify => 'llm_done'), 1 / 0$$)});
like($ret, qr/^22012/, 'the statement failed after submitting');
$id = as_sub(q{SELECT llm_submit('Say yes.', max_tokens => 2, notify => 'llm_done')});
hear(qr/payload "$id done"/, 'the next request is heard');
my $after = () = $heard =~ /Asynchronous notification/g;
is($after - $before, 1, 'and only it: the dropped request notified nobody');

# ---------- without notify, nothing ----------
$id = as_sub(q{SELECT llm_submit('Say yes.', max_tokens => 2)});
is(as_sub("SELECT status FROM llm_result($id)"), 'done', 'a request without a channel');
my $id2 = as_sub(q{SELECT llm_submit('Say yes.', max_tokens => 2, notify => 'llm_done')});
hear(qr/payload "$id2 done"/, 'the following one with a channel is heard');
unlike($heard, qr/payload "$id /, 'the one without a channel is not');

# ---------- the channel is checked at submission ----------
is(as_sub(q{SELECT try_sql($$SELECT llm_submit('hi', notify => '')$$)}),
	'22023: channel name cannot be empty', 'an empty channel: 22023');
is(as_sub(q{SELECT try_sql($$SELECT llm_submit('hi', notify => repeat('x', 64))$$)}),
	'22023: channel name too long', 'a channel of 64 bytes: 22023');
is(as_sub(q{SELECT try_sql($$SELECT llm_submit('hi', notify => repeat('é', 32))$$)}),
	'22023: channel name too long', 'a channel of 32 two-byte characters: 22023 (bytes count)');
$listener->query_safe(sprintf('LISTEN %s', 'y' x 63));
$id = as_sub(q{SELECT llm_submit('Say yes.', max_tokens => 2, notify => repeat('y', 63))});
hear(qr/notification "${\('y' x 63)}" with payload "$id done"/, 'a channel of 63 bytes is accepted and heard');

$listener->quit;
LlmTest::wait_idle($node, 'at the end');
LlmTest::no_crash($node);
done_testing();
