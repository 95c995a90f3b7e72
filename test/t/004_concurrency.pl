# Cross-session continuous batching: 8 sessions generating 256 tokens at once
# share the worker's steps (max batch >= 8) and get exactly the text each
# gets alone (greedy, and seeded sampling).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LlmTest::new_node('concurrency', "llm.max_running_requests = 16\n");
my @topics = ('a lighthouse keeper', 'a lost robot', 'a dragon who bakes bread', 'two rival chess players',
	'a city under the sea', 'a talking cat', 'the first day at a new school');
my @sql = map {
	"SELECT llm_generate('Write a long, detailed story about $_.', max_tokens => 256)"
} @topics;
push @sql, "SELECT llm_generate('Write a long, detailed story about a haunted train.', max_tokens => 256, temperature => 0.8, seed => 42)";

my @alone = map { $node->safe_psql('postgres', $_) } @sql;
for my $i (0 .. $#alone)
{
	cmp_ok(length($alone[$i]), '>', 200, "session $i alone: long output (" . length($alone[$i]) . ' chars)');
}

$node->safe_psql('postgres', 'SELECT llm_stat_reset()');
my @q = map { LlmTest::start_query($node, $_) } @sql;
my @together = map { my ($out, $err) = LlmTest::finish_query($_); is($err, '', 'no error'); $out } @q;
for my $i (0 .. $#alone)
{
	is($together[$i], $alone[$i], "session $i: same text alone and beside 7 others");
}
my $max = $node->safe_psql('postgres', 'SELECT max_batch_size FROM llm_stat');
cmp_ok($max, '>=', 8, "max batch size $max >= 8");
note $node->safe_psql('postgres', 'SELECT * FROM llm_stat');
LlmTest::wait_idle($node);
LlmTest::no_crash($node);
$node->stop;
done_testing();
