#!/usr/bin/env bash
# make demo: install dependencies, fetch the model, build and install pg_llm,
# start a throwaway PostgreSQL 15 (as an unprivileged user when run as root),
# load bench/data/tickets.csv and summarise 20 tickets with one statement.
# The server and its data directory are removed at the end.
# Environment: DEMO_ROWS (default 20), DEMO_PORT (default 54329), LLM_THREADS.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
ROWS=${DEMO_ROWS:-20}
PORT=${DEMO_PORT:-54329}
THREADS=${LLM_THREADS:-$(nproc)}

scripts/install-deps.sh
make -s all
make -s model
if [ "$(id -u)" = 0 ]; then make -s install; else sudo make -s install; fi

BINDIR=$(pg_config --bindir)
WORK=$(mktemp -d /tmp/pg_llm_demo.XXXXXX)
RUN=()
if [ "$(id -u)" = 0 ]; then
  id llmtest >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin llmtest
  chown llmtest "$WORK"
  RUN=(runuser -u llmtest --)
fi
cp bench/data/tickets.csv "$WORK/tickets.csv"
chmod a+r "$WORK/tickets.csv"
cleanup() {
  "${RUN[@]}" "$BINDIR/pg_ctl" -D "$WORK/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

echo "== starting a throwaway PostgreSQL with pg_llm on port $PORT"
"${RUN[@]}" "$BINDIR/initdb" -D "$WORK/data" -U postgres -E UTF8 --no-locale >/dev/null
cat >> "$WORK/data/postgresql.conf" <<CONF
shared_preload_libraries = 'llm'
port = $PORT
unix_socket_directories = '$WORK'
listen_addresses = ''
llm.threads = $THREADS
CONF
"${RUN[@]}" "$BINDIR/pg_ctl" -D "$WORK/data" -l "$WORK/server.log" -w start >/dev/null
PSQL=("${RUN[@]}" "$BINDIR/psql" -h "$WORK" -p "$PORT" -U postgres -d postgres -X -v ON_ERROR_STOP=1)

"${PSQL[@]}" -q <<SQL
CREATE EXTENSION llm;
CREATE TABLE tickets (id int PRIMARY KEY, subject text, body text, product text, priority text);
\copy tickets FROM '$WORK/tickets.csv' WITH (FORMAT csv, HEADER true)
SQL
# The worker loads the model after the server starts: wait until it is ready
# (the model's name is known only then), or say why it failed.
echo "== waiting for the llm worker to load the model"
for _ in $(seq 1 600); do
  status=$("${PSQL[@]}" -Atc "SELECT llm_model_info()->>'status'")
  [ "$status" = ready ] || [ "$status" = failed ] && break
  sleep 0.5
done
if [ "$status" != ready ]; then
  echo "== the model is not ready (status: $status)" >&2
  "${PSQL[@]}" -Atc "SELECT coalesce(llm_model_info()->>'error', '')" >&2
  tail -n 20 "$WORK/server.log" >&2
  exit 1
fi
echo "== model: $("${PSQL[@]}" -Atc "SELECT llm_model_info()->'model'->>'name'")"
echo "== SELECT id, subject, llm_generate('Summarize this support ticket in one sentence.' || E'\\n' || body, max_tokens => 48) FROM tickets ORDER BY id LIMIT $ROWS"
start=$(date +%s%N)
"${PSQL[@]}" -P pager=off <<SQL
SELECT id, subject,
       llm_generate('Summarize this support ticket in one sentence.' || E'\n' || body,
                    max_tokens => 48) AS summary
FROM tickets ORDER BY id LIMIT $ROWS;
SQL
end=$(date +%s%N)
echo "== $ROWS rows in $(( (end - start) / 1000000 )) ms"
"${PSQL[@]}" -P pager=off -c "SELECT requests_finished, prompt_tokens, completion_tokens, max_batch_size, round(ttft_mean_ms) AS ttft_mean_ms, round(tpot_mean_ms) AS tpot_mean_ms FROM llm_stat"
