# The families' real chat templates through SQL, against llama.cpp: the
# small synthetic models of test_arch_golden (tools/make_synth_gguf.py arch
# FAMILY small, the cut SmolLM2 vocabulary) with a family's template
# (test/golden/arch/templates/) embedded as tokenizer.chat_template, and the
# Mistral and Ministral templates on the llama architecture.  For each case
# of test/golden/arch/chat.tsv (scripts/oracle/make_arch_chat_golden.py:
# llama-server --jinja on the same file): llm_render_chat gives llama.cpp's
# prompt text, llm_count_tokens its number of prompt ids, and llm_chat
# (greedy) the text of llama.cpp's greedy tokens.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

use Digest::SHA;
use JSON::PP;

my $root = $ENV{LLM_SOURCE_DIR} // "$FindBin::RealBin/../..";
my $dir = PostgreSQL::Test::Utils::tempdir();

my @cases;
for my $line (split /\n/, slurp_file("$root/test/golden/arch/chat.tsv"))
{
	next if $line =~ /^#/;
	my ($alias, $fam, $flags, $tmpl, $sha, $conv, $prompt, $ids, $gen) = split /\t/, $line;
	push @cases,
	  {
		alias => $alias,
		fam => $fam,
		flags => $flags,
		tmpl => $tmpl,
		sha => $sha,
		conv => $conv,
		prompt => JSON::PP->new->allow_nonref->decode($prompt),
		n_ids => scalar(split /,/, $ids),
		gen => $gen
	  };
}

# each case's model with the golden's sha256: the one test_arch_golden wrote
# into build/synth, else written here (python3 with numpy)
for my $c (@cases)
{
	my @flags = $c->{flags} eq '-' ? () : (split(/ /, $c->{flags}), '--set-arch', 'llama');
	for my $path ("$root/build/synth/chat-$c->{alias}.gguf", "$dir/$c->{alias}.gguf")
	{
		system('python3', "$root/tools/make_synth_gguf.py", 'arch', $c->{fam}, 'small', $path,
			'--tokenizer', "$root/models/SmolLM2-135M-Instruct.Q4_1.gguf",
			'--chat-template', "$root/test/golden/arch/templates/$c->{tmpl}.jinja", @flags,
			'--sha256', $c->{sha})
		  if $path =~ /^\Q$dir\E/;
		if (-r $path && Digest::SHA->new(256)->addfile($path)->hexdigest eq $c->{sha})
		{
			$c->{path} = $path;
			last;
		}
	}
}
if (grep { !$_->{path} } @cases)
{
	plan skip_all => 'synthetic models absent (run build/test/test_arch_golden, or python3 with numpy)';
}

is(scalar(@cases), 9, 'nine template cases in chat.tsv');
my $node = LlmTest::new_node('arch_chat', "max_worker_processes = 16\n");

sub sqlq { my $s = shift; $s =~ s/'/''/g; return "'$s'" }

# llm.models holds seven models besides the default: two rounds
for my $round ([ @cases[ 0 .. 4 ] ], [ @cases[ 5 .. $#cases ] ])
{
	my $list = join ', ', map { "$_->{alias}=$_->{path} (context_length=4096, kv_cache_size=16MB)" } @$round;
	$node->safe_psql('postgres', "ALTER SYSTEM SET llm.models = " . sqlq($list));
	$node->reload;
	my $n = @$round + 1;
	ok($node->poll_query_until('postgres', "SELECT count(*) = $n AND bool_and(state = 'ready') FROM llm_models"),
		join(', ', map { $_->{alias} } @$round) . ' ready');
	for my $c (@$round)
	{
		my ($a, $conv) = ($c->{alias}, sqlq($c->{conv}));
		is($node->safe_psql('postgres', "SELECT llm_render_chat($conv, model => '$a')"),
			$c->{prompt}, "$a ($c->{tmpl}): the prompt llama.cpp renders");
		is($node->safe_psql('postgres', "SELECT llm_count_tokens(${conv}::jsonb, '$a')"),
			$c->{n_ids}, "$a: $c->{n_ids} prompt tokens, as llama.cpp tokenizes its prompt");
		my $want = $node->safe_psql('postgres', "SELECT llm_detokenize('{$c->{gen}}'::int[], '$a')");
		is($node->safe_psql('postgres', "SELECT llm_chat($conv, max_tokens => 8, model => '$a')"),
			$want, "$a: llm_chat's greedy reply is llama.cpp's tokens ($c->{gen})");
	}
}
LlmTest::no_crash($node);
done_testing();
