# An embedding job's column width: llm_enrich into a vector(n) column (or a
# domain over one) whose n differs from the model's embedding width is
# refused when the job is created (42804), naming both widths; a column of
# the model's width, an unsized vector and a real[] column are accepted.
# A cast llm_embed(...)::vector(n) of the wrong width fails in pgvector's
# cast (22000, "expected n dimensions, not m").  Everything here needs
# pgvector: skipped where it is not installed, except the real[] case.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LlmTest::new_node('embed_width', q{
llm.job_naptime = 200ms
max_worker_processes = 16
});

sub q1 { return $node->safe_psql('postgres', $_[0]); }

my $dim = q1(q{SELECT array_length(llm_embed('width'), 1)});
cmp_ok($dim, '>', 16, "the model's embeddings have $dim dimensions");
q1(q{CREATE TABLE docs (id int PRIMARY KEY, body text NOT NULL, emb real[]);
INSERT INTO docs VALUES (1, 'The printer stopped working.'), (2, 'I cannot log in.');});

my $ja = q1(q{SELECT llm_enrich('docs', 'emb', 'body')});
ok($ja > 0, 'a real[] column (no declared width) is accepted');
LlmTest::wait_job_state($node, $ja, 'done', 'real[] column');
is(q1('SELECT count(*) FROM docs WHERE array_length(emb, 1) = ' . $dim), '2', 'real[] rows filled');

SKIP:
{
	my $has = q1(q{SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'});
	skip 'pgvector is not installed', 7 unless $has;
	q1('CREATE EXTENSION vector');
	my $bad = $dim - 1;
	q1(qq{ALTER TABLE docs ADD COLUMN v_bad vector($bad), ADD COLUMN v_ok vector($dim), ADD COLUMN v_any vector;
CREATE DOMAIN small_vec AS vector(8);
ALTER TABLE docs ADD COLUMN v_dom small_vec;});
	is(q1(q{SELECT try_sql($$SELECT llm_enrich('docs', 'v_bad', 'body')$$)}),
		qq{42804: column "v_bad" is vector($bad) but the model's embeddings have $dim dimensions},
		'a vector column of another width is refused at creation (42804), both widths named');
	is(q1(q{SELECT try_sql($$SELECT llm_enrich('docs', 'v_dom', 'body')$$)}),
		qq{42804: column "v_dom" is small_vec but the model's embeddings have $dim dimensions},
		'so is a domain over vector(8)');
	is(q1(q{SELECT count(*) FROM llm_jobs WHERE "column" IN ('v_bad', 'v_dom')}), '0', 'no job was created');
	my $jo = q1(q{SELECT llm_enrich('docs', 'v_ok', 'body')});
	LlmTest::wait_job_state($node, $jo, 'done', 'vector(dim) column');
	is(q1('SELECT count(*) FROM docs WHERE v_ok = llm_embed(body)::vector'), '2',
		"a vector($dim) column is accepted and filled");
	my $jn = q1(q{SELECT llm_enrich('docs', 'v_any', 'body')});
	LlmTest::wait_job_state($node, $jn, 'done', 'unsized vector column');
	is(q1('SELECT count(*) FROM docs WHERE v_any = v_ok'), '2', 'an unsized vector column is accepted and filled');
	is(q1(qq{SELECT try_sql(\$\$SELECT llm_embed('x')::vector($bad)\$\$)}),
		"22000: expected $bad dimensions, not $dim", 'a cast to vector(n) of another width: pgvector\'s 22000');
	is(q1(qq{SELECT vector_dims(llm_embed('x')::vector($dim))}), $dim, "the cast to vector($dim) works");
}

LlmTest::no_crash($node);
done_testing();
