# Leaks: thousands of short calls and hundreds of cancelled calls leave the
# KV blocks at their baseline and the worker's anonymous memory flat.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

# a small KV pool, so warm-up touches all of it (its pages are allocated lazily)
my $node = LlmTest::new_node('leaks', "llm.kv_cache_size = 16MB\n");
my $pid = LlmTest::worker_pid($node);

# anonymous resident memory of the worker, kB (the mmap'd model is file-backed)
sub rss_anon
{
	my $status = slurp_file("/proc/$pid/status");
	return $status =~ /^RssAnon:\s+(\d+) kB/m ? $1 : undef;
}

sub short_calls
{
	my ($n) = @_;
	my $script = "SELECT count(*) FROM (SELECT llm_generate('a' || i, raw => true, max_tokens => 1) FROM generate_series(1, $n) i) s;\n";
	my $q = LlmTest::start_query($node, $script, script => 1);
	my ($out, $err) = LlmTest::finish_query($q);
	is($out, $n, "$n short calls") or diag($err);
}

sub cancelled_calls
{
	my ($n) = @_;
	my $script = join('', map {
		"SET statement_timeout = '40ms'; SELECT llm_generate('Write a long story number $_.', max_tokens => 500);\n"
	} 1 .. $n);
	my $q = LlmTest::start_query($node, $script, script => 1);
	my ($out, $err) = LlmTest::finish_query($q);
	my $timeouts = () = $err =~ /statement timeout/g;
	cmp_ok($timeouts, '>=', $n / 2, "$n cancelled calls ($timeouts timed out)");
}

short_calls(500);
cancelled_calls(100);
LlmTest::wait_idle($node, 'warm-up');
my $kv0 = $node->safe_psql('postgres', 'SELECT kv_blocks_used FROM llm_stat');
my $rss0 = rss_anon();
ok(defined $rss0, "worker RssAnon readable ($rss0 kB)");

# Two equal rounds after the warm-up: the allocator may still reach its
# high-water mark in the first (a batch statement keeps up to llm.batch_window
# requests in flight, and timing under load decides how many), but a leak
# grows in every round, so the second round must add (almost) nothing.
short_calls(1000);
cancelled_calls(150);
LlmTest::wait_idle($node, 'after round 1: 1000 short and 150 cancelled calls');
my $rss1 = rss_anon();
short_calls(1000);
cancelled_calls(150);
LlmTest::wait_idle($node, 'after round 2: 1000 short and 150 cancelled calls');
my $rss2 = rss_anon();
is($node->safe_psql('postgres', 'SELECT kv_blocks_used FROM llm_stat'), $kv0, 'KV blocks in use at baseline');
cmp_ok($rss1 - $rss0, '<', 16384, "worker anonymous memory bounded after 1150 calls ($rss0 kB -> $rss1 kB)");
cmp_ok($rss2 - $rss1, '<', 2048, "worker anonymous memory flat over the next 1150 calls ($rss1 kB -> $rss2 kB)");
is(LlmTest::worker_pid($node), $pid, 'same worker throughout');
LlmTest::no_crash($node);
$node->stop;
done_testing();
