# A reload with a bad engine setting never takes a serving model down: the
# new configuration is checked (and built) beside the engine that serves, so
# a chat template the vocabulary lacks, a CUDA device this machine does not
# have, a KV cache over the memory share or one too small for two blocks
# leave the old engine serving (a request running across the reload is not
# aborted, new calls give the same greedy text), with the setting and the
# reason in llm_model_info()->>'error' / llm_models.error and a WARNING in
# the log; fixing the setting, or changing it to a valid value, then
# applies.  The same for a model of llm.models and its own settings.  A
# context too short for any use is refused by the GUC itself (22023).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LlmTest::new_node('reload_keeps', "max_worker_processes = 16\n");
my $pid = LlmTest::worker_pid($node);
my $smol = $node->safe_psql('postgres', "SELECT llm_model_info()->>'model_path'");
my $gen = q{SELECT llm_generate('Name three colors.', max_tokens => 16)};
my $before = $node->safe_psql('postgres', $gen);
isnt($before, '', "greedy text before the reloads ($before)");

sub loads
{
	my @n = slurp_file($node->logfile) =~ /LOG:  llm worker loaded model /g;
	return scalar @n;
}

# Wait until the log shows more than $n engine loads.
sub wait_loads
{
	my ($n) = @_;
	for (1 .. 1800)
	{
		return 1 if loads() > $n;
		select(undef, undef, undef, 0.1);
	}
	return 0;
}

# Bytes of a KV budget as the engine keeps it: whole blocks (SmolLM2, 16 tokens: 368,640 bytes).
sub whole_blocks
{
	my ($bytes) = @_;
	return $bytes - $bytes % 368640;
}

sub set_conf
{
	my ($sql) = @_;
	$node->safe_psql('postgres', $sql);
	$node->reload;
}

# One bad setting: reload, the old engine serves (a request running across
# the reload included), the error and the log name the setting.
sub bad_setting
{
	my ($what, $sql, $error_re) = @_;
	my $loaded = loads();
	my $q = LlmTest::start_query($node,
		"SELECT length(llm_generate('Write a long story about a whale.', max_tokens => 200)) > 0");
	ok($node->poll_query_until('postgres', 'SELECT requests_running >= 1 FROM llm_stat'), "$what: a request runs");
	set_conf($sql);
	ok($node->poll_query_until('postgres', "SELECT llm_model_info()->>'error' IS NOT NULL"),
		"$what: the refusal is shown");
	my $error = $node->safe_psql('postgres', "SELECT llm_model_info()->>'error'");
	like($error, $error_re, "$what: llm_model_info() names the setting and why ($error)");
	like($error, qr/; still serving with the previous settings$/, "$what: and says the old settings serve");
	is($node->safe_psql('postgres', "SELECT error FROM llm_models WHERE alias = 'default'"), $error,
		"$what: llm_models.error too");
	is($node->safe_psql('postgres', "SELECT llm_model_info()->>'status' || ' ' || (llm_model_info()->>'model_path')"),
		"ready $smol", "$what: still ready");
	my ($out, $err) = LlmTest::finish_query($q);
	is($err, '', "$what: the running request was not aborted");
	is($out, 't', "$what: and finished");
	is($node->safe_psql('postgres', $gen), $before, "$what: same greedy text");
	like(slurp_file($node->logfile), qr/WARNING:  llm worker: \Q$error\E/, "$what: WARNING in the log");
	is(loads(), $loaded, "$what: no engine loaded");
}

# Then fix it with a valid change: the new engine replaces the old one
# (its greedy text compared unless the change alters the prompt).
sub fixed
{
	my ($what, $sql, $key, $want, $other_text) = @_;
	my $loaded = loads();
	set_conf($sql);
	ok($node->poll_query_until('postgres',
			"SELECT llm_model_info()->>'status' = 'ready' AND llm_model_info()->'error' = 'null'::jsonb "
			  . "AND llm_model_info()->'model'->>'$key' = '$want'"),
		"$what fixed: $key = $want applies, no error");
	ok(wait_loads($loaded), "$what fixed: an engine loaded");
	is(loads(), $loaded + 1, "$what fixed: one engine loaded");
	return if $other_text;
	is($node->safe_psql('postgres', $gen), $before, "$what fixed: same greedy text");
}

my $loaded;
bad_setting('chat template the vocabulary lacks', "ALTER SYSTEM SET llm.chat_template = 'gemma'",
	qr/^new llm\.chat_template = 'gemma' not applied: .*start_of_turn/);
fixed('chat template', "ALTER SYSTEM SET llm.chat_template = 'chatml'", 'chat_template', 'chatml', 1);
$loaded = loads();
set_conf("ALTER SYSTEM RESET llm.chat_template");
ok(wait_loads($loaded), 'chat template reset: loaded');

SKIP:
{
	skip 'a GPU is present: llm.device = cuda is valid here', 12
	  if -e '/dev/nvidia0' || -d '/proc/driver/nvidia/gpus';
	bad_setting('CUDA without a GPU', "ALTER SYSTEM SET llm.device = 'cuda'",
		qr/^new llm\.device = 'cuda' not applied: \S/);
}
fixed('device', "ALTER SYSTEM SET llm.device = 'cpu'", 'device', 'cpu');

bad_setting('KV cache over half the memory', "ALTER SYSTEM SET llm.kv_cache_size = '1TB'",
	qr/^new llm\.kv_cache_size = '1048576MB' not applied: a KV cache of 1048576 MB is more than half of the physical memory/);
fixed('KV cache size', "ALTER SYSTEM SET llm.kv_cache_size = '128MB'", 'kv_cache_bytes', whole_blocks(128 * 1024 * 1024));

# blocks of 1024 tokens (23 MB each on SmolLM2) in a 32 MB budget: one block
bad_setting('KV cache of one block', "ALTER SYSTEM SET llm.block_size = 1024; ALTER SYSTEM SET llm.kv_cache_size = '32MB'",
	qr/^new llm\.kv_cache_size = '32MB' not applied: KV cache budget of \d+ bytes holds fewer than 2 blocks/);
fixed('KV cache of one block', "ALTER SYSTEM RESET llm.block_size", 'kv_cache_bytes', whole_blocks(32 * 1024 * 1024));

# a KV cache that fits alone but not beside the serving one (together over
# half of the memory; its pages are mapped, not touched): checked first,
# then the old engine goes and the new one is built alone
{
	my $phys_mb = int(`getconf _PHYS_PAGES` * `getconf PAGESIZE` / 1048576);
	my $kv_mb = int($phys_mb / 2) - 16;
	SKIP:
	{
		skip "no physical memory size ($phys_mb MB)", 9 unless $kv_mb > 64;
		fixed('KV cache only one engine fits', "ALTER SYSTEM SET llm.kv_cache_size = '${kv_mb}MB'", 'kv_cache_bytes',
			whole_blocks($kv_mb * 1048576));
		like(slurp_file($node->logfile),
			qr/LOG:  llm worker: new configuration checked; the serving engine goes before it is built \(the two engines together: a KV cache of \d+ MB is more than half/,
			'built in place, as logged');
		fixed('back from it', "ALTER SYSTEM SET llm.kv_cache_size = '64MB'", 'kv_cache_bytes', whole_blocks(64 * 1048576));
	}
}

# back to the configuration being served: the refusal is no longer shown
set_conf("ALTER SYSTEM SET llm.chat_template = 'gemma'");
ok($node->poll_query_until('postgres', "SELECT llm_model_info()->>'error' LIKE 'new llm.chat_template%'"), 'refused again');
$loaded = loads();
set_conf("ALTER SYSTEM RESET llm.chat_template");
ok($node->poll_query_until('postgres', "SELECT llm_model_info()->'error' = 'null'::jsonb"),
	'reset to the served settings: error cleared');
is(loads(), $loaded, 'without loading anything');

# a context too short for any use is refused by the GUC itself
sub alter_system
{
	my ($setting) = @_;
	my ($rc, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\nALTER SYSTEM SET $setting");
	$err =~ s/^psql:<stdin>:\d+: //;
	return $rc == 0 ? 'ok' : $err;
}
like(alter_system('llm.context_length = 1'),
	qr/^ERROR:  22023: invalid value for parameter "llm.context_length": 1\nDETAIL:  A context length of 1 is too short: it must be 0 \(the model's context length\) or at least 16 tokens/,
	'llm.context_length = 1 refused (22023), with the reason');
like(alter_system('llm.context_length = 15'), qr/^ERROR:  22023: invalid value for parameter "llm.context_length": 15\n/,
	'15 refused');
is(alter_system('llm.context_length = 16'), 'ok', '16 accepted');
is(alter_system('llm.context_length = 0'), 'ok', '0 (the model\'s) accepted');
like(alter_system(q{llm.models = 'x=/x.gguf (context_length=1)'}),
	qr/^ERROR:  22023: invalid value for parameter "llm.models": "x=\/x.gguf \(context_length=1\)"\nDETAIL:  model setting context_length: A context length of 1 is too short/,
	'a model entry with context_length=1 refused (22023)');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET llm.context_length');

# a model of llm.models: its own bad setting leaves it serving, the default model untouched
sub model_state
{
	my ($alias) = @_;
	return $node->safe_psql('postgres', "SELECT state || '|' || coalesce(error, '') FROM llm_models WHERE alias = '$alias'");
}
set_conf("ALTER SYSTEM SET llm.models = 'small=$smol (context_length=512)'");
ok($node->poll_query_until('postgres', "SELECT state = 'ready' FROM llm_models WHERE alias = 'small'"), 'small ready');
my $small_gen = q{SELECT llm_generate('Name three colors.', max_tokens => 16, model => 'small')};
is($node->safe_psql('postgres', $small_gen), $before, 'small: the default model\'s greedy text');
$loaded = loads();
set_conf("ALTER SYSTEM SET llm.models = 'small=$smol (context_length=512, chat_template=gemma)'");
ok($node->poll_query_until('postgres', "SELECT error <> '' FROM llm_models WHERE alias = 'small'"), 'small: refusal shown');
like(model_state('small'),
	qr/^ready\|model small: new chat_template = 'gemma' \(llm\.models\) not applied: .*; still serving with the previous settings$/,
	'small: still ready, the entry\'s setting named');
is($node->safe_psql('postgres', $small_gen), $before, 'small: same greedy text');
is(model_state('default'), 'ready|', 'the default model untouched');
like(slurp_file($node->logfile), qr/WARNING:  llm worker: model small: new chat_template = 'gemma' \(llm\.models\) not applied/,
	'small: WARNING in the log');
is(loads(), $loaded, 'small: no engine loaded');
set_conf("ALTER SYSTEM SET llm.models = 'small=$smol (context_length=1024)'");
ok($node->poll_query_until('postgres', "SELECT state = 'ready' AND error IS NULL AND context_length = 1024 FROM llm_models WHERE alias = 'small'"),
	'small fixed: its new context applies');
is(loads(), $loaded + 1, 'small fixed: one engine loaded');
is($node->safe_psql('postgres', $small_gen), $before, 'small fixed: same greedy text');

# a new alias has no engine to keep: its bad setting fails it alone, naming the setting
set_conf("ALTER SYSTEM SET llm.models = 'small=$smol (context_length=1024), bare=$smol (chat_template=gemma)'");
ok($node->poll_query_until('postgres', "SELECT state = 'failed' FROM llm_models WHERE alias = 'bare'"), 'bare failed');
like(model_state('bare'), qr/^failed\|chat_template = 'gemma' \(llm\.models\) refused: \S/, 'bare: the setting named');
like($node->safe_psql('postgres', q{SELECT try_sql($$SELECT llm_generate('hi', model => 'bare')$$)}),
	qr/^22023: llm model bare is not available: chat_template = 'gemma' \(llm\.models\) refused/, 'bare: calls get 22023');
is(model_state('small'), 'ready|', 'small serves');

$node->safe_psql('postgres', 'ALTER SYSTEM RESET llm.models');
$node->reload;
is(LlmTest::worker_pid($node), $pid, 'same worker process throughout');
LlmTest::wait_idle($node);
LlmTest::no_crash($node);
$node->stop;
done_testing();
