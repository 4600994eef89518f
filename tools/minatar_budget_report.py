"""The MinAtar budget choice of docs/minatar_budget.md from its development runs: which cells
each learner reaches at each budget and learning rate, and the budget and learning rates the
page's rule (committed before the runs) gives.

  .venv/bin/python tools/minatar_budget_report.py --runs=OUT [--runs=OUT2 ...] \
      --data_dir=/work/minatar/data --rows_csv=docs/minatar_budget_rows.csv \
      --behaviour_csv=docs/minatar_budget_behaviour.csv
  .venv/bin/python tools/minatar_budget_report.py --rows=docs/minatar_budget_rows.csv \
      --behaviour_from=docs/minatar_budget_behaviour.csv          # the same, without the runs

--runs: a root of tools/minatar_budget.sh outputs (OUT/lr_<LR>/steps_<S>/scores.csv), any
number of them (e.g. one per group of games). The rows are compare.py's per-run rows with the
learning rate and budget in front (--rows_csv writes them, --rows reads them back). A cell
(learner, data kind, game) reaches its data when the learner's mean raw score is at least the
behaviour score of the subset (tools/minatar_behaviour_table.py's reading).
"""
from __future__ import annotations

import argparse
import csv
import glob
import os
import re
import sys
from typing import Dict, List, Sequence, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tools import minatar_behaviour_table as behaviour_table  # noqa: E402

COLUMNS = ("learning_rate", "steps", "method", "dataset", "game", "seed", "score",
           "normalized_score", "train_steps", "train_seconds")
DATASETS = ("1%", "5%")
LEARNERS = ("BC", "CQL")
QUALIFY = 6           # rule 1: cells BC reaches (of 10) at S and at the next budget
DEFAULT_LR = 2.5e-4   # the suite's; ties go to it


def collect(roots: Sequence[str]) -> List[dict]:
  """The per-run rows of every OUT/lr_<LR>/steps_<S>/scores.csv under `roots`."""
  rows = []
  for root in roots:
    for path in sorted(glob.glob(os.path.join(root, "lr_*", "steps_*", "scores.csv"))):
      m = re.search(r"lr_([^/]+)/steps_(\d+)/scores.csv$", path)
      for r in csv.DictReader(open(path, newline="")):
        rows.append(dict(learning_rate=float(m.group(1)), steps=int(m.group(2)),
                         **{k: r[k] for k in COLUMNS[2:]}))
  if not rows:
    raise ValueError(f"no OUT/lr_*/steps_*/scores.csv under {list(roots)}")
  return [_typed(r) for r in rows]


def _typed(r: dict) -> dict:
  return dict(r, learning_rate=float(r["learning_rate"]), steps=int(r["steps"]),
              seed=int(r["seed"]), score=float(r["score"]),
              normalized_score=float(r["normalized_score"]), train_steps=int(r["train_steps"]),
              train_seconds=float(r["train_seconds"]))


def write_rows(path: str, rows: Sequence[dict]) -> None:
  with open(path, "w", newline="") as f:
    w = csv.DictWriter(f, COLUMNS)
    w.writeheader()
    for r in sorted(rows, key=lambda r: (r["learning_rate"], r["steps"], r["method"],
                                         r["dataset"], r["game"], r["seed"])):
      w.writerow({k: (repr(r[k]) if isinstance(r[k], float) else r[k]) for k in COLUMNS})


def read_rows(path: str) -> List[dict]:
  with open(path, newline="") as f:
    reader = csv.DictReader(f)
    if tuple(reader.fieldnames or ()) != COLUMNS:
      raise ValueError(f"{path}: columns {reader.fieldnames} are not {list(COLUMNS)}")
    return [_typed(r) for r in reader]


def reached(rows: Sequence[dict], behaviour) -> Dict[Tuple[str, float, int], List[dict]]:
  """{(learner, learning rate, budget): the cells (behaviour_table.cells) of that run}, for
  the budgets every game and data kind of `behaviour` has finished at (a run in progress is
  left out)."""
  out = {}
  wanted = {(g, d) for g, d in behaviour}
  for lr in sorted({r["learning_rate"] for r in rows}):
    for steps in sorted({r["steps"] for r in rows}):
      mine = [r for r in rows if r["learning_rate"] == lr and r["steps"] == steps]
      if all({(r["game"], r["dataset"]) for r in mine if r["method"] == learner} >= wanted
             for learner in LEARNERS):
        for learner in LEARNERS:
          out[(learner, lr, steps)] = behaviour_table.cells(mine, behaviour, [learner],
                                                            DATASETS)
  return out


def choose(table: Dict[Tuple[str, float, int], List[dict]]) -> dict:
  """The page's rule: the budget from BC (rule 1), CQL's learning rate there (rule 2), and
  whether "1%" is too small (rule 3). Returns dict(budget, bc_lr, cql_lr, qualified,
  one_pct_too_small, why)."""
  lrs = sorted({lr for _, lr, _ in table})
  budgets = sorted({s for _, _, s in table})
  count = {k: sum(c["reached"] for c in v) for k, v in table.items()}
  qualifying = []
  for s, nxt in zip(budgets, budgets[1:]):
    for lr in lrs:
      if count[("BC", lr, s)] >= QUALIFY and count[("BC", lr, nxt)] >= QUALIFY:
        qualifying.append((s, lr))
  if qualifying:
    budget = min(s for s, _ in qualifying)
    at = [lr for s, lr in qualifying if s == budget]
    bc_lr = max(at, key=lambda lr: (count[("BC", lr, budget)], lr == DEFAULT_LR))
    why = f"BC reaches >= {QUALIFY} of 10 cells at {budget} and at the next budget"
  else:
    budget, bc_lr = max(((s, lr) for s in budgets for lr in lrs),
                        key=lambda k: (count[("BC", k[1], k[0])], -k[0], k[1] == DEFAULT_LR))
    why = "no budget qualifies: the one where BC reaches the most cells"

  def ratio_mean(lr):
    cells = table[("CQL", lr, budget)]
    return sum(c["ratio"] for c in cells) / len(cells)
  cql_lr = max(lrs, key=lambda lr: (count[("CQL", lr, budget)], ratio_mean(lr)))
  one_pct = {lr: sum(c["reached"] for c in table[("BC", lr, budget)] if c["dataset"] == "1%")
             for lr in lrs}
  five_pct = sum(c["reached"] for c in table[("BC", bc_lr, budget)] if c["dataset"] == "5%")
  return dict(budget=budget, bc_lr=bc_lr, cql_lr=cql_lr, qualified=bool(qualifying),
              one_pct_too_small=max(one_pct.values()) <= 1 and five_pct >= 3, why=why,
              counts=count)


def count_lines(table) -> List[str]:
  """Cells reached per learner, learning rate and budget (of 10; "1%" / "5%" in brackets)."""
  budgets = sorted({s for _, _, s in table})
  lines = ["| Learner | lr | " + " | ".join(f"{s:,} steps" for s in budgets) + " |",
           "| --- | --- | " + " | ".join("---" for _ in budgets) + " |"]
  for learner in LEARNERS:
    for lr in sorted({lr for _, lr, _ in table}):
      cells = []
      for s in budgets:
        mine = table[(learner, lr, s)]
        by = [sum(c["reached"] for c in mine if c["dataset"] == d) for d in DATASETS]
        cells.append(f"{sum(by)} ({by[0]} / {by[1]})")
      lines.append(f"| {learner} | {lr:g} | " + " | ".join(cells) + " |")
  return lines


def cell_lines(table, learner: str, lr: float) -> List[str]:
  """One learner's score / behaviour ratio per cell at every budget."""
  budgets = sorted({s for _, _, s in table})
  first = table[(learner, lr, budgets[0])]
  lines = ["| Data | Game | behaviour | " + " | ".join(f"{s:,}" for s in budgets) + " |",
           "| --- | --- | --- | " + " | ".join("---" for _ in budgets) + " |"]
  for i, c in enumerate(first):
    row = []
    for s in budgets:
      d = table[(learner, lr, s)][i]
      row.append(("**{:.2f}**" if d["reached"] else "{:.2f}").format(d["mean"]))
    lines.append(f"| {c['dataset']} | {c['game']} | {c['behaviour']:.2f} | "
                 + " | ".join(row) + " |")
  return lines


def render(rows: Sequence[dict], behaviour) -> str:
  table = reached(rows, behaviour)
  choice = choose(table)
  parts = ["Cells reaching their data's behaviour score, of 10 (\"1%\" / \"5%\"):", ""]
  parts += count_lines(table)
  for learner in LEARNERS:
    for lr in sorted({lr for _, lr, _ in table}):
      parts += ["", f"{learner} at lr {lr:g}, mean raw score per budget (bold: reaches):", ""]
      parts += cell_lines(table, learner, lr)
  parts += ["", "Choice: budget {:,} steps, BC lr {:g}, CQL lr {:g} ({}){}.".format(
      choice["budget"], choice["bc_lr"], choice["cql_lr"], choice["why"],
      "; \"1%\" too small at this budget (rule 3)" if choice["one_pct_too_small"] else "")]
  return "\n".join(parts) + "\n"


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  src = p.add_mutually_exclusive_group(required=True)
  src.add_argument("--runs", action="append", help="a tools/minatar_budget.sh output root")
  src.add_argument("--rows", help="rows written by --rows_csv")
  b = p.add_mutually_exclusive_group(required=True)
  b.add_argument("--data_dir", help="root of the MinAtar datasets")
  b.add_argument("--behaviour_from", help="behaviour scores written by --behaviour_csv")
  p.add_argument("--rows_csv", default="", help="also write the rows here")
  p.add_argument("--behaviour_csv", default="", help="also write the behaviour scores here")
  p.add_argument("--output", default="", help="also write the markdown here")
  a = p.parse_args(argv)
  rows = collect(a.runs) if a.runs else read_rows(a.rows)
  games = sorted({r["game"] for r in rows})
  behaviour = (behaviour_table.read_behaviour_csv(a.behaviour_from) if a.behaviour_from else
               behaviour_table.behaviour_scores(a.data_dir, games, DATASETS, 0))
  if a.rows_csv:
    write_rows(a.rows_csv, rows)
  if a.behaviour_csv:
    behaviour_table.write_behaviour_csv(a.behaviour_csv, behaviour)
  text = render(rows, behaviour)
  if a.output:
    with open(a.output, "w") as f:
      f.write(text)
  print(text, end="")


if __name__ == "__main__":
  main()
