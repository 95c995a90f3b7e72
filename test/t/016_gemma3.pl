# Gemma 3 270M from SQL: llm.model reloaded from SmolLM2 to the Gemma file
# (a base model without tokenizer.chat_template).  Raw completion gives
# llama.cpp's greedy continuation; llm_chat and text prompts are ERROR 22023
# (never a silent ChatML) until llm.chat_template names a family; reloading
# back to SmolLM2 restores its ChatML replies.
#
# Model: $LLM_TEST_MODEL_GEMMA3 (test/run-tap sets it to the checkout's
# models/gemma-3-270m-q4_k_m.gguf; `make model MODEL=gemma3-270m`); without
# the file every check is one counted skip.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $gemma = $ENV{LLM_TEST_MODEL_GEMMA3} // '';
if ($gemma eq '' || !-r $gemma)
{
	plan skip_all => "Gemma 3 model not found ("
	  . ($gemma eq '' ? 'LLM_TEST_MODEL_GEMMA3 unset' : $gemma)
	  . "; make model MODEL=gemma3-270m)";
}

my $node = LlmTest::new_node('gemma3', "llm.context_length = 2048\n");
my $pid = LlmTest::worker_pid($node);

# SmolLM2 first: its ChatML template (what must not leak into Gemma)
my $smol_chat = $node->safe_psql('postgres',
	q{SELECT llm_chat('[{"role": "user", "content": "Say hi."}]', max_tokens => 8)});
ok(length($smol_chat) > 0, "SmolLM2 chat reply before the switch ($smol_chat)");

# reload to the Gemma file
$node->safe_psql('postgres', "ALTER SYSTEM SET llm.model = '$gemma'");
$node->reload;
ok($node->poll_query_until('postgres',
		"SELECT llm_model_info()->>'status' = 'ready' AND llm_model_info()->>'model_path' = '$gemma'"),
	'Gemma model ready after the reload');
is(LlmTest::worker_pid($node), $pid, 'same worker (no restart)');
is($node->safe_psql('postgres',
		q{SELECT concat_ws(' ', m->>'architecture', m->>'n_layers', m->>'n_vocab', m->>'chat_template')
		  FROM (SELECT llm_model_info()->'model' AS m) s}),
	'gemma3 18 262144 none', 'model info: gemma3, 18 layers, 262144 tokens, no chat template');

# raw completion: llama.cpp's greedy 32 tokens of g01 (test/golden/gemma3/greedy.tsv)
my $oracle = '506 5279 529 506 2891 529 7001 236761 1030 563 506 7488 3207 528 7001 236761 '
  . '1030 563 506 5279 529 506 2891 529 7001 236761 1030 563 506 7488 3207 528';
(my $oracle_arr = $oracle) =~ s/ /,/g;
is($node->safe_psql('postgres',
		qq{SELECT llm_generate('The capital of France is', raw => true, max_tokens => 32)
		      = llm_detokenize('{$oracle_arr}'::int[])}),
	't', "raw completion equals llama.cpp's greedy continuation (32 tokens)");
is($node->safe_psql('postgres',
		q{SELECT concat_ws(' ', finish_reason, prompt_tokens, completion_tokens)
		  FROM llm_complete('The capital of France is', raw => true, max_tokens => 32)}),
	'length 6 32', 'llm_complete: 6 prompt tokens (BOS + 5), 32 generated, finish length');
is($node->safe_psql('postgres',
		q{SELECT array_length(llm_tokenize('The capital of France is'), 1)}),
	'5', 'llm_tokenize stays BOS-free (5 ids)');
is($node->safe_psql('postgres',
		q{SELECT llm_generate(ARRAY['The capital of France is', 'The quick brown fox'], raw => true, max_tokens => 32)
		      = ARRAY[llm_generate('The capital of France is', raw => true, max_tokens => 32),
		              llm_generate('The quick brown fox', raw => true, max_tokens => 32)]}),
	't', 'a batch of raw prompts equals the prompts one by one');

# no chat template: 22023, never ChatML
my $chat_err = $node->safe_psql('postgres',
	q{SELECT try_sql($$SELECT llm_chat('[{"role": "user", "content": "Say hi."}]')$$)});
like($chat_err, qr/^22023: .*no chat template.*raw => true/, "llm_chat without a template: 22023 ($chat_err)");
like($node->safe_psql('postgres', q{SELECT try_sql($$SELECT llm_generate('Say hi.')$$)}),
	qr/^22023: .*no chat template/, 'a text prompt (not raw) without a template: 22023');
is($node->safe_psql('postgres',
		q{SELECT llm_generate(ARRAY['Say hi.'], on_error => 'null') IS NOT DISTINCT FROM ARRAY[NULL]::text[]}),
	't', "on_error => 'null': NULL");

# a configured template: llm.chat_template = 'gemma' (reload)
$node->safe_psql('postgres', "ALTER SYSTEM SET llm.chat_template = 'gemma'");
$node->reload;
ok($node->poll_query_until('postgres',
		"SELECT llm_model_info()->>'status' = 'ready' AND llm_model_info()->'model'->>'chat_template' = 'gemma'"),
	'llm.chat_template = gemma: model reloaded with the Gemma template');
my $gemma_chat = $node->safe_psql('postgres',
	q{SELECT llm_chat('[{"role": "user", "content": "Say hi."}]', max_tokens => 8) IS NOT NULL});
is($gemma_chat, 't', 'llm_chat works with the configured template');
# the configured family's markers must be in the vocabulary: ChatML's are
# not, so the reload is refused and the Gemma template keeps serving
$node->safe_psql('postgres', "ALTER SYSTEM SET llm.chat_template = 'chatml'");
$node->reload;
ok($node->poll_query_until('postgres',
		"SELECT llm_model_info()->>'error' LIKE 'new llm.chat_template = ''chatml'' not applied: %'"),
	'llm.chat_template = chatml on Gemma: refused');
like($node->safe_psql('postgres', "SELECT llm_model_info()->>'error'"),
	qr/chatml/, 'the error names the configured template');
is($node->safe_psql('postgres',
		q{SELECT (llm_model_info()->>'status') || ' ' || (llm_model_info()->'model'->>'chat_template')}),
	'ready gemma', 'the Gemma template keeps serving');
is(LlmTest::worker_pid($node), $pid, 'worker stayed up');

# back to SmolLM2 and the file's own template
$node->safe_psql('postgres', 'ALTER SYSTEM RESET llm.chat_template');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET llm.model');
$node->reload;
ok($node->poll_query_until('postgres',
		"SELECT llm_model_info()->>'status' = 'ready' AND llm_model_info()->'model'->>'architecture' = 'llama'"),
	'SmolLM2 ready again');
is($node->safe_psql('postgres',
		q{SELECT llm_chat('[{"role": "user", "content": "Say hi."}]', max_tokens => 8)}),
	$smol_chat, 'SmolLM2 chat reply unchanged after the round trip');
LlmTest::wait_idle($node);
LlmTest::no_crash($node);
$node->stop;
done_testing();
