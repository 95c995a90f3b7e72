# LlmTest — helpers shared by the pg_llm TAP tests: a node with the
# extension loaded, asynchronous psql sessions, waits on llm_stat, and the
# "no crash-restart" log check.
package LlmTest;

use strict;
use warnings;

use IPC::Run;
use Time::HiRes qw(time);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# A started node with shared_preload_libraries = 'llm', CREATE EXTENSION done
# and (unless $opts{no_wait}) a ready model.  $extra_conf is appended;
# $opts{init} are the parameters of PostgreSQL::Test::Cluster::init
# (allows_streaming => 1 for a primary with standbys).  The tests' engine
# settings (2 threads, a 256 MB KV cache, 256 tokens a step) unless
# $opts{engine_defaults}: then no llm.* setting but $extra_conf's.
sub new_node
{
	my ($name, $extra_conf, %opts) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(%{ $opts{init} // {} });
	$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'llm'
} . ($opts{engine_defaults} ? '' : qq{llm.threads = 2
llm.kv_cache_size = 256MB
llm.max_batched_tokens = 256
}) . qq{log_statement = none
} . ($extra_conf // ''));
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION llm');
	$node->safe_psql('postgres', q{
CREATE FUNCTION try_sql(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;});
	wait_ready($node) unless $opts{no_wait};
	return $node;
}

sub wait_ready
{
	my ($node) = @_;
	ok($node->poll_query_until('postgres',
			"SELECT llm_model_info()->>'status' = 'ready'"),
		'model ready');
}

# Wait until nothing runs or waits in the worker and no KV block is held.
sub wait_idle
{
	my ($node, $what) = @_;
	ok($node->poll_query_until('postgres',
			'SELECT requests_running = 0 AND requests_waiting = 0 AND kv_blocks_used = 0 FROM llm_stat'),
		"idle, KV blocks back to baseline" . ($what ? " ($what)" : ''));
}

sub worker_pid
{
	my ($node) = @_;
	return $node->safe_psql('postgres', 'SELECT worker_pid FROM llm_stat');
}

# Start psql running $sql without waiting; returns a handle for finish_query.
sub start_query
{
	my ($node, $sql, %opts) = @_;
	my $q = { out => '', err => '', in => $sql, t0 => time };
	# a script on stdin runs statement by statement, continuing after errors
	my @cmd = $opts{script}
	  ? ('psql', '-XAtq', '-d', $node->connstr('postgres'), '-f', '-')
	  : ('psql', '-XAtq', '-d', $node->connstr('postgres'), '-c', $sql);
	$q->{h} = IPC::Run::start(\@cmd,
		'<', \($opts{script} ? $q->{in} : ''), '>', \$q->{out}, '2>', \$q->{err},
		IPC::Run::timeout($opts{timeout} // 600));
	return $q;
}

# Wait for a started query; returns (stdout, stderr, seconds since start).
sub finish_query
{
	my ($q) = @_;
	eval { $q->{h}->finish; };
	my $elapsed = time - $q->{t0};
	chomp(my $out = $q->{out});
	return ($out, $q->{err}, $elapsed);
}

# Seconds from now until a started query ends.
sub time_to_finish
{
	my ($q) = @_;
	my $t = time;
	my ($out, $err) = finish_query($q);
	return (time - $t, $out, $err);
}

# A job's target: table tickets (id, body, summary) of $n rows whose bodies
# are the SQL expression $body over i, and writes (id, body, summary, at),
# where a trigger records every write of a summary (what the jobs' tests count
# their lost, doubled and stale writes from).
sub job_table
{
	my ($node, $n, $body) = @_;
	$node->safe_psql('postgres', qq{
CREATE TABLE tickets (id int PRIMARY KEY, body text NOT NULL, summary text);
INSERT INTO tickets SELECT i, $body FROM generate_series(1, $n) i;
CREATE TABLE writes (id int, body text, summary text, at timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION record_write() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN
	IF NEW.summary IS DISTINCT FROM OLD.summary AND NEW.summary IS NOT NULL THEN
		INSERT INTO writes (id, body, summary) VALUES (NEW.id, NEW.body, NEW.summary);
	END IF;
	RETURN NEW;
END \$\$;
CREATE TRIGGER record_write AFTER UPDATE ON tickets FOR EACH ROW EXECUTE FUNCTION record_write();
});
}

# Wait until job $id is in $state (a test named with $what); on a timeout
# the job's row goes to the test log.
sub wait_job_state
{
	my ($node, $id, $state, $what) = @_;
	ok($node->poll_query_until('postgres', "SELECT state = '$state' FROM llm_jobs WHERE id = $id"),
		"job $id $state ($what)")
	  or diag($node->safe_psql('postgres', "SELECT * FROM llm_jobs WHERE id = $id"));
}

# pid of the backend running a query matching $pattern.
sub backend_pid
{
	my ($node, $pattern) = @_;
	my $pid;
	$node->poll_query_until('postgres',
		"SELECT count(*) > 0 FROM pg_stat_activity WHERE query LIKE '%$pattern%' AND pid <> pg_backend_pid()");
	return $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE query LIKE '%$pattern%' AND pid <> pg_backend_pid() LIMIT 1");
}

# The server never crash-restarted and no process died of a signal.
sub no_crash
{
	my ($node) = @_;
	my $log = slurp_file($node->logfile);
	unlike($log, qr/terminated by signal|terminating any other active server processes|all server processes terminated|exited with exit code [2-9]/,
		'no crash-restart, no process killed by a signal');
}


# A node serving SmolLM2 under a second alias, "twin" (a cascade's pair of
# one model), and Gemma 3 as "gemma" when LLM_TEST_MODEL_GEMMA3 names a
# readable file; waits until every model is ready (one check).  Returns the
# node and whether Gemma 3 is served.
sub new_cascade_node
{
	my ($name) = @_;
	my $gemma = $ENV{LLM_TEST_MODEL_GEMMA3} // '';
	my $have_gemma = $gemma ne '' && -r $gemma;
	my $node = new_node($name, "max_worker_processes = 16\n", no_wait => 1);
	my $smol = $node->safe_psql('postgres', "SELECT boot_val FROM pg_settings WHERE name = 'llm.model'");
	my $list = "twin=$smol";
	$list .= ", gemma=$gemma (context_length=2048 chat_template=gemma)" if $have_gemma;
	$node->safe_psql('postgres', "ALTER SYSTEM SET llm.models = '$list'");
	$node->reload;
	my $n_models = $have_gemma ? 3 : 2;
	ok($node->poll_query_until('postgres',
			"SELECT count(*) = $n_models AND bool_and(state = 'ready') FROM llm_models"),
		'models ready');
	return ($node, $have_gemma);
}

1;
