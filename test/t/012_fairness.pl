# Mixed load: an interactive call during a bulk statement of another session
# is served in short steps (not one token per bulk step: its worker-side time
# stays well below 9 of the bulk's time per token, which is what FIFO
# admission gives it), with the text it gets alone; and of two bulk
# statements in two sessions, the second gets slots as soon as the first
# frees any, instead of after the first's whole queue.  Generous bounds:
# the real numbers come from bench/run --only fair.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $node = LlmTest::new_node('fairness', "llm.max_running_requests = 16\n");
my $para = 'The customer reports that the mobile app crashes every time the camera is opened to scan '
  . 'a receipt, on two different phones, after the latest update; reinstalling did not help and the '
  . 'support chat keeps timing out.';
$node->safe_psql('postgres', qq{
CREATE TABLE items AS SELECT g FROM generate_series(1, 160) g;
CREATE ROLE fair_a LOGIN IN ROLE llm_user;
CREATE ROLE fair_b LOGIN IN ROLE llm_user;
GRANT SELECT ON items TO fair_a, fair_b;
});
my $bulk = "CREATE TEMP TABLE out_x AS SELECT g, llm_generate('Summarize in one sentence: $para Ticket ' || g, "
  . "max_tokens => 24) AS t FROM items WHERE g <= %d";
my $interactive = "SELECT llm_generate('What is 2+2?', max_tokens => 8)";
my $alone = $node->safe_psql('postgres', $interactive);

# 1. interactive calls during a bulk statement (each bulk statement is one
# -c string: psql has it at start, while a script on stdin would only be fed
# when the harness pumps)
$node->safe_psql('postgres', 'SELECT llm_stat_reset()');
my $qa = LlmTest::start_query($node, "SET ROLE fair_a; " . sprintf($bulk, 96));
ok($node->poll_query_until('postgres', 'SELECT requests_running >= 8 FROM llm_stat'), 'bulk statement running');
my @texts;
for my $i (1 .. 3)
{
	push @texts, $node->safe_psql('postgres', $interactive);
	sleep 0.5;
}
is($_, $alone, 'interactive text under load = alone') for @texts;
my ($out, $err) = LlmTest::finish_query($qa);
is($err, '', 'bulk statement finished without error');
my $lat = $node->safe_psql('postgres', q{
SELECT max(total_ms) FILTER (WHERE prompt_tokens < 60),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY tpot_ms) FILTER (WHERE prompt_tokens >= 60)
FROM llm_recent_requests()});
my ($inter_ms, $bulk_tpot) = split /\|/, $lat;
note "interactive max total $inter_ms ms; bulk TPOT p50 $bulk_tpot ms";
cmp_ok($inter_ms, '<', 6 * $bulk_tpot,
	"interactive request took less than 6 bulk steps ($inter_ms ms vs TPOT $bulk_tpot ms; FIFO gives >= 9)");

# 2. two bulk statements in two sessions
$node->safe_psql('postgres', 'SELECT llm_stat_reset()');
my $q1 = LlmTest::start_query($node, "SET ROLE fair_a; " . sprintf($bulk, 160));
# the first statement's window has grown and queued requests beyond the running slots
ok($node->poll_query_until('postgres', 'SELECT requests_waiting >= 30 FROM llm_stat'), 'first statement queues');
my $done_before = $node->safe_psql('postgres',
	"SELECT coalesce(sum(requests), 0) FROM llm_usage WHERE role = 'fair_a'");
my $q2 = LlmTest::start_query($node, "SET ROLE fair_b; " . sprintf($bulk, 16));
my $a_at_b = -1;
for (1 .. 6000)
{
	my ($a, $b) = split /\|/, $node->safe_psql('postgres',
		"SELECT coalesce(sum(requests) FILTER (WHERE role = 'fair_a'), 0), "
		  . "coalesce(sum(requests) FILTER (WHERE role = 'fair_b'), 0) FROM llm_usage");
	if ($b > 0)
	{
		$a_at_b = $a - $done_before;
		last;
	}
	sleep 0.1;
}
($out, $err) = LlmTest::finish_query($q2);
is($err, '', 'second statement finished');
($out, $err) = LlmTest::finish_query($q1);
is($err, '', 'first statement finished');
ok($a_at_b >= 0 && $a_at_b < 30,
	"second session's first row came after $a_at_b rows of the first (its queue held >= 30: FIFO)");
LlmTest::wait_idle($node);
LlmTest::no_crash($node);
$node->stop;
done_testing();
