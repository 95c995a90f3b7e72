# Durable jobs across a failover: a primary runs a job while a streaming
# standby replays it; the standby runs no job runner (the launcher starts
# only after recovery) and its job tables only follow the primary's; the
# primary stops with -m immediate in the middle of the job, the standby is
# promoted, and the job goes on there by itself: every row filled, none
# written twice (a trigger on the target records each write, and the record
# replicates with the write, so a write lost with the old primary's last
# commits is lost with its record), each value what the prompt generates on
# the new primary.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# allows_streaming shrinks shared_buffers and max_connections: give them back.
# A small window keeps the job going for several seconds on two cores.
my $conf = q{
shared_buffers = 16MB
max_connections = 20
max_worker_processes = 16
llm.job_naptime = 200ms
llm.batch_window = 2
};
my $primary = LlmTest::new_node('primary', $conf, init => { allows_streaming => 1 });

my $N = 32;
my $MT = 12;
LlmTest::job_table($primary, $N, q{'Say the number ' || i || ' in words, then count to ten.'});

$primary->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->start;
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 't', 'standby in recovery');
LlmTest::wait_ready($standby);

sub on { my ($node, $sql) = @_; return $node->safe_psql('postgres', $sql); }

my $job = on($primary, "SELECT llm_enrich('tickets', 'summary', \$\$'Summarize: ' || body\$\$, max_tokens => $MT)");
ok($job > 0, "job $job created on the primary");

# the standby sees the job progress through replay alone
ok($standby->poll_query_until('postgres', "SELECT rows_done >= 4 FROM llm_jobs WHERE id = $job"),
	'the standby replays the job\'s progress');
is(on($standby, "SELECT count(*) FROM pg_stat_activity WHERE backend_type IN ('llm job runner', 'llm job launcher')"),
	'0', 'no job launcher or runner on the standby');
my $done_before = on($standby, "SELECT rows_done FROM llm_jobs WHERE id = $job");
cmp_ok($done_before, '<', $N, "the job is mid-way when the primary stops ($done_before of $N rows)");

$primary->stop('immediate');
# what the standby has of the old primary's writes, all of it replayed
ok($standby->poll_query_until('postgres', 'SELECT pg_last_wal_replay_lsn() = pg_last_wal_receive_lsn()'),
	'the standby replayed all it received');
my $last_old = on($standby, 'SELECT max(at) FROM writes');
my $rows_old = on($standby, 'SELECT count(*) FROM tickets WHERE summary IS NOT NULL');
$standby->promote;
is(on($standby, 'SELECT pg_is_in_recovery()'), 'f', 'standby promoted');

LlmTest::wait_job_state($standby, $job, 'done', 'on the promoted standby');
ok($standby->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'llm job launcher'"),
	'a job launcher runs after the promotion');
is(on($standby, 'SELECT count(*) FROM tickets WHERE summary IS NULL'), '0', 'after the failover: 0 rows lost');
is(on($standby, 'SELECT count(*) FROM (SELECT id FROM writes GROUP BY id HAVING count(*) > 1) d'),
	'0', 'after the failover: 0 rows written twice');
is(on($standby, 'SELECT count(*) FROM writes'), $N, "after the failover: $N writes recorded");
is(on($standby, qq{SELECT count(*) FROM tickets
                   WHERE summary IS DISTINCT FROM llm_generate('Summarize: ' || body, max_tokens => $MT)}),
	'0', 'after the failover: every value is what the prompt generates');
is(on($standby, "SELECT count(*) FROM writes WHERE at > '$last_old'"), $N - $rows_old,
	'the promoted standby wrote the ' . ($N - $rows_old) . ' rows the old primary left');
cmp_ok($rows_old, '<', $N, 'rows were left for the promoted standby');
is(on($standby, "SELECT rows_done || '|' || rows_failed || '|' || rows_in_flight FROM llm_jobs WHERE id = $job"),
	"$N|0|0", 'rows done / failed / in flight after the failover');
LlmTest::no_crash($standby);

done_testing();
