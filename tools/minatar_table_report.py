"""The MinAtar method table's page tables, from its per-run rows: Table 2 (normalized IQM and
95% stratified bootstrap CIs), which method pairs the CIs separate, CCVL against Fixed-CCVL and
against CQL (P(improvement) with its CI), and whether each learner reached its data's behaviour
score (tools/minatar_behaviour_table.py).

  .venv/bin/python tools/minatar_table_report.py --rows=OUT/scores.csv \
      --behaviour_from=docs/minatar_budget_behaviour.csv [--output=table.md]
  .venv/bin/python tools/minatar_table_report.py --results_dir=OUT ...   # compare.py's results
      (finished runs only; also writes --rows_csv)

Every number is the rows' (compare.py's scores.csv: one row per method x data x game x seed);
nothing is trained or evaluated. The bootstrap is seeded (2,000 resamples, seed 0), so the same
rows give the same page.
"""
from __future__ import annotations

import argparse
import itertools
import os
import sys
from typing import Dict, List, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import ccvl_tf  # noqa: E402,F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from ccvl_tf.evaluation import reporting  # noqa: E402
from ccvl_tf.experiments.compare import config as compare_config  # noqa: E402
from ccvl_tf.experiments.compare import report as compare_report  # noqa: E402
from tools import minatar_behaviour_table  # noqa: E402

METHODS = ("REM", "CQL", "AEVL", "Fixed-CCVL", "CCVL", "BC", "DQN")
LEARNERS = ("BC", "CQL", "Fixed-CCVL", "CCVL")  # checked against their data's behaviour score
REPS = 2000

# The markers the page's tables follow (tests/test_results_tables.py finds them there).
IQM_TITLE = "Normalized IQM over seeds x games, 95% stratified bootstrap CI"
SEPARATED_TITLE = "Pairs whose 95% CIs do not overlap"
VS_FIXED_TITLE = "CCVL (adaptive) against Fixed-CCVL"
VS_CQL_TITLE = "CCVL (adaptive) against CQL"


def separated_lines(datasets: Sequence[str], methods: Sequence[str], cells: Dict) -> List[str]:
  """Markdown lines: per dataset kind, each pair of methods whose IQM CIs do not overlap
  (higher > lower), or 'none'."""
  lines = ["| Data | separated (higher > lower) |", "| --- | --- |"]
  for dataset in datasets:
    pairs = []
    for a, b in itertools.combinations(methods, 2):
      if (a, dataset) not in cells or (b, dataset) not in cells:
        continue
      x, y = cells[(a, dataset)], cells[(b, dataset)]
      if x.ci_low > y.ci_high:
        pairs.append(f"{a} > {b}")
      elif y.ci_low > x.ci_high:
        pairs.append(f"{b} > {a}")
    lines.append(f"| {dataset} | {', '.join(pairs) if pairs else 'none'} |")
  return lines


def render(rows: Sequence[dict], behaviour: Dict, source: str, reps: int = REPS) -> str:
  """The page's tables as markdown, each after its title line."""
  methods = [m for m in METHODS if any(r["method"] == m for r in rows)]
  datasets = reporting.ordered([r["dataset"] for r in rows], compare_config.DATASET_KINDS)
  cells = compare_report.aggregate(rows, reps)
  games = sorted({r["game"] for r in rows})
  seeds = sorted({r["seed"] for r in rows})
  parts = [f"{IQM_TITLE} ({reps} resamples; games {', '.join(games)}; seeds "
           f"{', '.join(str(s) for s in seeds)}; {len(rows)} runs):", ""]
  parts += reporting.iqm_table_lines(datasets, methods, cells)
  parts += ["", f"{SEPARATED_TITLE}:", ""] + separated_lines(datasets, methods, cells)
  parts += ["", f"{VS_FIXED_TITLE} (the same trained network on each game and seed):", ""]
  parts += compare_report.improvement_lines(rows, "CCVL", "Fixed-CCVL", reps)
  parts += ["", f"{VS_CQL_TITLE}:", ""]
  parts += compare_report.improvement_lines(rows, "CCVL", "CQL", reps)
  learners = [m for m in LEARNERS if m in methods]
  parts += ["", minatar_behaviour_table.render(rows, behaviour, learners, datasets,
                                               source).rstrip()]
  for dataset in datasets:
    parts += ["", f"{compare_report.per_game_title(dataset, 'minatar')}:", "",
              compare_report.per_game_table(rows, dataset, "minatar").rstrip()]
  return "\n".join(parts) + "\n"


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  src = p.add_mutually_exclusive_group(required=True)
  src.add_argument("--rows", help="per-run rows (compare.py's scores.csv)")
  src.add_argument("--results_dir", help="compare.py's --output_dir (its finished runs)")
  p.add_argument("--behaviour_from", required=True,
                 help="behaviour scores (tools/minatar_behaviour_table.py --behaviour_csv)")
  p.add_argument("--rows_csv", default="", help="with --results_dir: write the rows here")
  p.add_argument("--output", default="", help="also write the markdown here")
  args = p.parse_args(argv)
  if args.rows:
    rows = compare_report.read_scores_csv(args.rows)
  else:
    rows = compare_report.read_results(args.results_dir)
    if args.rows_csv:
      compare_report.write_scores_csv(args.rows_csv, rows)
      rows = compare_report.read_scores_csv(args.rows_csv)  # what the page's test reads
  behaviour = minatar_behaviour_table.read_behaviour_csv(args.behaviour_from)
  text = render(rows, behaviour, os.path.relpath(args.behaviour_from, ROOT))
  sys.stdout.write(text)
  if args.output:
    with open(args.output, "w") as f:
      f.write(text)


if __name__ == "__main__":
  main()
