# llm_stat is the sum of the models' counters (llm_models) and of the
# requests no model holds now: the counts of a model stay in llm_stat when
# its alias leaves llm.models, when its row is taken by another alias and
# when the worker restarts (every row starts again from zero).
# llm_stat_reset() zeroes the sum and every row.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LlmTest::new_node('stat_sums', "max_worker_processes = 16\n");
my $smol = $node->safe_psql('postgres', "SELECT llm_model_info()->>'model_path'");

sub set_models
{
	my ($value, $n) = @_;
	$node->safe_psql('postgres', "ALTER SYSTEM SET llm.models = '$value'");
	$node->reload;
	ok($node->poll_query_until('postgres',
			"SELECT count(*) = $n AND bool_and(state = 'ready') FROM llm_models"),
		"llm.models = '$value': $n models ready");
}

# the counters llm_stat and llm_models both show
my @cols = qw(requests_finished requests_failed requests_aborted prompt_tokens completion_tokens);
my $stat_cols = join(" || ' ' || ", @cols);
my $sum_cols = join(" || ' ' || ", map { "sum($_)" } @cols);

sub stat_counts { return $node->safe_psql('postgres', "SELECT $stat_cols FROM llm_stat") }
sub model_sums { return $node->safe_psql('postgres', "SELECT $sum_cols FROM llm_models") }

set_models("small=$smol (context_length=512)", 2);
$node->safe_psql('postgres', q{SELECT llm_generate('Name a color.', max_tokens => 4)});
$node->safe_psql('postgres', q{SELECT llm_generate('Name a fruit.', max_tokens => 4)});
$node->safe_psql('postgres', q{SELECT llm_generate('Name a city.', max_tokens => 4, model => 'small')});
LlmTest::wait_idle($node);
is(stat_counts(), model_sums(), 'llm_stat: the sum of llm_models');
is($node->safe_psql('postgres', q{SELECT requests_finished FROM llm_stat}), '3', 'three requests finished');

my $before = stat_counts();

set_models('', 1);
is(stat_counts(), $before, 'llm_stat keeps the counts of a model removed from llm.models');

set_models("other=$smol (context_length=512)", 2);
is($node->safe_psql('postgres', q{SELECT requests_finished FROM llm_models WHERE alias = 'other'}), '0',
	'a new alias starts from zero');
is(stat_counts(), $before, 'llm_stat keeps them when the row serves another alias');

my $pid = LlmTest::worker_pid($node);
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
ok($node->poll_query_until('postgres',
		"SELECT worker_pid IS NOT NULL AND worker_pid <> $pid AND model_status = 'ready' FROM llm_stat"),
	'worker restarted');
ok($node->poll_query_until('postgres', "SELECT count(*) = 2 AND bool_and(state = 'ready') FROM llm_models"),
	'both models ready again');
is($node->safe_psql('postgres', 'SELECT sum(requests_finished) FROM llm_models'), '0',
	'the restarted worker\'s models start from zero');
is(stat_counts(), $before, 'llm_stat keeps the counts across the restart');

$node->safe_psql('postgres', 'SELECT llm_stat_reset()');
is(stat_counts(), '0 0 0 0 0', 'llm_stat_reset() zeroes the sum');
$node->safe_psql('postgres', q{SELECT llm_generate('Name a color.', max_tokens => 4, model => 'other')});
LlmTest::wait_idle($node);
is(stat_counts(), model_sums(), 'after the reset, llm_stat is the sum of llm_models again');
is($node->safe_psql('postgres', q{SELECT requests_finished FROM llm_models WHERE alias = 'other'}), '1',
	'the call counts in its model');

LlmTest::no_crash($node);
done_testing();
