"""Study 1 of docs/own_data_protocol.md: the vector-data defaults, chosen on development data.

  PYTHONPATH=. .venv/bin/python tools/own_data_defaults.py --data_dir=runs/gym_datasets \
      --work_dir=runs/own_data_defaults --workers=2
  PYTHONPATH=. .venv/bin/python tools/own_data_defaults.py ... --report   # rows -> the page

Each run is one `ccvl_tf.fit` (resumed when its root_dir has one); its table goes into
WORK/rows.csv, one row per (candidate, method, task, policy). --report applies Rule 1 to the
rows and writes docs/results/own_data_defaults.md and docs/results/own_data_defaults_rows.csv.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from concurrent import futures

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TASKS = ("CartPole-v1", "Acrobot-v1", "LunarLander-v3")
DATASET_SEED = 100   # development datasets
TRAINING_SEEDS = (100,)
CANDIDATES = {
    "A": dict(learning_rate=2.5e-4, target_update_period=1000, alpha=0.1),
    "B": dict(learning_rate=2.5e-4, target_update_period=1000, alpha=1.0),
    "C": dict(learning_rate=1e-3, target_update_period=100, alpha=0.1),
    "D": dict(learning_rate=1e-3, target_update_period=100, alpha=1.0),
}
METHODS = ("cql", "ccvl")
NUM_STEPS, EVAL_EPISODES = 10_000, 10
INCUMBENT, MARGIN = "A", 5.0
FIELDS = ("candidate", "method", "task", "seed", "policy", "episodes", "mean", "ci_low",
          "ci_high", "normalized")


def units():
  return [(c, m, t, s) for t in TASKS for c in CANDIDATES for m in METHODS
          for s in TRAINING_SEEDS]


def dataset(data_dir, task):
  return os.path.join(data_dir, task, f"seed_{DATASET_SEED}")


def run_unit(args):
  data_dir, work_dir, (cand, method, task, seed) = args
  root = os.path.join(work_dir, cand, method, task, f"seed_{seed}")
  summary = os.path.join(root, "summary.json")
  if os.path.exists(summary) and json.load(open(summary))["step"] == NUM_STEPS:
    table = json.load(open(summary))["results"]  # a finished unit: its table as it was scored
  else:
    import ccvl_tf  # pylint: disable=g-import-not-at-top
    table = ccvl_tf.fit(os.path.join(dataset(data_dir, task), "data.npz"), method,
                        env=f"gymnasium:{task}", root_dir=root, seed=seed, num_steps=NUM_STEPS,
                        eval_episodes=EVAL_EPISODES, log=lambda s: None,
                        **CANDIDATES[cand]).table
  ref = json.load(open(os.path.join(dataset(data_dir, task), "summary.json")))
  lo, hi = ref["reference_scores"]["random"], ref["reference_scores"]["final_greedy"]
  return [dict(candidate=cand, method=method, task=task, seed=seed, policy=r["policy"],
               episodes=r["episodes"], mean=r["mean"], ci_low=r["ci_low"], ci_high=r["ci_high"],
               normalized=100.0 * (r["mean"] - lo) / (hi - lo)) for r in table]


def write_rows(path, rows):
  with open(path + ".tmp", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=FIELDS)
    w.writeheader()
    w.writerows(rows)
  os.replace(path + ".tmp", path)


def rule(rows):
  """Rule 1: the candidate with the highest mean normalized score over {CQL, CCVL (adaptive)}
  x tasks x seeds, unless it beats the incumbent by less than MARGIN points."""
  scored = {c: [float(r["normalized"]) for r in rows if r["candidate"] == c
                and r["policy"] in ("CQL", "CCVL (adaptive)")] for c in CANDIDATES}
  means = {c: float(np.mean(v)) for c, v in scored.items() if v}
  best = max(means, key=means.get)
  chosen = best if means[best] - means[INCUMBENT] >= MARGIN else INCUMBENT
  return means, best, chosen


def report(rows, out_md, out_csv):
  means, best, chosen = rule(rows)
  write_rows(out_csv, rows)
  lines = ["# Vector-data defaults: Study 1 of [the protocol](../own_data_protocol.md)", "",
           f"Development datasets (DQN seed {DATASET_SEED}), training seed(s) "
           f"{', '.join(map(str, TRAINING_SEEDS))}, {NUM_STEPS:,} steps of batch 64, "
           f"{EVAL_EPISODES} episodes per policy; normalized: 0 = random, 100 = the dataset's "
           f"final greedy DQN. Rows: [own_data_defaults_rows.csv](own_data_defaults_rows.csv) "
           f"(written by tools/own_data_defaults.py).", "",
           "| candidate | " + " | ".join(f"{m} {t}" for t in TASKS for m in ("CQL", "CCVL"))
           + " | Fixed-CCVL (mean) | mean of CQL and CCVL |",
           "| --- " * (2 + 2 * len(TASKS) + 1) + "|"]
  for c, settings in CANDIDATES.items():
    cells = []
    for t in TASKS:
      for pol in ("CQL", "CCVL (adaptive)"):
        v = [float(r["normalized"]) for r in rows if r["candidate"] == c and r["task"] == t
             and r["policy"] == pol]
        cells.append(f"{np.mean(v):.1f}" if v else "-")
    fixed = [float(r["normalized"]) for r in rows if r["candidate"] == c
             and r["policy"] == "Fixed-CCVL"]
    label = f"{c} (lr {settings['learning_rate']:g}, target {settings['target_update_period']}, " \
            f"alpha {settings['alpha']:g})"
    lines.append(f"| {label} | " + " | ".join(cells) + f" | "
                 f"{np.mean(fixed):.1f} | {means.get(c, float('nan')):.1f} |")
  lines += ["", f"Rule 1: the best mean is candidate {best} ({means[best]:.1f}); the incumbent "
            f"{INCUMBENT} has {means[INCUMBENT]:.1f}; margin {MARGIN:g} points. "
            f"**Chosen: {chosen}** ({CANDIDATES[chosen]})."]
  with open(out_md, "w") as f:
    f.write("\n".join(lines) + "\n")
  return chosen


def main():
  p = argparse.ArgumentParser()
  p.add_argument("--data_dir", required=True)
  p.add_argument("--work_dir", required=True)
  p.add_argument("--workers", type=int, default=1)
  p.add_argument("--report", action="store_true")
  a = p.parse_args()
  os.makedirs(a.work_dir, exist_ok=True)
  rows_path = os.path.join(a.work_dir, "rows.csv")
  if a.report:
    rows = list(csv.DictReader(open(rows_path)))
    chosen = report(rows, os.path.join(ROOT, "docs/results/own_data_defaults.md"),
                    os.path.join(ROOT, "docs/results/own_data_defaults_rows.csv"))
    print("chosen:", chosen)
    return
  rows = []
  todo = [(a.data_dir, a.work_dir, u) for u in units()]
  with futures.ProcessPoolExecutor(a.workers) as pool:
    for i, out in enumerate(pool.map(run_unit, todo)):
      rows += out
      write_rows(rows_path, rows)
      print(f"[{i + 1}/{len(todo)}] {todo[i][2]}: " + ", ".join(
          f"{r['policy']} {r['normalized']:.1f}" for r in out), flush=True)


if __name__ == "__main__":
  sys.exit(main())
