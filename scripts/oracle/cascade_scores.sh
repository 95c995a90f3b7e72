#!/bin/bash
# Write test/golden/cascade/held_scores.csv: the scores of the small
# (SmolLM2-135M-Instruct Q4_1) and the large (Gemma 3 270M Q4_K_M) model on
# the 2,000 held rows of bench/cascade/rows.tsv, as llm_classify computes
# them (bench/cascade/scores.c, the engine of this
# checkout, CPU backend), for test/unit/test_cascade_stats.c
# (docs/CASCADES.md).  The per-call costs of each run go to
# test/golden/cascade/costs.jsonl (timings: reported, never asserted).
#
# Columns: id, kind (the generator's, reference only), small_complaint,
# small_praise, small_question, large_complaint, large_praise,
# large_question (llm_classify(text, '{complaint,praise,question}')'s
# label probabilities).
#
#   scripts/oracle/cascade_scores.sh      (from the repository root; minutes)
set -euo pipefail
make -s build/bench/cascade_scores
python3 bench/cascade/make_rows.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
S="models/SmolLM2-135M-Instruct.Q4_1.gguf"
G="models/gemma-3-270m-q4_k_m.gguf"
R=bench/cascade/rows.tsv
L="complaint,praise,question"
build/bench/cascade_scores -m "$S" -b 32 --classify "$L" "$R" > "$tmp/sc" 2> "$tmp/sc.cost"
build/bench/cascade_scores -m "$G" --chat-template gemma -b 32 --classify "$L" "$R" > "$tmp/lc" 2> "$tmp/lc.cost"
out=test/golden/cascade/held_scores.csv
{
	echo "id,kind,small_complaint,small_praise,small_question,large_complaint,large_praise,large_question"
	paste <(cut -f1,2 "$R") <(cut -f2- "$tmp/sc") <(cut -f2- "$tmp/lc") | tr '\t' ','
} > "$out"
{
	for f in sc lc; do sed "s/^{/{\"run\": \"$f\", /" "$tmp/$f.cost"; done
} > test/golden/cascade/costs.jsonl
echo "wrote $out ($(($(wc -l < "$out") - 1)) rows) and test/golden/cascade/costs.jsonl"
