#!/usr/bin/env bash
# The AEM outcome study (issue 16), in the background and resumable: GRPO, GRPO+AEM and GRPO+EMPG x seeds 0-9 on
# the in-process decisions environment (configs/study/aem_outcome.yaml; design fixed in
# docs/results/outcome_study_design.md). Run from the repository root:
#     scripts/outcome_study.sh                 # start (or resume) in the background; log in $OUT/study.log
#     FOREGROUND=1 scripts/outcome_study.sh    # the same in the foreground
#     JOBS=1 SEEDS="0 1" METHODS="grpo grpo_aem" scripts/outcome_study.sh
#     CONFIG=configs/study/aem_outcome_reasoned.yaml OUT=runs/aem_outcome_reasoned scripts/outcome_study.sh
# Rerunning resumes every run from its newest checkpoint; finished runs are skipped. The report is
# $OUT/summary.md, summary.json and plots/ (redraw: swe-rl compare ... --plot-only).
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG=${CONFIG:-configs/study/aem_outcome.yaml}
OUT=${OUT:-runs/aem_outcome}
JOBS=${JOBS:-2}
SEEDS=${SEEDS:-"0 1 2 3 4 5 6 7 8 9"}
METHODS=${METHODS:-"grpo grpo_aem grpo_empg"}
SWE_RL=${SWE_RL:-.venv/bin/swe-rl}
args=(compare -c "$CONFIG" --out "$OUT" --jobs "$JOBS" --baseline grpo --last-k 3)
for m in $METHODS; do args+=(-m "$m"); done
for s in $SEEDS; do args+=(-s "$s"); done
mkdir -p "$OUT"
if [[ -n "${FOREGROUND:-}" ]]; then
    exec "$SWE_RL" "${args[@]}"
fi
nohup "$SWE_RL" "${args[@]}" >> "$OUT/study.log" 2>&1 &
echo $! > "$OUT/study.pid"
echo "outcome study running in the background (pid $(cat "$OUT/study.pid")): tail -f $OUT/study.log"
