# Guard rails of the worker's configuration: llm.threads above the CPUs is
# clamped with a WARNING; a KV cache over half of the physical memory is
# refused by the check before a reload gives up the serving engine (the old
# one serves, the setting named in llm_model_info(), fixed by a reload); a
# new llm.model that cannot be opened leaves the old model serving (running
# requests untouched, a WARNING, the error in llm_model_info()) until it is
# fixed.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LlmTest::new_node('guard_rails', "llm.threads = 1000\n");
my $pid = LlmTest::worker_pid($node);
my $cpus = $node->safe_psql('postgres', "SELECT llm_model_info()->'model'->>'threads'");
cmp_ok($cpus, '>=', 1, "threads clamped to the CPUs ($cpus)");
cmp_ok($cpus, '<', 1000, 'not 1000');
like(slurp_file($node->logfile), qr/WARNING:  llm worker: llm\.threads = 1000 clamped: 1000 compute threads asked for, more than the $cpus CPUs/,
	'clamp logged as a WARNING');
like($node->safe_psql('postgres', "SELECT llm_model_info()->'model'->>'notes'"), qr/using $cpus/, 'and shown in llm_model_info');
is($node->safe_psql('postgres', "SELECT llm_generate('Say yes.', max_tokens => 2) IS NOT NULL"), 't', 'generation works');

# KV cache of 1 TB
$node->safe_psql('postgres', "ALTER SYSTEM SET llm.threads = 2");
$node->safe_psql('postgres', "ALTER SYSTEM SET llm.kv_cache_size = '1TB'");
$node->reload;
ok($node->poll_query_until('postgres', "SELECT llm_model_info()->>'error' IS NOT NULL"), '1 TB KV cache: refused');
like($node->safe_psql('postgres', "SELECT llm_model_info()->>'error'"),
	qr/^new llm\.kv_cache_size = '1048576MB' not applied: a KV cache of 1048576 MB is more than half of the physical memory \(\d+ MB\); still serving with the previous settings$/,
	'llm_model_info names the limit');
like(slurp_file($node->logfile), qr/WARNING:  llm worker: new llm\.kv_cache_size = '1048576MB' not applied: a KV cache of 1048576 MB/,
	'refusal logged');
is($node->safe_psql('postgres', "SELECT llm_model_info()->>'status'"), 'ready', 'the old engine serves');
is($node->safe_psql('postgres', "SELECT llm_generate('Say yes.', max_tokens => 2) IS NOT NULL"), 't', 'requests are served');
is(LlmTest::worker_pid($node), $pid, 'worker stayed up');
$node->safe_psql('postgres', "ALTER SYSTEM RESET llm.kv_cache_size");
$node->reload;
ok($node->poll_query_until('postgres',
		"SELECT llm_model_info()->>'status' = 'ready' AND llm_model_info()->'error' = 'null'::jsonb"),
	'fixed by a reload: no error');
is($node->safe_psql('postgres', "SELECT llm_model_info()->'model'->>'threads'"), '2', 'and the other change applied');

# a typo in llm.model while a request runs
my $real = $node->safe_psql('postgres', "SELECT llm_model_info()->>'model_path'");
my $q2 = LlmTest::start_query($node,
	"SELECT length(llm_generate('Write a very long story about a whale.', max_tokens => 300)) > 0");
ok($node->poll_query_until('postgres', 'SELECT requests_running >= 1 FROM llm_stat'), 'request running before reload');
$node->safe_psql('postgres', "ALTER SYSTEM SET llm.model = '/nonexistent/typo.gguf'");
$node->reload;
ok($node->poll_query_until('postgres',
		"SELECT llm_model_info()->>'error' LIKE 'new llm.model \"/nonexistent/typo.gguf\" not loaded: %'"),
	'the refused model is shown in llm_model_info');
is($node->safe_psql('postgres', "SELECT llm_model_info()->>'status' || ' ' || (llm_model_info()->>'model_path')"),
	"ready $real", 'the old model keeps serving');
my ($out, $err) = LlmTest::finish_query($q2);
is($err, '', 'the running request was not aborted');
is($out, 't', 'and finished');
like(slurp_file($node->logfile), qr/WARNING:  llm worker: new llm\.model "\/nonexistent\/typo\.gguf" not loaded: .*; still serving/,
	'WARNING in the log');
is($node->safe_psql('postgres', "SELECT llm_generate('Say yes.', max_tokens => 2) IS NOT NULL"), 't',
	'new requests are served by the old model');
# a file that exists but is not a GGUF
my $bad = $node->basedir . '/not_a_model.gguf';
open(my $fh, '>', $bad) or die;
print $fh 'NOTGGUF' . ("\0" x 4096);
close $fh;
$node->safe_psql('postgres', "ALTER SYSTEM SET llm.model = '$bad'");
$node->reload;
ok($node->poll_query_until('postgres',
		"SELECT llm_model_info()->>'error' LIKE 'new llm.model \"$bad\" not loaded: %'"),
	'a malformed file is refused too');
is($node->safe_psql('postgres', "SELECT llm_model_info()->>'status'"), 'ready', 'still ready');
# back to the served model: the refusal is no longer shown
$node->safe_psql('postgres', "ALTER SYSTEM RESET llm.model");
$node->reload;
ok($node->poll_query_until('postgres', "SELECT llm_model_info()->'error' = 'null'::jsonb"), 'error cleared');
is(LlmTest::worker_pid($node), $pid, 'same worker process throughout');
LlmTest::wait_idle($node);
LlmTest::no_crash($node);
$node->stop;
done_testing();
