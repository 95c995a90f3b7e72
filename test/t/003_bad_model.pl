# Missing and malformed model files: the worker stays up (same pid, no
# restart loop), llm_model_info() says why, every request gets a clear ERROR
# naming the file; fixing llm.model and reloading loads it without a restart.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LlmTest::new_node('bad_model', "llm.model = '/nonexistent/dir/model.gguf'\n", no_wait => 1);
ok($node->poll_query_until('postgres', "SELECT llm_model_info()->>'status' = 'failed'"), 'missing model: status failed');
my $pid = LlmTest::worker_pid($node);
like($node->safe_psql('postgres', "SELECT llm_model_info()->>'error'"),
	qr{could not access model file "/nonexistent/dir/model.gguf": No such file or directory}, 'error names the file and reason');
is($node->safe_psql('postgres', q{SELECT try_sql($$SELECT llm_generate('hi')$$)}),
	'58P01: llm model is not available: could not access model file "/nonexistent/dir/model.gguf": No such file or directory',
	'generation fails with 58P01');
like($node->safe_psql('postgres', q{SELECT try_sql($$SELECT llm_tokenize('hi')$$)}), qr/^58P01: /, 'tokenize fails too');
is($node->safe_psql('postgres', "SELECT llm_generate(ARRAY['a', 'b'], on_error => 'null')"), '{NULL,NULL}',
	"on_error => 'null' gives NULLs");
sleep 3;
is(LlmTest::worker_pid($node), $pid, 'worker stayed up (same pid)');

my $real = $node->safe_psql('postgres', "SELECT boot_val FROM pg_settings WHERE name = 'llm.model'");
ok(-f $real, "installed default model exists ($real)");
my $dir = $node->basedir;

# malformed files: truncated, wrong magic, empty, a directory
open(my $in, '<:raw', $real) or die;
my $head;
read($in, $head, 100000);
close $in;
my %bad = (
	'truncated.gguf' => $head,
	'magic.gguf' => 'NOTGGUF' . ("\0" x 4096),
	'empty.gguf' => '',
	'header_only.gguf' => substr($head, 0, 24),
);
for my $name (sort keys %bad)
{
	open(my $out, '>:raw', "$dir/$name") or die;
	print $out $bad{$name};
	close $out;
}
for my $name ((sort keys %bad), 'a_directory')
{
	my $path = $name eq 'a_directory' ? $dir : "$dir/$name";
	$node->safe_psql('postgres', "ALTER SYSTEM SET llm.model = '$path'");
	$node->reload;
	ok($node->poll_query_until('postgres',
			"SELECT llm_model_info()->>'status' = 'failed' AND llm_model_info()->>'model_path' = '$path'"),
		"$name: status failed");
	my $res = $node->safe_psql('postgres', q{SELECT try_sql($$SELECT llm_generate('hi')$$)});
	like($res, qr/^XX000: llm model is not available: could not load model file "\Q$path\E": \S/,
		"$name: clear error ($res)");
	is(LlmTest::worker_pid($node), $pid, "$name: worker stayed up");
}

# fix it and reload: no server restart needed
$node->safe_psql('postgres', "ALTER SYSTEM SET llm.model = '$real'");
$node->reload;
LlmTest::wait_ready($node);
is($node->safe_psql('postgres', "SELECT llm_generate('Say yes.', max_tokens => 2) IS NOT NULL"), 't', 'works after the fix');
is(LlmTest::worker_pid($node), $pid, 'same worker process throughout');

# changing the model under running requests aborts them with a clear error
my $q = LlmTest::start_query($node,
	"SELECT llm_generate('Write a very long story about a whale.', max_tokens => 3000, temperature => 0.7, seed => 3)");
ok($node->poll_query_until('postgres', 'SELECT requests_running = 1 FROM llm_stat'), 'running before reload');
$node->safe_psql('postgres', "ALTER SYSTEM SET llm.context_length = 4096");
$node->reload;
my ($out, $err) = LlmTest::finish_query($q);
like($err, qr/request aborted: the llm worker is reloading its model after a configuration change/, 'running request aborted by reload');
LlmTest::wait_ready($node);
is($node->safe_psql('postgres', "SELECT llm_model_info()->>'context_length'"), '4096', 'new context length in effect');
LlmTest::wait_idle($node);
LlmTest::no_crash($node);
$node->stop;
done_testing();
