# The asynchronous store under failed statements and busy roles: a
# statement that fails after submitting hundreds of llm_submit requests
# leaves the store usable at once for its role and any other (its requests,
# whose ids no statement returned, are dropped: by a failed statement, a
# savepoint rolled back, a PL/pgSQL EXCEPTION block), while returned ids
# live on; one role holds at most its share of the store
# (llm.async_max_requests_per_role); a role lists its own requests and
# cancels them all.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LlmTest::new_node('async_store');
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{
CREATE ROLE a_one IN ROLE llm_user;
CREATE ROLE a_two IN ROLE llm_user;
CREATE ROLE a_three IN ROLE llm_user;
CREATE TABLE ids (id bigint);
GRANT ALL ON ids TO llm_user;
CREATE FUNCTION n_requests(who name) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('SET LOCAL ROLE %I', who);
	RETURN (SELECT count(*) FROM llm_async_requests());
END $$;
});

sub as { my ($role, $sql) = @_; return q1("SET ROLE $role; $sql"); }

# A script run statement by statement, going on after errors; its output.
sub script
{
	my ($sql) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', $sql, on_error_stop => 0);
	return $out;
}

my $big = q{INSERT INTO ids SELECT llm_submit('Say hi ' || g, max_tokens => 4) FROM generate_series(1, 1500) g};

# ---------- a failed statement's requests are dropped at once ----------

# the role's share (half of llm.async_max_requests by default) stops it
like(as('a_one', "SELECT try_sql(\$\$$big\$\$)"), qr/^53400: role "a_one" holds its share/,
	'1,500 llm_submit calls in one statement: 53400 at the role\'s share');
is(as('a_one', q{SELECT count(*) FROM llm_async_requests() WHERE status <> 'cancelling'}), '0',
	'none of its requests is left, none is still queued');
like(as('a_one', q{SELECT llm_submit('Say yes.', max_tokens => 2)}), qr/^\d+$/, 'the same role submits at once');
like(as('a_two', q{SELECT llm_submit('Say yes.', max_tokens => 2)}), qr/^\d+$/, 'another role submits at once');
ok($node->poll_query_until('postgres', q{SELECT n_requests('a_one') = 1}),
	'the running ones are freed once the worker has aborted them');

# without the share, the statement fills the whole store: still freed at once
q1("ALTER SYSTEM SET llm.async_max_requests_per_role = 1024");
q1('SELECT pg_reload_conf()');
ok($node->poll_query_until('postgres', "SELECT current_setting('llm.async_max_requests_per_role') = '1024'"),
	'share raised to the whole store');
like(as('a_three', "SELECT try_sql(\$\$$big\$\$)"), qr/^53400: the llm asynchronous request store is full/,
	'1,500 calls fill the store: 53400');
like(as('a_three', q{SELECT llm_submit('Say yes.', max_tokens => 2)}), qr/^\d+$/, 'the same role submits at once');
like(as('a_two', q{SELECT llm_submit('Say yes.', max_tokens => 2)}), qr/^\d+$/, 'another role submits at once');
is(q1('SELECT count(*) FROM ids'), '0', 'the failed statements stored no id');
q1("ALTER SYSTEM RESET llm.async_max_requests_per_role");
q1('SELECT pg_reload_conf()');
ok($node->poll_query_until('postgres', "SELECT current_setting('llm.async_max_requests_per_role') = '0'"),
	'share back to its default');
as('a_one', 'SELECT llm_cancel_all()');
as('a_two', 'SELECT llm_cancel_all()');
as('a_three', 'SELECT llm_cancel_all()');
LlmTest::wait_idle($node, 'after the failed statements');

# ---------- savepoints and exception blocks ----------

# 19 calls, then division by zero
my $fails = q{SELECT llm_submit('Say hi ' || g, max_tokens => 4), 1 / (20 - g) FROM generate_series(1, 20) g};
my $out = script(qq{
SET ROLE a_one;
BEGIN;
SELECT llm_submit('Kept.', max_tokens => 2) IS NOT NULL AS returned;
SAVEPOINT s;
$fails;
ROLLBACK TO s;
SELECT count(*) FILTER (WHERE status <> 'cancelling') FROM llm_async_requests();
COMMIT;
});
is($out, "t\n1", 'a savepoint rolled back drops the failed statement\'s requests; the id returned before stays');
ok($node->poll_query_until('postgres', q{SELECT n_requests('a_one') = 1}),
	'their entries freed');

as('a_one', 'SELECT llm_cancel_all()');
q1(qq{CREATE FUNCTION fail_inside() RETURNS bigint LANGUAGE plpgsql AS \$\$
DECLARE
	kept bigint;
BEGIN
	BEGIN
		SELECT llm_submit('Kept inside.', max_tokens => 2) INTO kept;
		PERFORM llm_submit('Say hi ' || g, max_tokens => 4), 1 / (20 - g) FROM generate_series(1, 20) g;
	EXCEPTION WHEN division_by_zero THEN
		RETURN kept;
	END;
	RETURN NULL;
END \$\$;});
my $kept = as('a_one', 'SELECT fail_inside()');
like($kept, qr/^\d+$/, 'a PL/pgSQL EXCEPTION block catches the failure');
is(as('a_one', q{SELECT count(*) FILTER (WHERE status <> 'cancelling') FROM llm_async_requests()}), '1',
	'the failed PERFORM\'s requests are dropped');
is(as('a_one', "SELECT status FROM llm_result($kept)"), 'done',
	'the id a finished query of the block returned lives on');
ok($node->poll_query_until('postgres', q{SELECT n_requests('a_one') = 1}),
	'their entries freed');

# ---------- the per-role share, listing, cancelling all ----------

as('a_one', 'SELECT llm_cancel_all()');
q1("ALTER SYSTEM SET llm.async_max_requests_per_role = 4");
q1('SELECT pg_reload_conf()');
ok($node->poll_query_until('postgres', "SELECT current_setting('llm.async_max_requests_per_role') = '4'"),
	'a share of 4');
is(as('a_two', q{SELECT count(llm_submit('Write a long story number ' || g || '.', max_tokens => 64)) FROM generate_series(1, 4) g}),
	'4', 'a role submits up to its share');
like(as('a_two', q{SELECT try_sql($$SELECT llm_submit('One more.', max_tokens => 2)$$)}),
	qr/^53400: role "a_two" holds its share of the llm asynchronous request store \(4 requests\)/,
	'one more fails with 53400');
like(as('a_three', q{SELECT llm_submit('Say yes.', max_tokens => 2)}), qr/^\d+$/, 'another role still submits');
is(as('a_two', q{SELECT count(*), bool_and(status IN ('queued', 'running', 'done')), bool_and(submitted_at <= now())
                 FROM llm_async_requests()}),
	'4|t|t', 'the role lists its own requests');
is(as('a_three', q{SELECT count(*) FROM llm_async_requests()}), '1', 'and only its own');
is(as('a_two', 'SELECT llm_cancel_all()'), '4', 'llm_cancel_all drops all four');
ok($node->poll_query_until('postgres', q{SELECT n_requests('a_two') = 0}),
	'none left');
like(as('a_two', q{SELECT llm_submit('One more.', max_tokens => 2)}), qr/^\d+$/, 'the role submits again');
is(as('a_three', q{SELECT count(*) FROM llm_async_requests()}), '1', 'the other role\'s request untouched');

LlmTest::wait_idle($node, 'end');
LlmTest::no_crash($node);
$node->stop;
done_testing();
