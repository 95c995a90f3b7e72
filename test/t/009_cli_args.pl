# llm-cli's arguments: "--" ends the options, so a text that starts with "-"
# (a negative number) can be tokenized, generated and scored; without "--"
# such a text is refused as an unknown option.  The token ids equal
# llm_tokenize()'s for the same text.
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
my $model = "$src/models/SmolLM2-135M-Instruct.Q4_1.gguf";
plan skip_all => "$cli or $model missing" unless -x $cli && -r $model;

my ($out, $err);
my $ok = IPC::Run::run([ $cli, 'tokenize', '-m', $model, '--', '-273.15' ], '>', \$out, '2>', \$err);
ok($ok, 'tokenize -- -273.15: accepted');
chomp $out;
like($out, qr/^\d+( \d+)*$/, 'tokenize -- -273.15: token ids');

$ok = IPC::Run::run([ $cli, 'tokenize', '-m', $model, '-273.15' ], '>', \$out, '2>', \$err);
ok(!$ok, 'tokenize -273.15 without --: refused');
like($err, qr/unknown option -273\.15/, 'tokenize -273.15 without --: the option is named');

my $ids;
IPC::Run::run([ $cli, 'tokenize', '-m', $model, '--', '--' ], '>', \$ids, '2>', \$err);
chomp $ids;
like($ids, qr/^\d+( \d+)*$/, 'tokenize -- --: the text "--" itself');

$ok = IPC::Run::run([ $cli, 'generate', '-m', $model, '--chat', '-n', '4', '--', '-5 plus 2 is' ],
	'>', \$out, '2>', \$err);
ok($ok, 'generate -- "-5 plus 2 is": accepted');
isnt($out, '', 'generate -- "-5 plus 2 is": some text');

$ok = IPC::Run::run([ $cli, 'score', '-m', $model, '--', '-1 or 1?', '-1', '1' ], '>', \$out, '2>', \$err);
ok($ok, 'score -- PROMPT LABEL...: labels may start with - too');

# the same ids as the extension's tokenizer
my $node = LlmTest::new_node('cli');
IPC::Run::run([ $cli, 'tokenize', '-m', $model, '--', '-273.15' ], '>', \$out, '2>', \$err);
chomp $out;
my $sql = $node->safe_psql('postgres', q{SELECT array_to_string(llm_tokenize('-273.15'), ' ')});
is($out, $sql, 'llm-cli tokenize -- -273.15 gives llm_tokenize()\'s ids');
LlmTest::no_crash($node);
$node->stop;
done_testing();
