# Requests that outlive their session (llm_submit / llm_result /
# llm_cancel): fetched from another session, run again from their start by
# a restarted llm worker, dropped after llm.async_result_ttl; and
# llm_progress watched from another session while a statement runs.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LlmTest::new_node('async');
sub q1 { return $node->safe_psql('postgres', $_[0]); }

# submitted by a session that ends at once, fetched by another
my $id = q1("SELECT llm_submit('Say the number 7 in words.', max_tokens => 8)");
ok($id > 0, "submitted ($id)");
is(q1("SELECT text = llm_generate('Say the number 7 in words.', max_tokens => 8) AND status = 'done' FROM llm_result($id)"),
	't', 'fetched from another session: the same text as llm_generate');

# a request running when the llm worker dies runs again in the new one
$id = q1("SELECT llm_submit('Write a long story about a dragon.', max_tokens => 64)");
ok($node->poll_query_until('postgres', "SELECT (llm_result($id, wait => false)).status = 'running'"), 'running');
q1('SELECT pg_terminate_backend(worker_pid) FROM llm_stat');
is(q1("SELECT status, completion_tokens, text = llm_generate('Write a long story about a dragon.', max_tokens => 64) FROM llm_result($id)"),
	'done|64|t', 'run again from its start by the restarted worker: the full greedy text');

# a structured request run again by a restarted worker keeps its grammar
my $arr = q{'{"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "minItems": 24, "maxItems": 24}'};
$id = q1("SELECT llm_submit('List some digits.', max_tokens => 96, json_schema => $arr)");
ok($node->poll_query_until('postgres', "SELECT (llm_result($id, wait => false)).status IN ('running', 'done')"),
	'structured request taken');
q1('SELECT pg_terminate_backend(worker_pid) FROM llm_stat');
is(q1(qq{SELECT status, jsonb_array_length(text::jsonb),
	text = llm_generate('List some digits.', max_tokens => 96, json_schema => $arr) FROM llm_result($id)}),
	'done|24|t', 'json_schema request after a worker restart: valid, the text of llm_generate');

# results expire after llm.async_result_ttl
q1("ALTER SYSTEM SET llm.async_result_ttl = '1s'");
q1('SELECT pg_reload_conf()');
sleep 1;
$id = q1("SELECT llm_submit('Say yes.', max_tokens => 2)");
is(q1("SELECT status FROM llm_result($id)"), 'done', 'done');
ok($node->poll_query_until('postgres', "SELECT try_sql('SELECT llm_result($id)') LIKE '42704: %'"),
	'dropped after the time to live');

# llm_progress of a running statement, seen from another session
# (in the target list, so an LLM Batch node runs the calls)
my $q = LlmTest::start_query($node,
	"SELECT length(llm_generate('Count from 1 to ' || i || '.', max_tokens => 24)) > 0 FROM generate_series(1, 40) i");
my $pid = LlmTest::backend_pid($node, 'Count from 1 to');
ok($node->poll_query_until('postgres',
		"SELECT calls_finished >= 2 AND calls_in_flight > 0 AND batch_rows_done >= 2 FROM llm_progress WHERE pid = $pid"),
	'llm_progress shows the statement: calls finished and in flight, rows of its LLM Batch node');
is(q1("SELECT role = current_user AND database = current_database() AND query LIKE '%Count from%' FROM llm_progress WHERE pid = $pid"),
	't', 'with its role, database and query');
my ($out) = LlmTest::finish_query($q);
is(scalar(grep { $_ eq 't' } split /\n/, $out), 40, 'statement done');
is(q1("SELECT count(*) FROM llm_progress WHERE pid = $pid"), '0', 'gone with the statement');
is(q1("SELECT count(*) > 0 FROM llm_recent_requests() WHERE pid = $pid AND role = current_user AND database = current_database()"),
	't', 'llm_recent_requests() names the statement\'s backend, role and database');

LlmTest::no_crash($node);
$node->stop;
done_testing();
