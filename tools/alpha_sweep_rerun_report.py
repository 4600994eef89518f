"""The alpha sweep's page for a rerun of some methods beside kept rows of the others: the
sweep's tables (IQM per method and alpha, flatness, CCVL's family) over the merged rows, then
per alpha P(CCVL > Fixed-CCVL) and P(CCVL > CQL) with their 95% CIs, and the figure.

  .venv/bin/python tools/alpha_sweep_rerun_report.py --rows=OUT/rows.csv \
      --kept=docs/alpha_sweep_rows_1pct_algorithm1.csv --kept_methods=CQL,BC \
      --output=table.md [--rows_csv=merged.csv] [--plot=alpha_sweep.png]

Every number is the rows' (alpha_sweep.py's rows.csv): nothing is trained or evaluated. The
bootstrap is seeded (2,000 resamples, seed 0), so the same rows give the same page.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import ccvl_tf  # noqa: E402,F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from ccvl_tf.experiments.compare import alpha_sweep_report as sweep  # noqa: E402
from ccvl_tf.experiments.compare import report as compare_report  # noqa: E402

REPS = 2000
PAIRS = (("CCVL", "Fixed-CCVL"), ("CCVL", "CQL"))


def merged_rows(rows: Sequence[dict], kept: Sequence[dict], kept_methods: Sequence[str]
                ) -> List[dict]:
  """`rows` plus the rows of `kept` whose method is one of `kept_methods`; a method in both is
  refused (the rerun replaces a method's rows whole or not at all)."""
  rerun = {r["method"] for r in rows}
  both = sorted(rerun & set(kept_methods))
  if both:
    raise ValueError(f"{', '.join(both)} both rerun and kept: keep only the other methods")
  return list(rows) + [r for r in kept if r["method"] in kept_methods]


def improvement_section(rows: Sequence[dict], reps: int = REPS) -> List[str]:
  """Per alpha, each PAIRS (x, y): compare_report.improvement_lines over that alpha's runs."""
  lines = []
  for x, y in PAIRS:
    lines += ["", f"### P({x} > {y}) per alpha", "",
              f"Runs paired by game and seed; P: rliable's probability of improvement over "
              f"seeds x games with a 95% stratified bootstrap CI ({reps} reps, seed 0).", "",
              f"| alpha | runs | {x} higher / same / lower | mean difference (normalized) | "
              f"P({x} > {y}) [95% CI] |", "| --- | --- | --- | --- | --- |"]
    for alpha in sorted({r["alpha"] for r in rows if r["alpha"] is not None}):
      at = [r for r in rows if r["alpha"] == alpha]
      body = compare_report.improvement_lines(at, x, y, reps)[2:]
      for line in body:  # "| <dataset> | ..." -> "| <alpha> | ..."
        lines.append(f"| {alpha:g} |" + line.split("|", 2)[2])
  return lines


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--rows", required=True, help="the rerun's rows.csv")
  parser.add_argument("--kept", required=True, help="rows.csv holding the kept methods' rows")
  parser.add_argument("--kept_methods", default="CQL,BC")
  parser.add_argument("--suite", default="minatar")
  parser.add_argument("--output", required=True, help="the page (markdown)")
  parser.add_argument("--rows_csv", help="also write the merged rows here")
  parser.add_argument("--plot", help="also draw the sweep's figure here (PNG)")
  args = parser.parse_args(argv)
  for flag, path in (("--rows", args.rows), ("--kept", args.kept)):
    if not os.path.isfile(path):
      parser.error(f"{flag}={path}: no such file (alpha_sweep.py writes OUT/rows.csv)")
  try:
    rows = merged_rows(sweep.read_rows_csv(args.rows), sweep.read_rows_csv(args.kept),
                       [m for m in args.kept_methods.split(",") if m])
  except (ValueError, KeyError) as e:
    parser.error(str(e))
  text = sweep.render_table(rows, args.suite, REPS) + "\n".join(improvement_section(rows)) + "\n"
  with open(args.output, "w") as f:
    f.write(text)
  if args.rows_csv:
    sweep.write_rows_csv(args.rows_csv, rows)
  if args.plot:
    sweep.plot(args.plot, rows, REPS)
  print(f"wrote {args.output}" + "".join(f", {p}" for p in (args.rows_csv, args.plot) if p))
  return 0


if __name__ == "__main__":
  sys.exit(main())
