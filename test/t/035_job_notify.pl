# llm_enrich(..., notify => channel): when the job ends a session that
# LISTENs on the channel receives 'job <id> <state>' (done by the runner;
# cancelled by llm_job_cancel, sent when the cancelling transaction
# commits, and never when it rolls back); a job without a channel notifies
# nobody.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LlmTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LlmTest::new_node('job_notify', "llm.job_naptime = 200ms\n");
sub q1 { return $node->safe_psql('postgres', $_[0]); }

LlmTest::job_table($node, 3, q{'Ticket number ' || i});
q1(q{CREATE TABLE big (id int PRIMARY KEY, body text NOT NULL, summary text);
INSERT INTO big SELECT i, 'Count to ' || i FROM generate_series(1, 200) i;});

my $listener = $node->background_psql('postgres');
$listener->query_safe('LISTEN jobs_done');
my $heard = '';

sub hear
{
	my ($re, $what) = @_;
	for (my $i = 0; $i < 1200; $i++)
	{
		$heard .= $listener->query('SELECT 1') // '';
		return pass($what) if $heard =~ $re;
		select(undef, undef, undef, 0.1);
	}
	diag("heard so far: $heard");
	return fail($what);
}

# ---------- done ----------
my $job = q1(q{SELECT llm_enrich('tickets', 'summary', $$'Summarize: ' || body$$, max_tokens => 4, notify => 'jobs_done')});
LlmTest::wait_job_state($node, $job, 'done', 'a job with a channel');
hear(qr/notification "jobs_done" with payload "job $job done"/, 'the listener hears "job <id> done"');
is(q1('SELECT count(*) FROM tickets WHERE summary IS NOT NULL'), '3', 'every row written');

# ---------- cancelled: only when the cancel commits ----------
my $big = q1(q{SELECT llm_enrich('big', 'summary', $$body$$, max_tokens => 64, notify => 'jobs_done')});
q1("BEGIN; SELECT llm_job_cancel($big); ROLLBACK;");
q1("SELECT llm_job_cancel($big)");
hear(qr/payload "job $big cancelled"/, 'a cancelled job: "job <id> cancelled"');
my $n = () = $heard =~ /payload "job $big cancelled"/g;
is($n, 1, 'once: the rolled back cancel sent nothing');

# ---------- no channel, no notification; the channel is checked ----------
q1('UPDATE tickets SET summary = NULL');
my $quiet = q1(q{SELECT llm_enrich('tickets', 'summary', $$'Summarize: ' || body$$, max_tokens => 4)});
LlmTest::wait_job_state($node, $quiet, 'done', 'a job without a channel');
my $last = q1(q{SELECT llm_enrich('tickets', 'summary', $$'Again: ' || body$$, max_tokens => 4, notify => 'jobs_done')});
hear(qr/payload "job $last done"/, 'the next job with a channel is heard');
unlike($heard, qr/payload "job $quiet /, 'the job without a channel is not');
is(q1(q{SELECT try_sql($$SELECT llm_enrich('tickets', 'summary', 'body', notify => '')$$)}),
	'22023: channel name cannot be empty', 'an empty channel: 22023');
is(q1(q{SELECT try_sql($$SELECT llm_enrich('tickets', 'summary', 'body', notify => repeat('j', 64))$$)}),
	'22023: channel name too long', 'a channel of 64 bytes: 22023');

$listener->quit;
LlmTest::no_crash($node);
done_testing();
