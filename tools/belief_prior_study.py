"""The informed-prior study of docs/belief_prior.md on the exact gridworld (development datasets).

  PYTHONPATH=. .venv/bin/python tools/belief_prior_study.py --output_dir=runs/belief_prior

For each development dataset, alpha and random stream, the confidence-adaptive policy of the
gridworld's default reading is run for --episodes episodes (one belief carried across them,
delta drawn from the belief at each episode's start) from each prior of PRIORS; every episode
is scored exactly (the expected return of the member it acted with, normalized by the optimal
return), as is Fixed-CCVL. Writes rows.csv (one row per dataset, alpha, prior, stream and
episode), table.md (the page's reported table, with the rule's verdicts) and run.json.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

from ccvl_tf.algorithm import belief  # noqa: E402
from ccvl_tf.experiments.gridworld import family as family_lib  # noqa: E402
from ccvl_tf.experiments.gridworld import fig1_report  # noqa: E402
from ccvl_tf.tabular import dataset as dataset_lib  # noqa: E402
from ccvl_tf.tabular import evaluation as ev_lib  # noqa: E402
from ccvl_tf.tabular import learners  # noqa: E402
from ccvl_tf.tabular.gridworld import (DATA_SLIP_PROB, EVAL_SLIP_PROB,  # noqa: E402
                                       GridWorld, layout)

PRIORS = ("uniform", "heldout_mean", "heldout_sum")
HEADER = ("dataset", "alpha", "prior", "stream", "episode", "delta", "exact_return",
          "fixed_exact_return", "final_mass_on_fixed")


def initial_log_belief(prior: str, errors: np.ndarray, temperature: float, n: int):
  """log b_0 [K] of `prior` (docs/belief_prior.md) from the data's mean errors [K]."""
  if prior == "uniform":
    return belief.uniform_log_belief(len(errors))
  if prior == "heldout_mean":
    return belief.informed_log_prior(errors, temperature, 1)
  if prior == "heldout_sum":
    return belief.informed_log_prior(errors, temperature, n)
  raise ValueError(f"prior must be one of {PRIORS}, got {prior!r}")


def dataset_rows(seed: int, alphas, args, grid, data_env, eval_env, v_opt) -> list:
  """The rows of one dataset: every alpha, prior, stream and episode."""
  data = dataset_lib.make_gridworld_dataset(seed, dataset_lib.NUM_TRANSITIONS, data_env)
  model = learners.empirical_model(data, data_env.num_states, data_env.num_actions)
  reading = family_lib.default_reading()
  q_all = family_lib.exact_family(model, data_env.gamma, np.asarray(alphas), grid, reading)
  n = len(np.asarray(data.state))
  rows = []
  for ai, alpha in enumerate(alphas):
    q = q_all[ai]  # [K, S, A]
    errors = learners.data_bellman_errors(q, data, data_env.gamma)  # [K]
    temperature = ev_lib.auto_temperature(errors)
    k_fixed = int(np.argmin(errors))
    member = [ev_lib.expected_return(eval_env, q[k]) / v_opt for k in range(len(grid))]
    for prior in PRIORS:
      log_b0 = initial_log_belief(prior, errors, temperature, n)
      for stream in range(args.streams):
        rng = np.random.default_rng([seed, ai, stream])
        episodes, log_b = ev_lib.run_adaptive(eval_env, q, args.episodes, temperature, rng,
                                              "sample", log_belief=log_b0)
        final = np.exp(log_b[-1].astype(np.float64))
        mass = float(final[k_fixed] / final.sum())
        rows += [(seed, alpha, prior, stream, i + 1, float(grid[e.delta_index]),
                  round(member[e.delta_index], 6), round(member[k_fixed], 6), round(mass, 6))
                 for i, e in enumerate(episodes)]
  return rows


def table(rows, alphas) -> list:
  """The page's table: per alpha and prior, episode 1, 1-3 and 1-10 minus Fixed-CCVL (mean and
  95% bootstrap CI over datasets of each dataset's mean over streams), the mass on Fixed-CCVL's
  delta at the end, and the rule's verdict on episodes 1-3."""
  lines = ["| alpha | prior | episode 1 - Fixed | episodes 1-3 - Fixed | episodes 1-10 - Fixed "
           "| final mass on Fixed's delta | first episodes |", "|---|---|---|---|---|---|---|"]
  for alpha in alphas:
    for prior in PRIORS:
      sel = [r for r in rows if r[1] == alpha and r[2] == prior]
      datasets = sorted({r[0] for r in sel})
      cells = []
      for last in (1, 3, None):
        diffs = []
        for d in datasets:
          mine = [r for r in sel if r[0] == d and (last is None or r[4] <= last)]
          diffs.append(np.mean([r[6] - r[7] for r in mine]))
        cells.append(fig1_report.mean_ci(diffs, reps=10_000, seed=0))
      mass = np.mean([np.mean([r[8] for r in sel if r[0] == d]) for d in datasets])
      _, lo, hi = cells[1]
      verdict = "above" if lo > 0 else ("not below" if hi >= 0 else "below")
      lines.append(f"| {alpha:g} | {prior} | " + " | ".join(
          f"{m:+.4f} [{l:+.4f}, {h:+.4f}]" for m, l, h in cells) + f" | {mass:.3f} | {verdict} |")
  return lines


def main(argv=None) -> None:
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--output_dir", required=True)
  p.add_argument("--first_dataset", type=int, default=100)
  p.add_argument("--datasets", type=int, default=10)
  p.add_argument("--alphas", default="0.2,0.5,1")
  p.add_argument("--episodes", type=int, default=10)
  p.add_argument("--streams", type=int, default=10)
  p.add_argument("--num_grid_deltas", type=int, default=10)
  args = p.parse_args(argv)
  if args.first_dataset < 100:
    p.error(f"--first_dataset={args.first_dataset}: the study runs on development datasets "
            f"(seeds >= 100); 0-99 are reported ones")
  os.makedirs(args.output_dir, exist_ok=True)
  alphas = [float(a) for a in args.alphas.split(",")]
  grid = belief.delta_grid(args.num_grid_deltas)
  data_env = GridWorld(slip_prob=DATA_SLIP_PROB, layout=layout("fig1"))
  eval_env = GridWorld(slip_prob=EVAL_SLIP_PROB, layout=layout("fig1"))
  v_opt = ev_lib.optimal_return(eval_env)
  t0, rows = time.time(), []
  seeds = range(args.first_dataset, args.first_dataset + args.datasets)
  for i, seed in enumerate(seeds):
    rows += dataset_rows(seed, alphas, args, grid, data_env, eval_env, v_opt)
    el = time.time() - t0
    print(f"dataset {seed} done ({i + 1}/{len(seeds)}), {el:.0f} s elapsed, ETA "
          f"{el / (i + 1) * (len(seeds) - i - 1):.0f} s", flush=True)
  with open(os.path.join(args.output_dir, "rows.csv"), "w", newline="") as f:
    csv.writer(f).writerows([HEADER, *rows])
  lines = table(rows, alphas)
  with open(os.path.join(args.output_dir, "table.md"), "w") as f:
    f.write("\n".join(lines) + "\n")
  with open(os.path.join(args.output_dir, "run.json"), "w") as f:
    json.dump(dict(vars(args), reading=family_lib.default_reading(), layout="fig1",
                   priors=PRIORS, seconds=round(time.time() - t0, 1)), f, indent=1)
  print("\n".join(lines))


if __name__ == "__main__":
  main()
