# Shards: a coordinator and two shard instances, each with the extension and
# its own llm worker; the rows of one logical table (a partitioned table on
# the coordinator whose partitions are postgres_fdw foreign tables) live on
# the shards.  The helpers of scripts/llm_shard_helpers.sql run ONE
# statement from the coordinator on every shard at once (dblink):
#   * a generating SELECT: every row, in the order of the ORDER BY on the call,
#     with the texts one instance computes for the same rows; each shard
#     batches its own rows with its own worker and the two shards' request
#     windows overlap;
#   * an enrichment UPDATE on every shard: the same texts written back,
#     exactly once per row (a rerun does nothing: the command is idempotent);
#   * a failure on one shard after the other finished rolls both back;
#   * a shard that is down: a clear error naming it, nothing sent anywhere;
#   * the model check: a shard whose model file differs in one weight is
#     found by the file digest (not by the model's description alone).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my ($helpers) = grep { -f $_ } map { "$_/llm_shard_helpers.sql" }
  ($FindBin::RealBin, "$FindBin::RealBin/../../sql/contrib");
ok(defined $helpers, 'llm_shard_helpers.sql found');

# one compute thread each: the two shards together use this machine's two cores
my $conf = "llm.threads = 1\n";
my $coord = LlmTest::new_node('coordinator', $conf);
my @shards = map { LlmTest::new_node($_, $conf) } ('shard1', 'shard2');

for my $s (@shards)
{
	$s->safe_psql('postgres', 'CREATE TABLE tickets (id int PRIMARY KEY, body text NOT NULL, summary text)');
}
my $user = $coord->safe_psql('postgres', 'SELECT current_user');
$coord->safe_psql('postgres', 'CREATE EXTENSION postgres_fdw; CREATE EXTENSION dblink;');
for my $i (0, 1)
{
	my ($s, $n) = ($shards[$i], $i + 1);
	$coord->safe_psql('postgres', sprintf(q{
CREATE SERVER shard%d FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '%s', port '%d', dbname 'postgres');
CREATE USER MAPPING FOR CURRENT_USER SERVER shard%d OPTIONS (user '%s');},
		$n, $s->host, $s->port, $n, $user));
}
# ids below 100 on shard1, the others on shard2
$coord->safe_psql('postgres', q{
CREATE TABLE tickets (id int NOT NULL, body text NOT NULL, summary text) PARTITION BY RANGE (id);
CREATE FOREIGN TABLE tickets_1 PARTITION OF tickets FOR VALUES FROM (MINVALUE) TO (100)
  SERVER shard1 OPTIONS (table_name 'tickets');
CREATE FOREIGN TABLE tickets_2 PARTITION OF tickets FOR VALUES FROM (100) TO (MAXVALUE)
  SERVER shard2 OPTIONS (table_name 'tickets');
CREATE TYPE ticket_summary AS (id int, summary text);
INSERT INTO tickets (id, body) VALUES
  (1, 'The app crashes when I open the settings page.'),
  (2, 'I was charged twice for my subscription this month.'),
  (3, 'Please reset my password, the reset link expired.'),
  (4, 'The export to CSV button does nothing.'),
  (5, 'How do I add a second admin to our workspace?'),
  (6, 'Invoices show the wrong company address.'),
  (101, 'Sync stopped working after the last update.'),
  (102, 'I cannot log in with single sign-on any more.'),
  (103, 'The mobile app drains my battery quickly.'),
  (104, 'Please cancel my plan at the end of the month.'),
  (105, 'Search returns no results for older tickets.'),
  (106, 'Our team needs an invoice in euros instead of dollars.');
});
my ($ok, $out, $err) = $coord->psql('postgres', slurp_file($helpers), on_error_stop => 1);
is($err, '', 'helpers loaded into the coordinator');
is($coord->safe_psql('postgres', "SELECT llm_shard_servers('tickets')"), '{shard1,shard2}',
	'llm_shard_servers: the servers of the partitions');
is(join(',', map { $_->safe_psql('postgres', 'SELECT count(*) FROM tickets') } @shards), '6,6',
	'rows spread over the shards');

my $gen = q{llm_generate('Summarize this support ticket in one sentence.' || E'\n' || body, max_tokens => 12)};
# one instance computing the same rows: the coordinator's own worker
$coord->safe_psql('postgres', 'CREATE TABLE tickets_ref AS SELECT id, body FROM tickets');
my $want = $coord->safe_psql('postgres',
	"SELECT id, replace($gen, E'\\n', ' ') FROM tickets_ref ORDER BY id");
is(scalar(split /\n/, $want), 12, 'single instance: 12 rows');

sub reset_shards { $_->safe_psql('postgres', 'SELECT llm_stat_reset()') for @shards; }

# per shard: [first request's arrival, last request's end] (epoch seconds,
# from the worker's own records), finished requests, max batch size
sub window
{
	my ($s) = @_;
	my ($t0, $t1, $n) = split /\|/, $s->safe_psql('postgres', q{
SELECT extract(epoch FROM min(finished_at - total_ms * interval '1 ms')), extract(epoch FROM max(finished_at)), count(*)
FROM llm_recent_requests() WHERE outcome IN ('stop', 'length')});
	my $max = $s->safe_psql('postgres', 'SELECT max_batch_size FROM llm_stat');
	return { t0 => $t0, t1 => $t1, n => $n, max_batch => $max };
}

# both shards worked at the same time: their windows overlap by at least
# half the shorter one and the statement took well under the sum of both
sub concurrent
{
	my ($what, $wall, @w) = @_;
	my @span = map { $_->{t1} - $_->{t0} } @w;
	my $overlap = ($w[0]{t1} < $w[1]{t1} ? $w[0]{t1} : $w[1]{t1}) - ($w[0]{t0} > $w[1]{t0} ? $w[0]{t0} : $w[1]{t0});
	my $shorter = $span[0] < $span[1] ? $span[0] : $span[1];
	note sprintf('%s: shard windows %.2f s and %.2f s, overlap %.2f s, statement %.2f s',
		$what, @span, $overlap, $wall);
	cmp_ok($overlap, '>=', 0.5 * $shorter, "$what: the two shards' request windows overlap");
	cmp_ok($wall, '<', 0.8 * ($span[0] + $span[1]), "$what: the statement takes well under the sum of the shards' windows");
	for my $i (0, 1)
	{
		is($w[$i]{n}, 6, "$what: shard" . ($i + 1) . ' generated its 6 rows once');
		cmp_ok($w[$i]{max_batch}, '>=', 2, "$what: shard" . ($i + 1) . ' batched its rows in its own worker');
	}
}

# ONE statement on the coordinator generates for every row
my $select = "SELECT id, replace(summary, E'\\n', ' ') FROM llm_shard_query(llm_shard_servers('tickets'), "
  . "\$q\$SELECT id, $gen FROM tickets\$q\$, NULL::ticket_summary) ORDER BY id";
reset_shards();
my $t = time;
my $got = $coord->safe_psql('postgres', $select);
my $wall = time - $t;
is($got, $want, 'fan-out SELECT: every row, in order, the texts of one instance');
concurrent('fan-out SELECT', $wall, map { window($_) } @shards);

# the enrichment: an UPDATE on every shard, issued from the coordinator
my $enrich = "SELECT server || ': ' || status FROM llm_shard_exec(llm_shard_servers('tickets'), "
  . "\$q\$UPDATE tickets SET summary = $gen WHERE summary IS NULL\$q\$)";
reset_shards();
$t = time;
is($coord->safe_psql('postgres', $enrich), "shard1: UPDATE 6\nshard2: UPDATE 6", 'enrichment: one UPDATE per shard');
$wall = time - $t;
concurrent('enrichment UPDATE', $wall, map { window($_) } @shards);
my $stored = "SELECT id, replace(summary, E'\\n', ' ') FROM tickets ORDER BY id";
is($coord->safe_psql('postgres', $stored), $want, 'enrichment: the shards hold the texts of one instance');
is($coord->safe_psql('postgres', $enrich), "shard1: UPDATE 0\nshard2: UPDATE 0", 'enrichment again: nothing to do');
is(join(',', map { window($_)->{n} } @shards), '6,6', 'enrichment again: no row generated twice');
is($coord->safe_psql('postgres', $stored), $want, 'enrichment again: texts unchanged');

# a shard failing after the other one finished: both roll back
$coord->safe_psql('postgres', q{INSERT INTO tickets (id, body) VALUES
  (7, 'The dashboard loads very slowly in the morning.'), (8, 'Two-factor codes arrive late.'),
  (107, 'Our logo looks blurry on printed invoices.'), (108, 'Can we get a copy of our data?')});
my $missing = 'SELECT count(*) FROM tickets WHERE summary IS NULL';
$shards[1]->safe_psql('postgres',
	'ALTER TABLE tickets ADD CONSTRAINT summary_short CHECK (length(summary) < 2) NOT VALID');
reset_shards();
($ok, $out, $err) = $coord->psql('postgres', $enrich);
like($err, qr/shard "shard2": new row for relation "tickets" violates check constraint "summary_short"/,
	'failure on shard2: the error names the shard');
is(window($shards[0])->{n}, 2, 'failure on shard2: shard1 had generated its 2 rows');
is($shards[0]->safe_psql('postgres', $missing), '2', 'failure on shard2: shard1 rolled back, nothing half-written');
is($shards[1]->safe_psql('postgres', $missing), '2', 'failure on shard2: shard2 unchanged');
$shards[1]->safe_psql('postgres', 'ALTER TABLE tickets DROP CONSTRAINT summary_short');
is($coord->safe_psql('postgres', 'SELECT dblink_get_connections()'), '', 'no dblink connection left open');

# a shard that is down
$shards[1]->stop;
$shards[0]->safe_psql('postgres', 'SELECT llm_stat_reset()');
($ok, $out, $err) = $coord->psql('postgres', $enrich);
like($err, qr/shard "shard2" is unreachable/, 'shard2 down: the enrichment fails naming it');
like($err, qr/Nothing was sent to any shard/, 'shard2 down: nothing sent');
is(window($shards[0])->{n}, 0, 'shard2 down: shard1 generated nothing');
is($shards[0]->safe_psql('postgres', $missing), '2', 'shard2 down: shard1 unchanged');
($ok, $out, $err) = $coord->psql('postgres', $select);
like($err, qr/shard "shard2" is unreachable/, 'shard2 down: the fan-out SELECT fails naming it');
($ok, $out, $err) = $coord->psql('postgres', 'SELECT count(*) FROM tickets');
like($err, qr/could not connect to server "shard2"/, 'shard2 down: postgres_fdw names the server too');
$shards[1]->start;
LlmTest::wait_ready($shards[1]);
is($coord->safe_psql('postgres', $enrich), "shard1: UPDATE 2\nshard2: UPDATE 2",
	'shard2 back: the same command completes the missing rows');
is($coord->safe_psql('postgres', $missing), '0', 'every row enriched once');

# cancel on the coordinator reaches every shard
($ok, $out, $err) = $coord->psql('postgres',
	"SET statement_timeout = '1s'; SELECT count(*) FROM llm_shard_query(llm_shard_servers('tickets'), "
	  . "\$q\$SELECT id, llm_generate(body, max_tokens => 2000, temperature => 0.7, seed => 1) FROM tickets\$q\$, "
	  . "NULL::ticket_summary)");
like($err, qr/canceling statement due to statement timeout/, 'statement_timeout on the coordinator');
LlmTest::wait_idle($_, 'shard after the coordinator\'s timeout') for @shards;

# the model check: same model everywhere, then a copy with one changed
# weight on shard2
my $models = "SELECT server || ' ' || same_as_first || ' ' || status FROM llm_shard_models(llm_shard_servers('tickets'), %s)";
is($coord->safe_psql('postgres', sprintf($models, 'true')), "shard1 true ready\nshard2 true ready",
	'model check: both shards run the same model file');
my $path = $shards[1]->safe_psql('postgres', "SELECT llm_model_info()->>'model_path'");
my $copy = $shards[1]->basedir . '/changed-weight.gguf';
{
	open my $in, '<:raw', $path or die "$path: $!";
	local $/;
	my $bytes = <$in>;
	close $in;
	# the low bit of a byte near the end: tensor data, a weight differs slightly
	my $at = length($bytes) - 4099;
	substr($bytes, $at, 1) = chr(ord(substr($bytes, $at, 1)) ^ 1);
	open my $outf, '>:raw', $copy or die "$copy: $!";
	print $outf $bytes;
	close $outf;
}
$shards[1]->safe_psql('postgres', "ALTER SYSTEM SET llm.model = '$copy'; SELECT pg_reload_conf();");
ok($shards[1]->poll_query_until('postgres',
		"SELECT llm_model_info()->>'status' = 'ready' AND llm_model_info()->>'model_path' = '$copy'"),
	'shard2 runs the changed copy');
is($coord->safe_psql('postgres', sprintf($models, 'false')), "shard1 true ready\nshard2 true ready",
	'model check without the file digest: the changed weight is not seen (same description and size)');
is($coord->safe_psql('postgres', sprintf($models, 'true')), "shard1 true ready\nshard2 false ready",
	'model check with the file digest: shard2 runs a different model');

LlmTest::no_crash($_) for ($coord, @shards);
$_->stop for ($coord, @shards);
done_testing();
