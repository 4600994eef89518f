#!/usr/bin/env bash
# The development split of docs/dev_split.md: CCVL configurations A-D on Breakout and
# SpaceInvaders ("5%"), seeds 100-101. Usage: tools/dev_split.sh DATA_DIR OUT_DIR
set -euo pipefail
DATA=${1:?MinAtar dataset root (binaries/make_minatar_datasets.py --output_dir)}
OUT=${2:?output root}
PY=${PY:-.venv/bin/python}
COMMON=(--suite=minatar "--data_dir=$DATA" --games=Breakout,SpaceInvaders --datasets=5%
        --seeds=2 --first_seed=100 --methods=Fixed-CCVL,CCVL --workers=2)
"$PY" binaries/compare.py "${COMMON[@]}" "--output_dir=$OUT/A" --objective=algorithm1 \
    --count_ridge_mode=absolute --count_ridge=1 --count_normalization=none \
    --belief_temperature=1 --belief_resample=step
"$PY" binaries/compare.py "${COMMON[@]}" "--output_dir=$OUT/B" --objective=algorithm1 \
    --count_ridge_mode=relative --count_ridge=1e-3 --count_normalization=mean
"$PY" binaries/compare.py "${COMMON[@]}" "--output_dir=$OUT/C" --objective=bound \
    --count_ridge_mode=relative --count_ridge=1e-3 --count_normalization=mean
"$PY" binaries/compare.py "${COMMON[@]}" "--output_dir=$OUT/D" --objective=bonus \
    --count_ridge_mode=relative --count_ridge=1e-3 --count_normalization=mean
