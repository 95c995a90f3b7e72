# A model cascade's calls in llm_usage, and llm_classify's per-label recall
# (docs/CASCADES.md).  Each LLM Batch node that cascades adds its calls to
# the role's llm_usage when it ends: cascade_small_calls,
# cascade_sample_calls, cascade_large_calls, which must equal the requests
# the worker finished per alias (llm_models) and the node's EXPLAIN ANALYZE
# counts.  EXPLAIN ANALYZE of an llm_classify cascade shows each label's
# recall estimated on the sample and its lower confidence bound at
# 1 - delta: with a small model that agrees with the large one ('twin', the
# same file under another alias) every sampled label's recall is 1, its
# bound the Clopper-Pearson one for no miss in its k sampled rows at
# delta / 20 (the candidate thresholds), (delta / 20)^(1/k) rounded down,
# and the labels' sampled rows add up to the sample.  With SmolLM2 small
# and Gemma 3 270M large ($LLM_TEST_MODEL_GEMMA3) the figures are shares of
# the sample, each bound at most its estimate.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;
use POSIX qw(floor);

my ($node, $have_gemma) = LlmTest::new_cascade_node('cascade_usage');

sub sq { return $node->safe_psql('postgres', $_[0]); }

sub finished
{
	my ($alias) = @_;
	return sq("SELECT requests_finished FROM llm_models WHERE alias = '$alias'");
}

# this role's cascade counters in llm_usage: "small|sample|large" (zeros before any)
sub usage
{
	my $u = sq(q{SELECT cascade_small_calls || '|' || cascade_sample_calls || '|' || cascade_large_calls
FROM llm_usage WHERE role = current_user AND database = current_database()});
	return $u eq '' ? [0, 0, 0] : [split /\|/, $u];
}

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
});

my $filter = q{llm_filter(body, 'Is this a complaint?'};
my $opts = q{precision_target => 0.6, recall_target => 0.6, cascade_delta => 0.2, cascade_seed => 7};
my $labels = q{'{complaint,praise,question}'};

# ---- llm_filter: the node's calls in llm_usage, as the worker counted them ----
my $u0 = usage();
my ($twin0, $def0) = (finished('twin'), finished('default'));
my $plan = sq(qq{SET llm.cascade_min_sample = 10;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT id FROM msgs WHERE $filter, cascade => 'twin', $opts)});
my $u1 = usage();
my ($twin1, $def1) = (finished('twin'), finished('default'));
my ($small_calls) = $plan =~ /Cascade Small Calls: (\d+)/;
my ($large_calls) = $plan =~ /Cascade Large Calls: (\d+)/;
my ($sample) = $plan =~ /\(sample (\d+)\)/;
ok(defined $small_calls && defined $large_calls && defined $sample, 'EXPLAIN ANALYZE: the cascade ran')
  or diag($plan);
is($u1->[0] - $u0->[0], 40, 'llm_usage: 40 small-model calls');
is($u1->[0] - $u0->[0], $twin1 - $twin0, 'llm_usage small calls = the small model\'s finished requests');
is($u1->[1] - $u0->[1], $sample, "llm_usage: the sample's large-model calls ($sample)");
is(($u1->[1] - $u0->[1]) + ($u1->[2] - $u0->[2]), $def1 - $def0,
	'llm_usage sampled + other large calls = the large model\'s finished requests');
is(($u1->[1] - $u0->[1]) + ($u1->[2] - $u0->[2]), $large_calls, 'llm_usage large calls = EXPLAIN\'s');
cmp_ok($u1->[2] - $u0->[2], '<', 40 - $sample, 'some large calls saved (the small model agrees)');

# the same statement without EXPLAIN, and a node without a cascade adds nothing
$u0 = usage();
sq(qq{SET llm.cascade_min_sample = 10; SELECT count(*) FROM msgs WHERE $filter, cascade => 'twin', $opts)});
$u1 = usage();
is(join(',', map { $u1->[$_] - $u0->[$_] } 0 .. 2),
	join(',', 40, $sample, $large_calls - $sample), 'a plain SELECT counts the same calls');
$u0 = usage();
sq(qq{SELECT count(*) FROM msgs WHERE $filter) AND id <= 5});
sq(qq{SET llm.cascade_min_sample = 10; SET llm.enable_cascades = off;
SELECT count(*) FROM msgs WHERE $filter, cascade => 'twin', $opts)});
$u1 = usage();
is(join(',', map { $u1->[$_] - $u0->[$_] } 0 .. 2), '0,0,0', 'no cascade (none asked, or off): no cascade calls');

# the bound shown for no miss in k sampled rows at delta over the 20 candidates
sub no_miss_bound
{
	my ($k, $delta) = @_;
	return floor(1000 * ($delta / 20)**(1 / $k)) / 1000;
}

# ---- llm_classify: per-label recall, estimated on the sample, with its bound ----
$u0 = usage();
$plan = sq(qq{SET llm.cascade_min_sample = 10;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT id, llm_classify(body, $labels, cascade => 'twin', accuracy_target => 0.7, cascade_delta => 0.2,
                        cascade_seed => 3) FROM msgs});
$u1 = usage();
my ($recall) = $plan =~ /Cascade Class Recall: (.*)/;
ok(defined $recall, 'EXPLAIN ANALYZE: per-label recall') or diag($plan);
my $fig = qr/(?:1\.000 of \d+|none sampled) \(>= (?:1|\d\.\d{3})\)/;
like($recall, qr/^estimated on the sample, lower bound at 80% per label: complaint $fig, praise $fig, question $fig$/,
	"agreeing small model: every sampled label's recall is 1 ($recall)");
my $n = 0;
$n += $_ for $recall =~ / of (\d+)/g;
is($n, 10, 'the labels\' sampled rows add up to the sample');
my ($cp, $bad_bound) = (0, 0);
while ($recall =~ /1\.000 of (\d+) \(>= ([\d.]+)\)/g)
{
	my ($k, $b) = ($1, $2);
	next if $b eq '1';		# no row the small model answers can miss the label
	$cp++;
	$bad_bound++ if abs($b - no_miss_bound($k, 0.2)) > 0.0011;
}
ok($cp > 0 && $bad_bound == 0,
	"each bound is (0.2 / 20)^(1/k) rounded down ($cp labels checked, $bad_bound off)");
is($u1->[0] - $u0->[0], 40, 'llm_classify: llm_usage counts its small calls');
like(sq(qq{SET llm.cascade_min_sample = 10;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT id, llm_classify(body, $labels, cascade => 'twin') FROM msgs WHERE id <= 15}),
	qr/Cascade Threshold: none \(too few rows/, 'too few rows ...');
unlike(sq(qq{SET llm.cascade_min_sample = 10;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT id, llm_classify(body, $labels, cascade => 'twin') FROM msgs WHERE id <= 15}),
	qr/Class Recall/, '... no sample, no recall line');
like(sq(qq{SET llm.cascade_min_sample = 10;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT id, llm_classify(body, CASE WHEN id % 2 = 0 THEN '{complaint,praise,question}'
                                   ELSE '{praise,complaint,question}' END::text[],
                        cascade => 'twin', accuracy_target => 0.7, cascade_delta => 0.2, cascade_seed => 3) FROM msgs}),
	qr/Cascade Class Recall: not estimated \(the labels vary by row\)/, 'labels that vary by row: no estimate');
unlike(sq(qq{SET llm.cascade_min_sample = 10;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT id FROM msgs WHERE $filter, cascade => 'twin', $opts)}),
	qr/Class Recall/, 'llm_filter: no per-label recall');

# ---- the real pair: shares of the sample ----
SKIP:
{
	skip 'Gemma 3 model not found (LLM_TEST_MODEL_GEMMA3)', 5 unless $have_gemma;
	$plan = sq(qq{SET llm.cascade_min_sample = 10;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF, FORMAT JSON)
SELECT id, llm_classify(body, $labels, model => 'gemma', cascade => 'twin', accuracy_target => 0.2,
                        cascade_delta => 0.5, cascade_seed => 5) FROM msgs});
	($recall) = $plan =~ /"Cascade Class Recall": "([^"]*)"/;
	ok(defined $recall, "pair: per-label recall in JSON ($recall)") or diag($plan);
	like($recall, qr/^estimated on the sample, lower bound at 50% per label: /, 'pair: the bound\'s confidence');
	my @fig = $recall =~ /(?:(\d\.\d{3}) of (\d+)|none sampled) \(>= (1|\d\.\d{3})\)/g;
	my ($sum, $bad, $bad_bound) = (0, 0, 0);
	while (my ($r, $k, $b) = splice(@fig, 0, 3))
	{
		next unless defined $r;
		$sum += $k;
		$bad++ if $r < 0 || $r > 1 || abs($r * $k - int($r * $k + 0.5)) > 0.01;
		next if $b eq '1';
		$bad_bound++ if $b < 0 || $b > $r || ($r == 1 && abs($b - no_miss_bound($k, 0.5)) > 0.0011);
	}
	is($sum, 10, 'pair: the labels\' sampled rows add up to the sample');
	is($bad, 0, 'pair: each recall is a share of its label\'s sampled rows');
	is($bad_bound, 0, 'pair: each bound at most its estimate (the no-miss one where the estimate is 1)');
}

LlmTest::no_crash($node);
done_testing();
