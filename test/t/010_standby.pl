# Hot standby: a streaming standby made from a base backup of a primary,
# both with the extension preloaded and the model.  The llm worker runs on the
# standby (it starts at consistent state and holds no transaction id), the
# generation functions and a batched statement work in read-only transactions
# there with the primary's greedy output, and a batched generation meets WAL
# replay of write and VACUUM traffic on the table it reads:
#   * on a standby the node reads its child to completion (into a
#     tuplestore) before it first waits for generations, so its child scan
#     holds no buffer pin while rows wait: EXPLAIN ANALYZE shows
#     "Child Drained: true" there and not on the primary;
#   * max_standby_streaming_delay = 30s (the default): the statement finishes
#     and the startup process never waits for its buffer pin (wait event
#     BufferPin), so replay does not lag behind;
#   * a short delay: replay of cleanup records does not cancel the statement
#     (before the node drained its child: 40001, "User was holding shared
#     buffer pin for too long", pg_stat_database_conflicts.confl_bufferpin);
#   * the same statement with a Sort below the node (ORDER BY on a column
#     without an index): the Sort reads the child to completion anyway.
# hot_standby_feedback = on throughout, so the only conflicts are buffer-pin
# conflicts (without it, VACUUM removing row versions the standby's snapshot
# needs cancels the statement whatever it pins: a snapshot conflict).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# allows_streaming shrinks shared_buffers and max_connections: give them back
my $conf = "llm.threads = 1\nshared_buffers = 16MB\nmax_connections = 20\n";
my $primary = LlmTest::new_node('primary', $conf, init => { allows_streaming => 1 });

# tickets for the function checks; conf_t: 32 short rows on one heap page
# (fillfactor 50 leaves room for HOT updates there) and no index, so the
# batched scan below reads them from page 0 and an ORDER BY is a Sort.
# vacuum_truncate = false: truncating empty tail pages takes an
# AccessExclusiveLock, whose replay is a lock conflict for any reader of the
# table on the standby, pinned buffer or not
$primary->safe_psql('postgres', q{
CREATE TABLE tk (id int PRIMARY KEY, body text);
INSERT INTO tk VALUES
  (1, 'My invoice shows the wrong VAT number.'),
  (2, 'The app crashes when I open the settings page.'),
  (3, 'Please reset my password, the link expired.'),
  (4, 'Can I move my subscription to another team?');
CREATE TABLE conf_t (id int, p text, n int NOT NULL DEFAULT 0) WITH (fillfactor = 50, vacuum_truncate = false);
INSERT INTO conf_t (id, p) SELECT g, 'Name a color number ' || g || '.' FROM generate_series(1, 32) g;
});
is($primary->safe_psql('postgres', 'SELECT count(DISTINCT (ctid::text::point)[0]) FROM conf_t'), '1',
	'conf_t on one heap page');

my %q = (
	generate => q{SELECT llm_generate('Say hello to the support team.', max_tokens => 12)},
	complete => q{SELECT text || '|' || finish_reason || '|' || prompt_tokens || '|' || completion_tokens
	  FROM llm_complete('Name three colors.', max_tokens => 12)},
	chat => q{SELECT llm_chat('[{"role": "user", "content": "What is 2 + 2?"}]', max_tokens => 12)},
	batched => q{SELECT id, llm_generate('Summarize in one sentence.' || E'\n' || body, max_tokens => 12) FROM tk},
);
my $conf_q = q{SELECT id, replace(llm_generate(p, max_tokens => 8), E'\n', ' ') FROM conf_t};
my %want = map { $_ => $primary->safe_psql('postgres', $q{$_}) } keys %q;
my $conf_want = $primary->safe_psql('postgres', "$conf_q ORDER BY id");
is(scalar(split /\n/, $want{batched}), 4, 'primary: batched statement, 4 rows');

# the standby: base backup, streaming, hot standby; same postgresql.conf
$primary->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->append_conf('postgresql.conf', q{
hot_standby_feedback = on
wal_receiver_status_interval = 1s
});
$standby->start;
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 't', 'standby in recovery');
LlmTest::wait_ready($standby);
my $worker = LlmTest::worker_pid($standby);
is($standby->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'llm worker' AND pid = $worker AND backend_xid IS NULL"),
	'1', 'llm worker runs on the standby without a transaction id');

# read-only transactions on the standby: the primary's greedy output
for my $k (sort keys %q)
{
	my ($ro, $got) = split /\n/,
	  $standby->safe_psql('postgres', "BEGIN TRANSACTION READ ONLY; SHOW transaction_read_only; $q{$k}; COMMIT"), 2;
	is($ro, 'on', "$k: read-only transaction");
	is($got, $want{$k}, "$k: same greedy output on the standby as on the primary");
}
like($standby->safe_psql('postgres', "EXPLAIN (COSTS OFF) $q{batched}"), qr/Custom Scan \(LLM Batch\)/,
	'standby: the statement runs through the LLM Batch node');
like($standby->safe_psql('postgres', "EXPLAIN (COSTS OFF) $conf_q ORDER BY id"),
	qr/LLM Batch(.*\n)*.*->  Sort\n(.*\n)*.*->  Seq Scan on conf_t/, 'with ORDER BY id: a Sort below the node');
like($standby->safe_psql('postgres', "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) $q{batched}"),
	qr/Child Drained: true/, 'standby: the node reads its child to completion before waiting');
unlike($primary->safe_psql('postgres', "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) $q{batched}"),
	qr/Child Drained/, 'primary: the node reads ahead only its window');

# One batched statement on the standby while the primary updates conf_t and
# vacuums it (HOT updates on page 0, so each VACUUM prunes the page the
# node's child scan holds pinned).  Returns the statement's output, error,
# conflict counts before/after and whether the startup process was seen
# waiting for a buffer pin.
sub conflict_run
{
	my ($sql) = @_;
	my $count = "SELECT confl_bufferpin || ' ' || confl_tablespace + confl_lock + confl_snapshot + confl_bufferpin + confl_deadlock "
	  . "FROM pg_stat_database_conflicts WHERE datname = 'postgres'";
	my ($pin0, $all0) = split / /, $standby->safe_psql('postgres', $count);
	# the standby's next transaction must be newer than the dead rows VACUUM
	# removes, so hot_standby_feedback never holds them back
	my $xid = $primary->safe_psql('postgres',
		'UPDATE conf_t SET n = n + 1 RETURNING txid_current()');
	($xid) = split /\n/, $xid;
	$primary->wait_for_catchup($standby);
	my $h = LlmTest::start_query($standby, $sql);
	$primary->poll_query_until('postgres',
		"SELECT coalesce(backend_xmin::text::bigint, 0) > $xid FROM pg_stat_replication")
	  or diag 'standby xmin not reported';
	my ($pin_wait, $iter) = (0, 0);
	while ($h->{h}->pumpable)
	{
		$primary->safe_psql('postgres', 'UPDATE conf_t SET n = n + 1; VACUUM conf_t;');
		$pin_wait ||= $standby->safe_psql('postgres',
			"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'startup' AND wait_event = 'BufferPin'");
		$h->{h}->pump_nb;
		last if ++$iter > 2000;
	}
	my ($out, $err) = LlmTest::finish_query($h);
	$primary->wait_for_catchup($standby);
	# a cancelled session reports its conflict when it exits
	$standby->poll_query_until('postgres',
		"SELECT confl_tablespace + confl_lock + confl_snapshot + confl_bufferpin + confl_deadlock > $all0 "
		  . "FROM pg_stat_database_conflicts WHERE datname = 'postgres'")
	  if $err =~ /conflict with recovery/;
	my ($pin1, $all1) = split / /, $standby->safe_psql('postgres', $count);
	return { out => $out, err => $err, conflicts => $pin1 - $pin0, all_conflicts => $all1 - $all0,
		pin_wait => $pin_wait };
}

# "id|text" lines in id order (without ORDER BY the rows come in heap order)
sub sorted_rows { return join("\n", sort { $a <=> $b } split /\n/, $_[0]); }

# default max_standby_streaming_delay (30s): finished; replay never waited for a pin
is($standby->safe_psql('postgres', 'SHOW max_standby_streaming_delay'), '30s', 'default delay 30s');
my $r = conflict_run("$conf_q /* default delay */");
is($r->{err}, '', 'default delay: the batched statement is not cancelled');
is(sorted_rows($r->{out}), sorted_rows($conf_want), 'default delay: every row, same greedy text as on the primary');
is($r->{all_conflicts}, 0, 'default delay: no recovery conflict');
ok(!$r->{pin_wait}, 'default delay: the startup process never waited for a buffer pin (replay did not lag)');
LlmTest::wait_idle($standby, 'after the default-delay run');

# a short delay: replay of the cleanup records does not cancel the statement
$standby->append_conf('postgresql.conf', "max_standby_streaming_delay = 500ms\n");
$standby->reload;
$standby->poll_query_until('postgres', "SELECT current_setting('max_standby_streaming_delay') = '500ms'");
$r = conflict_run("$conf_q /* short delay */");
is($r->{err}, '', 'short delay: the batched statement is not cancelled by replay');
is(sorted_rows($r->{out}), sorted_rows($conf_want), 'short delay: every row, same greedy text');
is($r->{conflicts}, 0, 'short delay: no buffer-pin conflict (pg_stat_database_conflicts.confl_bufferpin)');
is($r->{all_conflicts}, 0, 'short delay: no recovery conflict of any kind');
LlmTest::wait_idle($standby, 'after the short-delay run');

# the same statement with a Sort below the node: no pin while generating
$r = conflict_run("$conf_q ORDER BY id /* sorted */");
is($r->{err}, '', 'short delay, Sort below the node: not cancelled');
is($r->{out}, $conf_want, 'short delay, Sort below the node: every row, same greedy text');
is($r->{all_conflicts}, 0, 'short delay, Sort below the node: no recovery conflict');
LlmTest::wait_idle($standby, 'after the sorted statement');

is(LlmTest::worker_pid($standby), $worker, 'the standby\'s llm worker never restarted');
unlike(slurp_file($standby->logfile), qr/"llm worker".*exited|cannot execute .* during recovery|cannot make new WAL entries/,
	'the standby\'s llm worker never failed or tried to write');
LlmTest::no_crash($standby);
LlmTest::no_crash($primary);
$standby->stop;
$primary->stop;
done_testing();
