# Without shared_preload_libraries the library refuses to load, with a hint.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('no_preload');
$node->init;
$node->start;
my ($rc, $out, $err) = $node->psql('postgres', 'CREATE EXTENSION llm');
isnt($rc, 0, 'CREATE EXTENSION fails');
like($err, qr/ERROR:  pg_llm must be loaded via shared_preload_libraries/, 'clear error');
like($err, qr/HINT:  Add 'llm' to shared_preload_libraries in postgresql.conf and restart the server\./, 'with a hint');
($rc, $out, $err) = $node->psql('postgres', "LOAD 'llm'");
like($err, qr/must be loaded via shared_preload_libraries/, 'LOAD fails the same way');
is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_extension WHERE extname = $$llm$$'), '0', 'nothing created');
$node->stop;
done_testing();
