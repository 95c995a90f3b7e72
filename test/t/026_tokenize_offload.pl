# Long prompts and llm_tokenize() texts are tokenized on the engine's
# tokenizer thread: a session streaming beside megabyte texts gets exactly
# the text it gets alone; the long texts get their ids and their errors
# (SQLSTATE and message) as before; a statement cancelled, or a backend
# terminated, while its text is being tokenized leaves the worker serving,
# with nothing left waiting.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LlmTest::new_node('tokenize_offload');
my $story = "SELECT llm_generate('Write a long, detailed story about a lighthouse keeper.', max_tokens => 160)";
my $alone = $node->safe_psql('postgres', $story);
cmp_ok(length($alone), '>', 100, 'the story alone: ' . length($alone) . ' chars');
my $per_word = $node->safe_psql('postgres', "SELECT array_length(llm_tokenize(' lighthouse'), 1)");
my $pid = LlmTest::worker_pid($node);

# about 1 MB of text each: a tokenize, and a prompt under the size bound that is too long once tokenized
my $long = LlmTest::start_query($node, qq{
SELECT array_length(llm_tokenize(repeat(' lighthouse', 90000)), 1);
SELECT array_length(llm_tokenize(repeat(' lighthouse', 60000)), 1);
SELECT llm_generate(repeat(' lighthouse', 90000), max_tokens => 1);
SELECT 'after';
}, script => 1);
my $beside = LlmTest::start_query($node, $story);
my ($out, $err) = LlmTest::finish_query($long);
is($out, join("\n", 90000 * $per_word, 60000 * $per_word, 'after'),
	'the long texts: ' . 90000 * $per_word . ' and ' . 60000 * $per_word . ' ids');
like($err, qr/prompt of \d+ tokens does not fit the context length of \d+ tokens/,
	'the long prompt: too long for the context, as before');
my ($story_out, $story_err) = LlmTest::finish_query($beside);
is($story_err, '', 'the story beside them: no error');
is($story_out, $alone, 'the story beside the long texts == alone');

# the SQLSTATE of the error that came back from the tokenizer thread
$node->safe_psql('postgres', q{
CREATE FUNCTION error_of(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END $$;});
like($node->safe_psql('postgres',
		q{SELECT error_of($$SELECT llm_generate(repeat(' sea', 200000), max_tokens => 1)$$)}),
	qr/^54000: prompt of \d+ tokens does not fit the context length/, 'SQLSTATE 54000');

# cancelled while being tokenized: the statement ends, the worker drops the request
for my $i (1 .. 3)
{
	my ($ret, $stdout, $stderr) = $node->psql('postgres',
		"SET statement_timeout = '20ms'; SELECT array_length(llm_tokenize(repeat(' sea', 250000)), 1)");
	ok($ret == 0 || $stderr =~ /canceling statement due to statement timeout/,
		"tokenize $i under a 20 ms statement timeout: answered or cancelled");
}
# a backend terminated while its text is being tokenized: one long text
# after another, so the statement is still running when it is found (a
# single text can be answered before the poll sees the query)
my $victim = LlmTest::start_query($node,
	"SELECT count(llm_tokenize(repeat(' sea', 250000) || g)) FROM generate_series(1, 10000) g");
my $victim_pid = LlmTest::backend_pid($node, 'generate_series(1, 10000) g');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($victim_pid)");
LlmTest::finish_query($victim);

LlmTest::wait_idle($node, 'after cancels and a terminated backend');
is(LlmTest::worker_pid($node), $pid, 'the same worker serves throughout');
is($node->safe_psql('postgres', "SELECT array_length(llm_tokenize(repeat(' lighthouse', 2000)), 1)"),
	2000 * $per_word, 'a long text after them: its ids');
LlmTest::no_crash($node);
$node->stop;
done_testing();
