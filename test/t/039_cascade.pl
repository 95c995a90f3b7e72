# Model cascades (docs/CASCADES.md): llm_filter and llm_classify with
# cascade => 'alias' in an LLM Batch node.  Routing is checked with the
# worker's own counters (llm_models' requests per alias) and EXPLAIN
# ANALYZE: 'twin' (the default SmolLM2 file under a second alias, so the
# small model agrees with the large one) must answer some rows and save
# large-model calls; too few rows send every row to the large model only; a
# LIMIT, llm.enable_cascades = off and a row-by-row call use the large model
# only.  The real pair, SmolLM2 small and Gemma 3 270M large
# ($LLM_TEST_MODEL_GEMMA3), answers as Gemma alone on every row the cascade
# sends to Gemma.  The argument errors are 22023.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my ($node, $have_gemma) = LlmTest::new_cascade_node('cascade');

sub sq { return $node->safe_psql('postgres', $_[0]); }

sub finished
{
	my ($alias) = @_;
	return sq("SELECT requests_finished FROM llm_models WHERE alias = '$alias'");
}

# 40 short messages, complaints, praise and questions (distinct texts)
sq(q{
CREATE TABLE msgs AS
SELECT i AS id,
       (ARRAY['The parcel arrived broken and nobody answers my emails',
              'Thank you, the new blender works perfectly',
              'How do I change the delivery address of my order',
              'I was charged twice and I want my money back',
              'Great service, the courier was friendly and fast'])[1 + i % 5]
       || ' (order ' || i || ').' AS body
FROM generate_series(1, 40) i;
CREATE TABLE few AS SELECT * FROM msgs WHERE id <= 15;
});

my $filter = q{llm_filter(body, 'Is this a complaint?'};
my $lit = q{llm_filter('The box was broken.', 'Is this a complaint?'};
my $opts = q{precision_target => 0.6, recall_target => 0.6, cascade_delta => 0.2, cascade_seed => 7};

# ---- argument errors: 22023, whatever the rows ----
like(sq(qq{SELECT try_sql(\$\$SELECT $lit, cascade => 'nope')\$\$)}),
	qr/^22023: .*nope/, 'unknown cascade alias: 22023');
like(sq(qq{SELECT try_sql(\$\$SELECT $lit, cascade => 'default')\$\$)}),
	qr/^22023: cascade must name another model than model/, 'cascade equal to the model: 22023');
like(sq(qq{SELECT try_sql(\$\$SELECT $lit, cascade => 'twin', model => 'twin')\$\$)}),
	qr/^22023: cascade must name another model/, 'cascade equal to model => : 22023');
like(sq(qq{SELECT try_sql(\$\$SELECT $lit, cascade => 'twin', precision_target => 0)\$\$)}),
	qr/^22023: precision_target must be in \(0, 1\]/, 'precision_target 0: 22023');
like(sq(qq{SELECT try_sql(\$\$SELECT $lit, cascade => 'twin', recall_target => 1.5)\$\$)}),
	qr/^22023: recall_target must be in \(0, 1\]/, 'recall_target 1.5: 22023');
like(sq(qq{SELECT try_sql(\$\$SELECT $lit, cascade => 'twin', cascade_delta => 1)\$\$)}),
	qr/^22023: cascade_delta must be in \(0, 1\)/, 'cascade_delta 1: 22023');
like(sq(qq{SELECT try_sql(\$\$SELECT llm_classify(body, '{a,b}', cascade => 'twin', accuracy_target => -1) FROM msgs\$\$)}),
	qr/^22023: accuracy_target must be in \(0, 1\]/, 'accuracy_target -1 in a batch node: 22023');
like(sq(qq{SELECT try_sql(\$\$SELECT id FROM msgs WHERE $filter, cascade => 'nope')\$\$)}),
	qr/^22023: /, 'unknown cascade alias in a batch node: 22023');

# ---- the large model alone: the reference answers ----
my $alone = sq(qq{SELECT string_agg(id::text, ',' ORDER BY id) FROM msgs WHERE $filter)});
ok($alone ne '', "large model alone: some complaints ($alone)");

# ---- a cascade with a small model that agrees: rows kept by it, large calls saved ----
my ($twin0, $def0) = (finished('twin'), finished('default'));
my $plan = sq(qq{SET llm.cascade_min_sample = 10;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT id FROM msgs WHERE $filter, cascade => 'twin', $opts)});
my ($twin1, $def1) = (finished('twin'), finished('default'));
like($plan, qr/Cascade: twin => default \(precision 0\.6, recall 0\.6, delta 0\.2, seed 7\)/,
	'EXPLAIN: the cascade, its targets and seed');
my ($small, $large, $sample) = $plan =~ /Cascade Rows: small (\d+), large (\d+) \(sample (\d+)\)/;
ok(defined $small, 'EXPLAIN ANALYZE: rows per model') or diag($plan);
is($small + $large, 40, 'every row answered by one model');
is($sample, 10, 'sample: max(10, 20% of 40) rows');
cmp_ok($small, '>', 0, "the agreeing small model keeps rows ($small)");
like($plan, qr/Cascade Threshold: 0\.\d+ \(\d+ of 20 candidates\)/, 'EXPLAIN ANALYZE: the threshold');
is($twin1 - $twin0, 40, 'the small model scored every row');
is($def1 - $def0, $large, 'the large model answered only the rows routed to it (sample included)');
is(sq(qq{SET llm.cascade_min_sample = 10;
SELECT string_agg(id::text, ',' ORDER BY id) FROM msgs WHERE $filter, cascade => 'twin', $opts)}),
	$alone, 'answers equal the large model alone (the small model is the same file)');

# llm_progress counts the statement's cascade calls by kind (the raw
# function keeps the last statement's counters until the next one calls)
is(sq(qq{SET llm.cascade_min_sample = 10;
SELECT count(*) FROM msgs WHERE $filter, cascade => 'twin', $opts);
SELECT cascade_small_calls, cascade_sample_calls, cascade_large_calls
FROM llm_progress() WHERE pid = pg_backend_pid()}),
	scalar(() = $alone =~ /\d+/g) . "\n40|$sample|" . ($large - $sample),
	'llm_progress: small calls, sampled large calls, other large calls');

# no cascade_seed: the setting's
like(sq(qq{SET llm.cascade_min_sample = 10;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT id FROM msgs WHERE $filter, cascade => 'twin', precision_target => 0.6, recall_target => 0.6,
  cascade_delta => 0.2, cascade_seed => NULL)}),
	qr/seed 0\)/, 'cascade_seed NULL: llm.cascade_seed');

# ---- too few rows for the sample: every row to the large model, the small one never called ----
($twin0, $def0) = (finished('twin'), finished('default'));
$plan = sq(qq{SET llm.cascade_min_sample = 10;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT id FROM few WHERE $filter, cascade => 'twin', $opts)});
($twin1, $def1) = (finished('twin'), finished('default'));
like($plan, qr/Cascade Rows: small 0, large 15 \(sample 0\)/, 'too few rows: all 15 to the large model');
like($plan, qr/Cascade Threshold: none \(too few rows/, 'EXPLAIN says why');
is($twin1 - $twin0, 0, 'too few rows: no small-model call');
is($def1 - $def0, 15, 'too few rows: one large-model call per row');
is(sq(qq{SET llm.cascade_min_sample = 10;
SELECT string_agg(id::text, ',' ORDER BY id) FROM few WHERE $filter, cascade => 'twin', $opts)}),
	sq(qq{SELECT string_agg(id::text, ',' ORDER BY id) FROM few WHERE $filter)}),
	'too few rows: the large model alone');

# ---- where the cascade is off: the large model only ----
($twin0) = (finished('twin'));
$plan = sq(qq{SET llm.cascade_min_sample = 10;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT id FROM msgs WHERE $filter, cascade => 'twin', $opts) LIMIT 3});
like($plan, qr/Cascade: off \(under a LIMIT\)/, 'LIMIT: cascade off, EXPLAIN says so');
$plan = sq(qq{SET llm.cascade_min_sample = 10; SET llm.enable_cascades = off;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT id FROM msgs WHERE $filter, cascade => 'twin', $opts)});
like($plan, qr/Cascade: off \(llm.enable_cascades is off\)/, 'llm.enable_cascades = off');
is(sq(qq{SET llm.enable_batch_scan = off;
SELECT count(*) FROM msgs WHERE $filter, cascade => 'twin', $opts)}),
	scalar(() = $alone =~ /\d+/g), 'row by row (no batch node): the large model alone');
$plan = sq(qq{SET llm.cascade_min_sample = 10;
EXPLAIN (COSTS OFF) DECLARE d CURSOR FOR SELECT id FROM msgs WHERE $filter, cascade => 'twin', $opts)});
like($plan, qr/Cascade: off \(a cursor\)/, 'a cursor: cascade off');
is(finished('twin') - $twin0, 0, 'LIMIT, off, row by row, cursor: no small-model call');

# ---- llm.cascade_model: the default small model ----
like(sq(qq{SET llm.cascade_model = 'twin';
EXPLAIN (COSTS OFF) SELECT id FROM msgs WHERE $filter)}),
	qr/Cascade: twin => default \(precision 0\.95, recall 0\.95, delta 0\.05, seed 0\)/,
	'llm.cascade_model and the default targets');
unlike(sq(qq{SET llm.cascade_model = 'twin';
EXPLAIN (COSTS OFF) SELECT id, llm_generate(body) FROM msgs}),
	qr/Cascade/, 'llm.cascade_model: only llm_filter and llm_classify');

# ---- llm_classify: accuracy target, rows kept by the agreeing small model ----
my $labels = q{'{complaint,praise,question}'};
my $classify_alone = sq(qq{SELECT string_agg(llm_classify(body, $labels), ',' ORDER BY id) FROM msgs});
($twin0, $def0) = (finished('twin'), finished('default'));
$plan = sq(qq{SET llm.cascade_min_sample = 10;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT id, llm_classify(body, $labels, cascade => 'twin', accuracy_target => 0.7, cascade_delta => 0.2,
                        cascade_seed => 3) FROM msgs});
like($plan, qr/Cascade: twin => default \(accuracy 0\.7, delta 0\.2, seed 3\)/, 'llm_classify: EXPLAIN');
($small, $large) = $plan =~ /Cascade Rows: small (\d+), large (\d+)/;
cmp_ok($small // 0, '>', 0, "llm_classify: the small model keeps rows ($small)");
is(finished('default') - $def0, $large, 'llm_classify: large calls as EXPLAIN counts them');
is(sq(qq{SET llm.cascade_min_sample = 10;
SELECT string_agg(c, ',' ORDER BY id) FROM (SELECT id, llm_classify(body, $labels, cascade => 'twin',
  accuracy_target => 0.7, cascade_delta => 0.2, cascade_seed => 3) AS c FROM msgs) s}),
	$classify_alone, 'llm_classify: answers equal the large model alone');

# ---- an EvalPlanQual recheck uses the large model ----
# A updates row 2 and holds it for 30 s; B's UPDATE through a cascading
# filter, started meanwhile, waits for A and rechecks row 2's new version: one more large-model call,
# no small-model one.
my $a = LlmTest::start_query($node,
	"BEGIN; UPDATE msgs SET body = body WHERE id = 2; SELECT pg_sleep(30); COMMIT;");
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE wait_event = 'PgSleep'"),
	'recheck: the other transaction holds row 2');
($twin0, $def0) = (finished('twin'), finished('default'));
$plan = sq(qq{SET llm.cascade_min_sample = 10;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
UPDATE msgs SET body = body WHERE $filter, cascade => 'twin', $opts)});
LlmTest::finish_query($a);
($twin1, $def1) = (finished('twin'), finished('default'));
($small, $large) = $plan =~ /Cascade Rows: small (\d+), large (\d+)/;
ok(defined $large, 'recheck: the UPDATE cascaded') or diag($plan);
is($twin1 - $twin0, 40, 'recheck: no small-model call for it');
is($def1 - $def0, $large + 1, 'recheck: one large-model call for it');

# ---- the real pair: SmolLM2 small, Gemma 3 270M large ----
SKIP:
{
	skip 'Gemma 3 model not found (LLM_TEST_MODEL_GEMMA3)', 4 unless $have_gemma;
	my $g = qq{llm_classify(body, $labels, model => 'gemma'};
	my $gemma_alone = sq(qq{SELECT string_agg($g), ',' ORDER BY id) FROM msgs});
	$plan = sq(qq{SET llm.cascade_min_sample = 10;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT id, $g, cascade => 'twin', cascade_seed => 5) FROM msgs});
	like($plan, qr/Cascade: twin => gemma \(accuracy 0\.95, delta 0\.05, seed 5\)/, 'pair: EXPLAIN');
	($small, $large) = $plan =~ /Cascade Rows: small (\d+), large (\d+)/;
	is($small + $large, 40, "pair: rows per model ($small small, $large large)");
	my $cascade = sq(qq{SET llm.cascade_min_sample = 10;
SELECT string_agg(c, ',' ORDER BY id) FROM (SELECT id, $g, cascade => 'twin', cascade_seed => 5) AS c FROM msgs) s});
	my @a = split /,/, $gemma_alone;
	my @c = split /,/, $cascade;
	is(scalar(@c), 40, 'pair: every row answered');
	my $differ = grep { $a[$_] ne $c[$_] } 0 .. $#a;
	cmp_ok($differ, '<=', $small, "pair: answers differ from Gemma alone only on rows the small model kept ($differ)");
}

LlmTest::no_crash($node);
done_testing();
