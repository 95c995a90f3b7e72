# Models of the architectures beyond llama and gemma3 served through SQL:
# synthetic random-weight models in the shapes of Qwen2.5-0.5B (qwen2: Q/K/V
# biases, NEOX RoPE) and Gemma-2-2B (gemma2: soft-capped attention and
# logits, alternating sliding window) at CI size, written by
# tools/make_synth_gguf.py with the sha256 of test/golden/arch/models.tsv
# (the files test_arch_golden holds to llama.cpp's logits; the ones it
# wrote into build/synth, or written here), as aliases of
# llm.models.  llm_models names each architecture; llm_generate on an alias
# answers greedily, the same text alone and batched (llm_generate(text[]));
# a mixture-of-experts file in llm.models fails with the architecture named
# while the others keep serving.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

use Digest::SHA;

my $root = $ENV{LLM_SOURCE_DIR} // "$FindBin::RealBin/../..";
my $dir = PostgreSQL::Test::Utils::tempdir();

# A family's small model with the goldens' sha256: the one test_arch_golden
# wrote into build/synth, else written here (python3 with numpy).
sub synth
{
	my ($fam, $type) = @_;
	my ($row) = grep { /^$fam\tsmall\t$type\t/ } split /\n/, slurp_file("$root/test/golden/arch/models.tsv");
	my $sha = (split /\t/, $row)[3];
	for my $path ("$root/build/synth/$fam-small-" . lc($type) . '.gguf', "$dir/$fam-" . lc($type) . '.gguf')
	{
		system('python3', "$root/tools/make_synth_gguf.py", 'arch', $fam, 'small', $path, '--type', $type,
			'--tokenizer', "$root/models/SmolLM2-135M-Instruct.Q4_1.gguf", '--sha256', $sha)
		  if $path =~ /^\Q$dir\E/;
		return $path if -r $path && Digest::SHA->new(256)->addfile($path)->hexdigest eq $sha;
	}
	return undef;
}

my $qwen = synth('qwen2', 'F16');
my $gem = synth('gemma2', 'Q8_0');
plan skip_all => 'synthetic models absent (run build/test/test_arch_golden, or python3 with numpy)'
  unless $qwen && $gem;

# the qwen2 file renamed to a mixture-of-experts architecture of the same length
my $moe = "$dir/olmoe.gguf";
{
	my $bytes = slurp_file($qwen);
	my $n = ($bytes =~ s/(general\.architecture\x08\x00\x00\x00\x05\x00{7})qwen2/${1}olmoe/);
	die "general.architecture not found" unless $n;
	open(my $fh, '>:raw', $moe) or die "$moe: $!";
	print $fh $bytes;
	close($fh);
}

my $node = LlmTest::new_node('arch_models', "max_worker_processes = 16\n");
$node->safe_psql('postgres',
	"ALTER SYSTEM SET llm.models = 'qwen=$qwen (context_length=512), gem=$gem (context_length=512)'");
$node->reload;
ok($node->poll_query_until('postgres', "SELECT count(*) = 3 AND bool_and(state = 'ready') FROM llm_models"),
	'qwen2 and gemma2 models ready beside the default');
is($node->safe_psql('postgres', "SELECT string_agg(alias || ':' || architecture, ' ' ORDER BY alias) FROM llm_models"),
	'default:llama gem:gemma2 qwen:qwen2', 'llm_models names each architecture');

for my $alias ('qwen', 'gem')
{
	my $one = $node->safe_psql('postgres',
		"SELECT llm_generate('The capital of France is', max_tokens => 12, model => '$alias')");
	my $again = $node->safe_psql('postgres',
		"SELECT llm_generate('The capital of France is', max_tokens => 12, model => '$alias')");
	my $batch = $node->safe_psql('postgres',
		"SELECT (llm_generate(ARRAY['Name a color.', 'The capital of France is'], max_tokens => 12, model => '$alias'))[2]");
	my $tokens = $node->safe_psql('postgres',
		"SELECT completion_tokens FROM llm_models WHERE alias = '$alias'");
	isnt($one, '', "$alias: llm_generate answers (" . length($one) . " characters)");
	is($again, $one, "$alias: the same greedy text again");
	is($batch, $one, "$alias: the same text batched with another prompt");
	ok($tokens >= 36, "$alias: its completion tokens counted on its row ($tokens)");
}

$node->safe_psql('postgres',
	"ALTER SYSTEM SET llm.models = 'qwen=$qwen (context_length=512), moe=$moe (context_length=512)'");
$node->reload;
ok($node->poll_query_until('postgres', "SELECT state = 'failed' FROM llm_models WHERE alias = 'moe'"),
	'a mixture-of-experts file fails to load');
like($node->safe_psql('postgres', "SELECT error FROM llm_models WHERE alias = 'moe'"),
	qr/unsupported model architecture "olmoe".*mixture-of-experts/, 'its error names the architecture');
isnt($node->safe_psql('postgres', "SELECT llm_generate('Name a color.', max_tokens => 4, model => 'qwen')"), '',
	'the qwen2 model still serves');
LlmTest::no_crash($node);
done_testing();
