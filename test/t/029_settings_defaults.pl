# Every engine setting's GUC, on a server started with no llm.* setting
# (llm.model's default is the model `make install` put in the share
# directory), shows the engine's own default: the row of the engine's
# settings list (engine/config_list.h) as `llm-cli config-defaults`
# prints it, a process without PostgreSQL.  SHOW's units are normalized to
# the setting's (1GB is 1024 MB, 2s is 2000 ms).  The worker then loads its
# model with those defaults.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $src = $ENV{LLM_SOURCE_DIR};
plan skip_all => 'LLM_SOURCE_DIR (the checkout, set by test/run-tap) is not set' unless $src;
my $cli = "$src/build/llm-cli";
plan skip_all => "$cli missing" unless -x $cli;

my ($out, $err);
ok(IPC::Run::run([ $cli, 'config-defaults' ], '>', \$out, '2>', \$err), 'llm-cli config-defaults runs')
  or diag($err);
my @rows = map { [ split /\t/, $_, -1 ] } split /\n/, $out;
ok(scalar(grep { $_->[0] eq 'llm.batch_step_ms' } @rows) == 1, 'the list names llm.batch_step_ms once');

# SHOW's value in the setting's own unit: "1GB" in MB is 1024, "2s" in ms 2000
my %per = (
	MB => { kB => 1 / 1024, MB => 1, GB => 1024, TB => 1024 * 1024 },
	ms => { us => 1 / 1000, ms => 1, s => 1000, min => 60_000, h => 3_600_000, d => 86_400_000 });

sub in_unit
{
	my ($shown, $unit) = @_;
	return $shown if $unit eq '';
	return "unparsable '$shown'" unless $shown =~ /^(-?\d+)\s*([a-zA-Z]*)$/;
	my ($n, $u) = ($1, $2);
	return $n if $u eq '';
	return "unknown unit '$u'" unless exists $per{$unit}{$u};
	return $n * $per{$unit}{$u};
}

my $node = LlmTest::new_node('settings_defaults', '', engine_defaults => 1);
my $set = $node->safe_psql('postgres',
	q{SELECT string_agg(name, ' ' ORDER BY name) FROM pg_settings
	  WHERE name LIKE 'llm.%' AND source <> 'default'});
is($set, '', 'no llm.* setting is set: every one at its default');
for my $r (@rows)
{
	my ($name, $default, $unit) = @$r;
	my $shown = $node->safe_psql('postgres', "SHOW $name");
	is(in_unit($shown, $unit // ''), $default, "$name: SHOW at start ($shown) is the engine's default");
}
LlmTest::no_crash($node);
$node->stop;
done_testing();
