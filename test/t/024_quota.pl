# llm.max_tokens_per_minute limits what is submitted together: a batched
# SELECT, a loop of llm_submit, llm_agg's pieces and eight sessions of one
# role at once each stay within the limit plus one request in the first
# window (the requests the worker saw, times the most one of them used);
# a statement over it fails with 53400.  (Requests a failed statement
# aborted report no prompt tokens, so each request is counted at what one
# like it uses when it runs to its end.)  With a short window (the test
# setting llm.quota_window_ms) calls succeed again once it has passed, and
# a job over its owner's limit waits (llm_jobs says until when and why)
# and finishes, no row failed.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LlmTest::new_node('quota', q{
llm.job_naptime = 200ms
max_worker_processes = 16
});
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{
CREATE ROLE q_batch IN ROLE llm_user;
CREATE ROLE q_submit IN ROLE llm_user;
CREATE ROLE q_agg IN ROLE llm_user;
CREATE ROLE q_many IN ROLE llm_user;
CREATE ROLE q_refill IN ROLE llm_user;
CREATE ROLE q_job IN ROLE llm_user;
CREATE FUNCTION submit_many(n int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	ok int := 0;
	refused int := 0;
BEGIN
	FOR i IN 1..n LOOP
		BEGIN
			PERFORM llm_submit('Say hi ' || i, max_tokens => 4);
			ok := ok + 1;
		EXCEPTION WHEN configuration_limit_exceeded THEN
			refused := refused + 1;
		END;
	END LOOP;
	RETURN ok || ' ' || refused;
END $$;
CREATE FUNCTION as_limited(who name, lim int, q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	PERFORM set_config('llm.max_tokens_per_minute', lim::text, true);
	EXECUTE format('SET LOCAL ROLE %I', who);
	RETURN try_sql(q);
END $$;
});

# As role under limit: the superuser sets the limit, then becomes the role.
sub as_role
{
	my ($role, $limit, $sql) = @_;
	return q1("SET llm.max_tokens_per_minute = $limit; SET ROLE $role; $sql");
}

# The requests of role the worker saw (finished, failed or aborted).
sub role_requests
{
	my ($role) = @_;
	LlmTest::wait_idle($node, $role);
	return q1(qq{SELECT count(*) FROM llm_recent_requests() WHERE role = '$role'});
}

# The tokens a request of prompt with max_tokens => 4 uses at most, run to its end.
sub request_tokens
{
	my ($prompt) = @_;
	return q1(qq{SELECT prompt_tokens + 4 FROM llm_complete('$prompt', max_tokens => 4)});
}

# The requests of role, each using up to $t tokens, fit the limit plus one request.
sub check_bound
{
	my ($role, $limit, $t, $what) = @_;
	my $n = role_requests($role);
	ok($n > 0, "$what: requests ran ($n)");
	ok($n * $t <= $limit + $t,
		"$what: $n requests of up to $t tokens stay within the limit $limit plus one request");
}

# ---------- the first window: nothing submitted together passes ----------

like(as_role('q_batch', 200,
		q{SELECT try_sql($$SELECT llm_generate('Say hi ' || g, max_tokens => 4) FROM generate_series(1, 64) g$$)}),
	qr/^53400: token limit of role "q_batch" exceeded/, 'batched SELECT over 64 rows fails with 53400');
like(q1(q{EXPLAIN (COSTS OFF) SELECT llm_generate('Say hi ' || g, max_tokens => 4) FROM generate_series(1, 64) g}),
	qr/LLM Batch/, 'the rows go through the LLM Batch node');
my $t = request_tokens('Say hi 64');
check_bound('q_batch', 200, $t, 'batched SELECT');

my ($ok, $refused) = split / /, as_role('q_submit', 200, 'SELECT submit_many(64)');
ok($ok >= 1 && $refused >= 1 && $ok + $refused == 64, "llm_submit loop: $ok submitted, $refused refused with 53400");
check_bound('q_submit', 200, $t, 'llm_submit loop');

like(as_role('q_agg', 200,
		q{SELECT try_sql($$SELECT llm_agg('Ticket ' || g || ': the printer on floor ' || g || ' is out of paper again.', 'Summarize the tickets.',
		                   '{"max_tokens": 8}') FROM generate_series(1, 400) g$$)}),
	qr/^53400: token limit of role "q_agg" exceeded/, 'llm_agg whose pieces are over the limit fails with 53400');
# each piece is bigger than the limit: only the first, into the empty window,
# is admitted; the statement's failure may abort it before the worker starts
# it, so the worker sees at most that one
my $agg_seen = role_requests('q_agg');
ok($agg_seen <= 1, "llm_agg: at most one piece admitted, the limit plus one request ($agg_seen reached the worker)");

my @sessions;
for my $s (1 .. 8)
{
	push @sessions, LlmTest::start_query($node,
		"SET llm.max_tokens_per_minute = 300; SET ROLE q_many; "
		  . "SELECT try_sql(\$\$SELECT llm_generate('Say hi ' || g || ' from $s', max_tokens => 4) FROM generate_series(1, 16) g\$\$)");
}
my $failed = 0;
for my $q (@sessions)
{
	my ($out) = LlmTest::finish_query($q);
	$failed++ if $out =~ /^53400/;
}
ok($failed >= 1, "8 sessions of one role at once: $failed failed with 53400");
check_bound('q_many', 300, request_tokens('Say hi 16 from 8'), '8 sessions at once');

# ---------- a short window: it refills ----------

q1("ALTER SYSTEM SET llm.quota_window_ms = '3s'");
q1('SELECT pg_reload_conf()');
ok($node->poll_query_until('postgres', "SELECT current_setting('llm.quota_window_ms') = '3s'"), 'window of 3 s');

($ok, $refused) = split / /, as_role('q_refill', 100, 'SELECT submit_many(16)');
ok($refused >= 1, "a burst is refused ($ok submitted, $refused refused)");
ok($node->poll_query_until('postgres',
		q{SELECT as_limited('q_refill', 100, $$SELECT llm_generate('Say hi', max_tokens => 4)$$) = 'ok'}),
	'calls succeed again once the window has passed');

# ---------- a job waits for its owner's limit, and finishes ----------

q1(q{ALTER ROLE q_job SET llm.max_tokens_per_minute = 100});
LlmTest::job_table($node, 8, q{'Say the number ' || i || ' in words.'});
q1('ALTER TABLE tickets OWNER TO q_job; ALTER TABLE writes OWNER TO q_job');
my $id = q1(q{SET ROLE q_job; SELECT llm_enrich('tickets', 'summary', $$'Summarize: ' || body$$, max_tokens => 4)});
ok($node->poll_query_until('postgres',
		qq{SELECT throttled_until > now() AND throttled_reason LIKE '%llm.max_tokens_per_minute = 100%'
		   FROM llm_jobs WHERE id = $id}),
	'llm_jobs shows the job waiting for its owner\'s token limit')
  or diag(q1("SELECT * FROM llm_jobs WHERE id = $id"));
LlmTest::wait_job_state($node, $id, 'done', 'throttled job finishes as the window refills');
is(q1("SELECT rows_done, rows_failed, throttled_until IS NULL FROM llm_jobs WHERE id = $id"), '8|0|t',
	'every row done, none failed, no longer waiting');
is(q1('SELECT count(*) FROM tickets WHERE summary IS NULL'), '0', 'every row written');

LlmTest::no_crash($node);
$node->stop;
done_testing();
