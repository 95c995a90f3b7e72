# Decoder embeddings from SQL: a synthetic qwen3 model declaring
# qwen3.pooling_type = last (as Qwen3-Embedding does; tools/make_synth_gguf.py
# --pooling last, the bytes test/golden/embed_decoder/models.tsv names),
# served as an alias: llm_embed gives the L2-normalised state of the last
# token, agreeing with llama.cpp's llama-embedding on the golden prompts
# (scripts/oracle/make_embed_decoder_golden.py); the LLM Batch node's
# UPDATE and a job filling a real[] column store the same bits as a call
# per row; a vector(n) column of another width is refused when pgvector is
# installed.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Digest::SHA;

my $src = $ENV{LLM_SOURCE_DIR} // "$FindBin::RealBin/../..";
my $dir = PostgreSQL::Test::Utils::tempdir();
my ($row) = grep { /^qwen3\tlast\t/ } split /\n/, slurp_file("$src/test/golden/embed_decoder/models.tsv");
my $sha = (split /\t/, $row)[2];

# the model test_embed_decoder wrote into build/synth, else written here (python3 with numpy)
my $model;
for my $path ("$src/build/synth/qwen3-embed-last.gguf", "$dir/qwen3-embed-last.gguf")
{
	system('python3', "$src/tools/make_synth_gguf.py", 'arch', 'qwen3', 'small', $path, '--type', 'F16', '--seed', '1',
		'--pooling', 'last', '--tokenizer', "$src/models/SmolLM2-135M-Instruct.Q4_1.gguf", '--sha256', $sha)
	  if $path =~ /^\Q$dir\E/;
	if (-r $path && Digest::SHA->new(256)->addfile($path)->hexdigest eq $sha)
	{
		$model = $path;
		last;
	}
}
plan skip_all => 'the synthetic qwen3 embedding model is absent (run build/test/test_embed_decoder, or python3 with numpy)'
  unless $model;

my $node = LlmTest::new_node('embed_decoder', qq{
llm.models = 'q3=$model'
llm.job_naptime = 200ms
llm.batch_window = 8
max_worker_processes = 16
});

sub q1 { return $node->safe_psql('postgres', $_[0]); }

ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM llm_models WHERE alias = 'q3' AND state = 'ready'}),
	'the qwen3 embedding model is served as q3');
is(q1(q{SELECT architecture FROM llm_models WHERE alias = 'q3'}), 'qwen3', 'architecture qwen3');

# the golden prompts against llama-embedding's vectors
open(my $g, '<', "$src/test/golden/embed_decoder/qwen3-last.tsv") or die $!;
my ($n, $agree, $worst) = (0, 0, 1);
q1('CREATE TABLE golden (id int PRIMARY KEY, body text NOT NULL, want float8[], emb real[], jemb real[])');
while (my $line = <$g>)
{
	chomp $line;
	my ($p, $ids, $vec) = split /\t/, $line;
	$p =~ s/\\(.)/$1 eq 't' ? "\t" : $1 eq 'n' ? "\n" : $1/ge;
	$n++;
	(my $lit = $p) =~ s/'/''/g;
	q1("INSERT INTO golden (id, body, want) VALUES ($n, '$lit', '{$vec}')");
}
close $g;
is($n, 8, '8 golden prompts');
my $cos = q1(q{SELECT min(s.dot / sqrt(s.nn * s.ng)) || ' ' || max(s.diff) || ' ' || min(s.len) || ' ' || round(min(sqrt(s.nn))::numeric, 5)
	FROM golden, LATERAL (SELECT sum(a * b) dot, sum(a * a) nn, sum(b * b) ng, max(abs(a - b)) diff, count(*) len
	                      FROM unnest(llm_embed(body, model => 'q3')::float8[], want) u(a, b)) s});
my ($min_cos, $max_diff, $len, $norm) = split / /, $cos;
cmp_ok($min_cos, '>=', 0.99999, "llm_embed agrees with llama-embedding on every prompt (worst cosine $min_cos)");
cmp_ok($max_diff, '<=', 1e-3, "every element within 1e-3 (largest difference $max_diff)");
is("$len $norm", '96 1.00000', '96 floats (the model width) of norm 1: normalised, the file declares a pooling');

# batched by the LLM Batch node and by a job: the bits of a call per row
q1(q{UPDATE golden SET emb = llm_embed(body, model => 'q3')});
is(q1(q{SELECT count(*) FROM golden WHERE emb IS DISTINCT FROM llm_embed(body, model => 'q3')}), '0',
	'an UPDATE over the table stores the bits of llm_embed per row');
my $job = q1(q{SELECT llm_enrich('golden', 'jemb', 'body', model => 'q3')});
LlmTest::wait_job_state($node, $job, 'done', 'a job on the decoder model');
is(q1(q{SELECT count(*) FROM golden WHERE jemb IS DISTINCT FROM emb}), '0', 'a job stores the same bits');
cmp_ok(q1(q{SELECT llm_similarity('Hello world', 'Hello world', model => 'q3')}), '>', 0.9999999,
	'llm_similarity of a text with itself is 1');

SKIP:
{
	my $has = q1(q{SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'});
	skip 'pgvector is not installed', 1 unless $has;
	q1('CREATE EXTENSION vector; ALTER TABLE golden ADD COLUMN v vector(384)');
	is(q1(q{SELECT try_sql($$SELECT llm_enrich('golden', 'v', 'body', model => 'q3')$$)}),
		'42804: column "v" is vector(384) but the model\'s embeddings have 96 dimensions',
		"a vector(384) column for the 96-wide model is refused");
}

LlmTest::no_crash($node);
done_testing();
