#!/usr/bin/env bash
# The MinAtar budget choice of docs/minatar_budget.md: BC and CQL on the five games' "1%" and
# "5%" data, development seed 100, at one learning rate, each training evaluated at every
# budget of BUDGETS (default 5000 10000 20000 40000). One training per unit runs along the
# chain: at each budget compare.py resumes it from its checkpoint to that budget and evaluates
# it; that budget's result files and tables are then moved to OUT/steps_<S> so the next call
# evaluates again. Rerunning resumes (finished budgets are skipped).
# Usage: tools/minatar_budget.sh DATA_DIR OUT_DIR LEARNING_RATE [WORKERS]
# (GAMES=Breakout,Freeway ... runs those games only, e.g. while another game's data is built.)
set -euo pipefail
DATA=${1:?MinAtar dataset root (binaries/make_minatar_datasets.py --output_dir)}
OUT=${2:?output root}
LR=${3:?learning rate of every method}
WORKERS=${4:-1}
PY=${PY:-.venv/bin/python}
BUDGETS=${BUDGETS:-5000 10000 20000 40000}
GAME_FLAGS=()
if [ -n "${GAMES:-}" ]; then GAME_FLAGS=("--games=$GAMES"); fi
for S in $BUDGETS; do
  if [ -f "$OUT/steps_$S/scores.csv" ]; then
    echo "budget $S: done ($OUT/steps_$S)"; continue
  fi
  "$PY" binaries/compare.py --suite=minatar "--data_dir=$DATA" --datasets=1%,5% \
      --seeds=1 --first_seed=100 --methods=BC,CQL "--learning_rate=$LR" "--num_steps=$S" \
      "--workers=$WORKERS" "${GAME_FLAGS[@]}" "--output_dir=$OUT/chain"
  mkdir -p "$OUT/steps_$S.tmp"
  for f in results scores.csv table.md iqm.png confidence.md per_game_*.md; do
    for g in "$OUT"/chain/$f; do
      if [ -e "$g" ]; then mv "$g" "$OUT/steps_$S.tmp/"; fi
    done
  done
  mv "$OUT/steps_$S.tmp" "$OUT/steps_$S"
done
