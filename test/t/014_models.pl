# Several models in one worker (llm.models): SmolLM2 under the default and
# two aliases ('smollm2' with the llm.* settings, 'small' with its own), and
# Gemma 3 as a second architecture ('gemma3': loading, routing and
# tokenization only, never its text).  Reloading one model while another
# serves: requests on the other run to their end unchanged; the LLM Batch node
# with calls to two models in one statement batches each model's own calls.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $dir = defined $ENV{LLM_SOURCE_DIR} ? "$ENV{LLM_SOURCE_DIR}/models" : "";
my $gemma = "$dir/gemma-3-270m-q4_k_m.gguf";
my $have_gemma = $dir ne '' && -r $gemma;

my $node = LlmTest::new_node('models', "max_worker_processes = 16\n", no_wait => 1);
my $smol = $node->safe_psql('postgres', "SELECT boot_val FROM pg_settings WHERE name = 'llm.model'");
ok(-f $smol, "installed default model exists ($smol)");

sub set_models
{
	my ($value) = @_;
	$node->safe_psql('postgres', "ALTER SYSTEM SET llm.models = '$value'");
	$node->reload;
}

sub models_settled
{
	my ($n, $extra) = @_;
	$extra //= 'true';
	return $node->poll_query_until('postgres',
		"SELECT count(*) = $n AND bool_and(state IN ('ready', 'failed')) AND ($extra) FROM llm_models");
}

my $list = "smollm2=$smol, small=$smol (context_length=512 max_running_requests=4)";
$list .= ", gemma3=$gemma (context_length=2048)" if $have_gemma;
set_models($list);
my $n_models = $have_gemma ? 4 : 3;
ok(models_settled($n_models), "$n_models models settled");
is($node->safe_psql('postgres',
		q{SELECT string_agg(alias || ' ' || state || ' ' || coalesce(architecture, '-') || ' ' || coalesce(context_length::text, '-'), ', ' ORDER BY alias)
		  FROM llm_models WHERE alias <> 'gemma3'}),
	'default ready llama 8192, small ready llama 512, smollm2 ready llama 8192',
	'llm_models: aliases, states, architectures, contexts');
my $pid = LlmTest::worker_pid($node);

# Gemma 3: a second architecture in the same worker
SKIP:
{
	skip 'Gemma 3 model file not found (make model MODEL=gemma3-270m)', 5 unless $have_gemma;
	my ($state, $arch, $params, $err) = split /\|/, $node->safe_psql('postgres',
		q{SELECT state, coalesce(architecture, ''), coalesce(parameters, 0), coalesce(error, '') FROM llm_models WHERE alias = 'gemma3'});
	if ($state eq 'ready')
	{
		is($arch, 'gemma3', 'gemma3: architecture gemma3');
		cmp_ok($params, '>', 250_000_000, "gemma3: $params parameters");
		my $ids = $node->safe_psql('postgres', q{SELECT llm_tokenize('Hello models', model => 'gemma3')});
		isnt($ids, $node->safe_psql('postgres', q{SELECT llm_tokenize('Hello models')}),
			"gemma3 tokenizes with its own vocabulary ($ids)");
		is($node->safe_psql('postgres',
				q{SELECT llm_detokenize(llm_tokenize('Hello models', model => 'gemma3'), model => 'gemma3')}),
			'Hello models', 'gemma3: token ids round-trip through its tokenizer');
		my $raw = $node->safe_psql('postgres',
			q{SELECT llm_complete('The capital of France is', raw => true, max_tokens => 4, model => 'gemma3') IS NOT NULL});
		is($raw, 't', 'gemma3: a raw completion is served');
	}
	else
	{
		# this build has no gemma3 forward pass: the model fails alone, with its reason
		is($state, 'failed', "gemma3 failed to load ($err)");
		like($err, qr/could not load model file "\Q$gemma\E"/, 'gemma3: the error names the file');
		like($node->safe_psql('postgres', q{SELECT try_sql($$SELECT llm_generate('hi', raw => true, model => 'gemma3')$$)}),
			qr/^XX000: llm model gemma3 is not available: could not load model file/, 'gemma3: requests get its error');
		like($node->safe_psql('postgres', q{SELECT try_sql($$SELECT llm_tokenize('hi', model => 'gemma3')$$)}),
			qr/^XX000: llm model gemma3 is not available/, 'gemma3: tokenize gets its error');
		is($node->safe_psql('postgres', q{SELECT llm_generate('Say hi.', max_tokens => 4, model => 'smollm2') IS NOT NULL}),
			't', 'the other models serve beside the failed one');
	}
}

# the same greedy text through every alias of the same file
my $prompt = q{'Write a long story about a lighthouse keeper.'};
my $alone = $node->safe_psql('postgres', "SELECT llm_generate($prompt, max_tokens => 120)");
cmp_ok(length($alone), '>', 200, 'default model alone: long output');
is($node->safe_psql('postgres', "SELECT llm_generate($prompt, max_tokens => 120, model => 'smollm2')"),
	$alone, "model => 'smollm2': same text as the default model alone");

# reload one model while another serves: start long requests on smollm2 and
# small, then change small's settings; smollm2's request runs to its end
# unchanged, small's is aborted by its reload (57000), then small serves again
my $long = LlmTest::start_query($node, "SELECT llm_generate($prompt, max_tokens => 120, model => 'smollm2')");
my $doomed = LlmTest::start_query($node,
	q{SELECT try_sql($$SELECT llm_generate('1, 2, 3, 4, 5, 6, 7, 8,', raw => true, max_tokens => 400, model => 'small')$$)});
ok($node->poll_query_until('postgres',
		q{SELECT bool_and(requests_running = 1) FROM llm_models WHERE alias IN ('smollm2', 'small')}),
	'both requests running');
my $list2 = "smollm2=$smol, small=$smol (context_length=1024 max_running_requests=4)";
$list2 .= ", gemma3=$gemma (context_length=2048)" if $have_gemma;
set_models($list2);
my ($out, $err) = LlmTest::finish_query($long);
is($err, '', 'smollm2 request: no error across the other model\'s reload');
is($out, $alone, 'smollm2 request: same text as alone');
($out, $err) = LlmTest::finish_query($doomed);
like($out, qr/^57000: request aborted: the llm worker is reloading its model/, "small's own request aborted by its reload");
ok(models_settled($n_models, q{bool_or(alias = 'small' AND context_length = 1024)}), 'small reloaded with its new context');
is($node->safe_psql('postgres', q{SELECT requests_aborted + requests_failed FROM llm_models WHERE alias = 'smollm2'}),
	'0', 'nothing of smollm2 was aborted or failed');
is($node->safe_psql('postgres', "SELECT llm_generate($prompt, max_tokens => 120, model => 'small')"),
	$alone, 'small after its reload: same text');

# the LLM Batch node with calls to two models in one statement
$node->safe_psql('postgres', q{CREATE TABLE t AS SELECT i AS id, 'Say the number ' || i || ' in words.' AS body FROM generate_series(1, 8) i});
my $row_by_row = $node->safe_psql('postgres', q{SET llm.enable_batch_scan = off;
	SELECT string_agg(llm_generate(body, max_tokens => 16) || '|' || llm_generate(body, max_tokens => 8), E'\n' ORDER BY id) FROM t});
like($node->safe_psql('postgres', q{EXPLAIN (COSTS OFF, VERBOSE) SELECT id, llm_generate(body, max_tokens => 16, model => 'smollm2'),
	llm_generate(body, max_tokens => 8, model => 'small') FROM t}), qr/LLM Calls per Row: 2/, 'one LLM Batch node for both calls');
$node->safe_psql('postgres', 'SELECT llm_stat_reset()');
is($node->safe_psql('postgres', q{SELECT string_agg(a || '|' || b, E'\n' ORDER BY id) FROM
	(SELECT id, llm_generate(body, max_tokens => 16, model => 'smollm2') AS a, llm_generate(body, max_tokens => 8, model => 'small') AS b FROM t) s}),
	$row_by_row, 'batched over two models: the texts of each model row by row');
is($node->safe_psql('postgres', q{SELECT string_agg(alias || ' ' || requests_finished, ', ' ORDER BY alias) FROM llm_models WHERE alias IN ('smollm2', 'small')}),
	'small 8, smollm2 8', 'each model served its own 8 calls');
my $batches = $node->safe_psql('postgres', q{SELECT string_agg(alias || ' ' || max_batch_size, ', ' ORDER BY alias) FROM llm_models WHERE alias IN ('smollm2', 'small')});
like($batches, qr/^small ([2-8]), smollm2 ([2-8])$/, "each model batched its calls ($batches)");

# an alias dropped from llm.models: its requests become unknown-model errors
set_models("smollm2=$smol");
ok(models_settled(2), 'small (and gemma3) dropped');
is($node->safe_psql('postgres', q{SELECT try_sql($$SELECT llm_generate('hi', model => 'small')$$)}),
	'22023: unknown model "small" (known: default, smollm2)', 'dropped alias is unknown');
is(LlmTest::worker_pid($node), $pid, 'one worker all along (same pid)');
LlmTest::wait_idle($node);
LlmTest::no_crash($node);
$node->stop;
done_testing();
