# Durable jobs fill embedding columns: llm_enrich on a real[] column makes
# each row's embedding of the prompt's text (an EMBED request), with the job
# machinery's guarantees.  A trigger records every write of an embedding:
# after the runner is killed mid-job, 0 rows lost, 0 written twice, 0 stale
# (each stored embedding equals llm_embed of the row's final text, bit for
# bit).  In continuous mode an UPDATE that changes the text re-embeds that
# row, one that leaves the text as it was re-embeds nothing.  A grammar
# option on an embedding column is refused.  The job records the sha256 of
# the model file its rows were made with; setting the column to NULL under a
# continuous job embeds every row again (the way to follow a model change).
# With pgvector installed, the same job fills a vector column (else those
# tests are skipped).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LlmTest::new_node('jobs_embed', q{
llm.job_naptime = 200ms
llm.batch_window = 16
max_worker_processes = 16
});

sub q1 { return $node->safe_psql('postgres', $_[0]); }
sub wait_state { LlmTest::wait_job_state($node, @_); }

my $N = 48;
q1(qq{
CREATE TABLE docs (id int PRIMARY KEY, body text NOT NULL, emb real[], other int DEFAULT 0);
INSERT INTO docs (id, body)
SELECT i, format('Ticket %s: the %s stopped working after the update, please help.', i,
                 (ARRAY['printer', 'app', 'invoice', 'login'])[1 + i % 4])
FROM generate_series(1, $N) i;
CREATE TABLE writes (id int, body text, emb real[], at timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION record_write() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN
	IF NEW.emb IS DISTINCT FROM OLD.emb AND NEW.emb IS NOT NULL THEN
		INSERT INTO writes (id, body, emb) VALUES (NEW.id, NEW.body, NEW.emb);
	END IF;
	RETURN NEW;
END \$\$;
CREATE TRIGGER record_write AFTER UPDATE ON docs FOR EACH ROW EXECUTE FUNCTION record_write();
});

# 0 lost, 0 doubled, 0 stale: every row's embedding is llm_embed of its text now
sub check_writes
{
	my ($what) = @_;
	is(q1('SELECT count(*) FROM docs WHERE emb IS NULL'), '0', "$what: 0 rows lost");
	is(q1('SELECT count(*) FROM (SELECT id, body FROM writes GROUP BY id, body HAVING count(*) > 1) d'),
		'0', "$what: 0 rows written twice");
	is(q1('SELECT count(*) FROM docs WHERE emb IS DISTINCT FROM llm_embed(body)'), '0',
		"$what: 0 stale, every stored embedding is llm_embed of the row's text, bit for bit");
}

# refusals
like(q1(q{SELECT try_sql($$SELECT llm_enrich('docs', 'emb', 'body', choices => ARRAY['a', 'b'])$$)}),
	qr/^22023: column "emb" is an embedding column/, 'a grammar option on an embedding column is refused');

# a run killed mid-job: resumed, exactly once
my $job = q1(q{SELECT llm_enrich('docs', 'emb', 'body')});
ok($job > 0, "job $job created");
ok($node->poll_query_until('postgres', "SELECT rows_done >= 8 FROM llm_jobs WHERE id = $job"), '8 rows done');
my $runner = q1("SELECT pid FROM pg_stat_activity WHERE backend_type = 'llm job runner'");
ok($runner > 0, "runner runs (pid $runner)");
q1("SELECT pg_terminate_backend($runner)");
my $left = q1('SELECT count(*) FROM docs WHERE emb IS NULL');
cmp_ok($left, '>', 0, "rows left for the next runner ($left)");
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'llm job runner' AND pid <> $runner"),
	'a new runner started');
wait_state($job, 'done', 'after the runner was killed');
check_writes('runner killed');
is(q1("SELECT rows_done, rows_failed, tokens_out FROM llm_jobs WHERE id = $job"), "$N|0|0",
	'every row done, none failed, no tokens generated');
is(q1('SELECT count(DISTINCT array_length(emb, 1)) FROM docs'), '1', 'one embedding length');
is(q1(qq{SELECT j.model_sha256 = m.sha256 FROM llm_jobs j, llm_models m WHERE j.id = $job AND m.alias = 'default'}),
	't', "the job's model_sha256 is the served model file's sha256");

# continuous: a changed text is embedded again, an unchanged one is not
q1('TRUNCATE writes');
$job = q1(q{SELECT llm_enrich('docs', 'emb', 'body', mode => 'continuous')});
q1(qq{INSERT INTO docs (id, body) VALUES (1000, 'A new ticket about the invoice.')});
ok($node->poll_query_until('postgres', 'SELECT emb IS NOT NULL FROM docs WHERE id = 1000'), 'an inserted row is embedded');
my $before = q1('SELECT emb::text FROM docs WHERE id = 2');
q1(q{UPDATE docs SET body = 'The login page shows an error.' WHERE id = 1});
q1(q{UPDATE docs SET body = body, other = other + 1 WHERE id = 2});
q1(q{UPDATE docs SET other = other + 1 WHERE id = 3});
ok($node->poll_query_until('postgres', q{SELECT emb IS NOT NULL AND emb = llm_embed(body) FROM docs WHERE id = 1}),
	'a row whose text changed is embedded again from its new text');
# a changed row was written after the unchanged ones were updated: their writes would be there by now
ok($node->poll_query_until('postgres', 'SELECT count(*) >= 2 FROM writes'), 'writes recorded');
is(q1('SELECT string_agg(id::text, \',\' ORDER BY id) FROM writes'), '1,1000',
	'only the inserted row and the row whose text changed were embedded');
is(q1('SELECT emb::text FROM docs WHERE id = 2'), $before, 'an unchanged text keeps its embedding');
check_writes('continuous');
# after a model change: the documented re-embedding, the column set to NULL under the continuous job
q1('TRUNCATE writes');
q1('UPDATE docs SET emb = NULL');
ok($node->poll_query_until('postgres', 'SELECT count(*) = 0 FROM docs WHERE emb IS NULL'), 'every row embedded again');
is(q1('SELECT count(*) FROM writes'), $N + 1, 'each row written once');
check_writes('re-embedded');
q1("SELECT llm_job_cancel($job)");

# pgvector, when installed: a vector column filled by a job, searched with <=>
SKIP:
{
	my $has = q1(q{SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'});
	skip 'pgvector is not installed', 3 unless $has;
	q1('CREATE EXTENSION vector');
	my $dim = q1('SELECT array_length(llm_embed(\'x\'), 1)');
	q1("ALTER TABLE docs ADD COLUMN v vector($dim)");
	my $vj = q1(q{SELECT llm_enrich('docs', 'v', 'body')});
	wait_state($vj, 'done', 'vector column');
	is(q1('SELECT count(*) FROM docs WHERE v IS DISTINCT FROM llm_embed(body)::vector'), '0',
		'every vector is llm_embed of its text');
	q1('CREATE INDEX ON docs USING hnsw (v vector_cosine_ops)');
	is(q1(q{SET enable_seqscan = off; SELECT id FROM docs ORDER BY v <=> llm_embed('The login page shows an error.')::vector LIMIT 1}),
		'1', 'nearest row by <=> through the HNSW index');
	like(q1(q{SET enable_seqscan = off; EXPLAIN (COSTS OFF) SELECT id FROM docs ORDER BY v <=> llm_embed('x')::vector LIMIT 1}),
		qr/Index Scan using docs_v_idx/, 'the query embedding is computed once: the index serves the ORDER BY');
}

# all-MiniLM-L6-v2 (scripts/fetch-model.sh minilm, in the checkout's models/),
# served as alias minilm: its width and L2 norm, meaning, its 256-token
# limit with [SEP] kept by truncate => true, llm_chunk's WordPiece counts,
# and a job filling a real[] column on it
SKIP:
{
	my $minilm = ($ENV{LLM_SOURCE_DIR} // '') . '/models/all-MiniLM-L6-v2.F16.gguf';
	skip "all-MiniLM-L6-v2 is not in models/ (scripts/fetch-model.sh minilm)", 14 unless -r $minilm;
	q1("ALTER SYSTEM SET llm.models = 'minilm=$minilm'");
	q1('SELECT pg_reload_conf()');
	ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM llm_models WHERE alias = 'minilm' AND state = 'ready'}),
		'minilm served');
	is(q1(q{SELECT array_length(e, 1) || ' ' || round(sqrt((SELECT sum(v::float8 * v) FROM unnest(e) v))::numeric, 5)
	        FROM llm_embed('A man is eating food.', model => 'minilm') e}), '384 1.00000', '384 floats of norm 1');
	is(q1(q{SELECT llm_similarity('I was charged twice for my subscription', 'double billing on my credit card', model => 'minilm')
	             > llm_similarity('I was charged twice for my subscription', 'how to enable dark mode', model => 'minilm') + 0.3}),
		't', 'a paraphrase is closer than an unrelated sentence');
	is(q1(q{SELECT index FROM llm_rerank('How do I get a refund?', ARRAY['Dark mode is in Settings.',
	        'Refunds are issued within 5 business days.', 'Reset your password from the sign-in page.'], model => 'minilm') LIMIT 1}),
		'2', 'llm_rerank puts the refund document first');
	is(q1(q{SELECT array_length(llm_tokenize(repeat('word ', 254), model => 'minilm'), 1)}), '254', "'word' is one token");
	like(q1(q{SELECT try_sql($$SELECT llm_embed(repeat('word ', 255), model => 'minilm')$$)}), qr/^54000:/,
		'255 words + [CLS] + [SEP] is over the 256-token limit: 54000');
	is(q1(q{SELECT array_length(llm_embed(repeat('word ', 254), model => 'minilm'), 1)}), '384', '254 words fit');
	is(q1(q{SELECT llm_count_tokens('word word', model => 'minilm')}), '4',
		'llm_count_tokens on an embedding model: the tokens embedded, [CLS] and [SEP] included');
	like(q1(q{SELECT try_sql($$SELECT llm_generate('Say hi.', model => 'minilm')$$)}),
		qr/^22023: .*embedding model.*it only embeds/, 'generating on an embedding model names its kind');
	is(q1(q{SELECT llm_embed(repeat('word ', 400), model => 'minilm', truncate => true)
	             = llm_embed(repeat('word ', 254), model => 'minilm')}), 't',
		'truncated: [CLS], the first 254 words, [SEP], bit for bit');
	is(q1(q{SELECT count(*) > 1 AND bool_and(array_length(llm_tokenize(c, model => 'minilm'), 1) <= 254)
	        FROM llm_chunk((SELECT string_agg(format('Sentence %s says something about topic %s.', i, i % 5), ' ')
	                        FROM generate_series(1, 200) i), 254, 32, model => 'minilm') c}), 't',
		'llm_chunk: every piece within 254 WordPiece tokens');
	q1('ALTER TABLE docs ADD COLUMN mini real[]');
	my $mj = q1(q{SELECT llm_enrich('docs', 'mini', 'body', model => 'minilm')});
	wait_state($mj, 'done', 'a job on minilm');
	is(q1(q{SELECT count(*) FROM docs WHERE mini IS DISTINCT FROM llm_embed(body, model => 'minilm')}), '0',
		"every row's minilm embedding stored, bit for bit");
	is(q1(qq{SELECT j.model_sha256 = m.sha256 FROM llm_jobs j, llm_models m WHERE j.id = $mj AND m.alias = 'minilm'}),
		't', "the job's model_sha256 is minilm's");
}

LlmTest::no_crash($node);
done_testing();
