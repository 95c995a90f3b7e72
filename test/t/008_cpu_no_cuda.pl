# A worker on a machine without an NVIDIA device, with llm.device = 'auto'
# and the CUDA backend installed next to llm.so, runs on the CPU and never
# maps the CUDA runtime, cuBLAS or the backend's shared object.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $gpu = (grep { m{/nvidia\d+$} } glob('/dev/nvidia*')) || glob('/proc/driver/nvidia/gpus/*');
if ($gpu)
{
	plan skip_all => 'this machine has an NVIDIA device: auto picks CUDA here';
}

my $node = LlmTest::new_node('cpu_only', "llm.device = 'auto'\n");
my $pkglibdir = `pg_config --pkglibdir`;
chomp $pkglibdir;
diag(-e "$pkglibdir/llm_cuda.so"
	? "llm_cuda.so installed in $pkglibdir: the worker would find it"
	: "llm_cuda.so not built: the check below cannot see a loaded library");

is($node->safe_psql('postgres', "SELECT llm_generate('Say hello.', max_tokens => 4) IS NOT NULL"), 't',
	'generation works');
my $pid = LlmTest::worker_pid($node);
ok($pid =~ /^\d+$/ && -r "/proc/$pid/maps", "worker maps readable ($pid)");
my @cuda = grep { /libcudart|libcublas|libcuda\.so|llm_cuda\.so/ } split /\n/, slurp_file("/proc/$pid/maps");
is(scalar(@cuda), 0, 'no CUDA library mapped in the worker') or diag($cuda[0]);
LlmTest::no_crash($node);
$node->stop;
done_testing();
