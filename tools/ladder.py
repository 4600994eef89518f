"""The ladder from CQL to CCVL on development data (docs/ladder.md: protocol, rule, results).

  .venv/bin/python tools/ladder.py --dataset_dir=DEV/default_dataset/Breakout \
      --heldout_dir=HELDOUT/default_dataset/Breakout --output_dir=OUT [--rungs=0,1,2] \
      [--workers=2] [--extra_flags="--learning_rate=2.5e-4"] [--suffix=_fix]

Each rung is one binaries/train_offline.py run (OUT/runs/<rung>, its log OUT/logs/<rung>.log;
a rerun resumes an unfinished run and skips a finished one). Afterwards every finished rung is
measured (the final in-training evaluation, the table rows, the last training-log metrics,
the greedy policy's mode share on held-out states) into OUT/ladder.csv, OUT/ladder.md and
OUT/ladder.png. A development tool: it trains for about an hour on 2 cores.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import csv
import json
import os
import re
import subprocess
import sys
from typing import Dict, List, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# CQL's demo optimizer and regularizer settings, CCVL without the support head.
CCVL_SHARED = ("--agent=ccvl", "--alpha=1", "--learning_rate=1e-3", "--adam_epsilon=3.125e-4",
               "--dr3_coef=0", "--target_update_period=2000", "--support_threshold=0",
               "--gap=logsumexp", "--td_loss=huber")
_R1 = CCVL_SHARED + ("--objective=bound", "--num_deltas=1", "--num_pairs=1",
                     "--train_delta=0.5", "--delta_weight=constant", "--count_weight=off",
                     "--delta_head=cosine")


def _change(flags: Sequence[str], **values) -> tuple:
  """`flags` with --name=value set (replaced or added); value None removes --name."""
  out = [f for f in flags if f.split("=", 1)[0].lstrip("-") not in values]
  out += [f"--{k}={v}" for k, v in values.items() if v is not None]
  return tuple(out)


_R2 = _change(_R1, num_deltas=8, train_delta=None)
_R3 = _change(_R2, delta_weight="sqrt_log")
_R4 = _change(_R3, count_weight="linear", count_normalization="none")
_R5 = _change(_R4, count_normalization="mean")
_R6 = _change(_R5, num_pairs=2)
_R7 = _change(_R6, objective="algorithm1")
# rung -> (what it changes, its train_offline.py flags)
RUNGS: Dict[str, tuple] = {
    "0": ("CQL at its demo settings", ("--agent=cql",)),
    "1": ("CQL's loss in CCVL's network: delta 0.5, constant weight, cosine head", _R1),
    "2": ("N = 8 deltas ~ U(0, 1)", _R2),
    "3": ("weight alpha sqrt(log(1/delta))", _R3),
    "4": ("count weight n(s)^-1, raw", _R4),
    "5": ("n(s)^-1 normalized by its running mean", _R5),
    "6": ("max over delta_2 <= delta ('bound', M = 2)", _R6),
    "7": ("max over pairs ('algorithm1')", _R7),
    "8": ("monotone head on rung 6 ('bound')", _change(_R6, delta_head="monotone")),
    "9": ("monotone head on rung 7 ('algorithm1')", _change(_R7, delta_head="monotone")),
    "10": ("TD loss 1/2 x^2 on rung 7", _change(_R7, td_loss="squared")),
}
COLUMNS = ("pass", "rung", "change", "final_eval", "final_eval_ended", "ccvl_adaptive",
           "ccvl_adaptive_ci_low", "fixed_ccvl", "fixed_ccvl_ci_low", "cql", "cql_ci_low",
           "behaviour", "lemma1_fraction", "v_above_value_max_fraction", "greedy_mode_share", "phi_dead_fraction", "phi_sq_norm", "td_term",
           "cql_gap", "family_differs_any", "train_seconds", "flags")


def rung_flags(rung: str, args) -> List[str]:
  """The train_offline.py command line of one rung (without the interpreter)."""
  _, flags = RUNGS[rung]
  extra = tuple(args.extra_flags.split()) if args.extra_flags else ()
  return ["binaries/train_offline.py", "--game=Breakout", f"--dataset_dir={args.dataset_dir}",
          "--seed=100", "--reference_agents=none", f"--num_steps={args.num_steps}",
          "--eval_interval=5000", "--tf_threads=1",
          f"--root_dir={run_dir(args, rung)}", *flags, *extra]


def run_dir(args, rung: str) -> str:
  return os.path.join(args.output_dir, "runs", f"rung{rung}{args.suffix}")


def finished(args, rung: str) -> bool:
  path = os.path.join(run_dir(args, rung), "summary.json")
  if not os.path.exists(path):
    return False
  with open(path) as f:
    summary = json.load(f)
  return int(summary.get("step", summary.get("train_step", -1))) >= args.num_steps


def train(args, rung: str) -> int:
  """Runs (or resumes) one rung's train_offline.py; returns its exit code."""
  if finished(args, rung):
    return 0
  log_path = os.path.join(args.output_dir, "logs", f"rung{rung}{args.suffix}.log")
  os.makedirs(os.path.dirname(log_path), exist_ok=True)
  cmd = [args.python, *rung_flags(rung, args)]
  with open(log_path, "a") as log:
    log.write("$ " + " ".join(cmd) + "\n")
    log.flush()
    return subprocess.run(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT).returncode


# ---------------------------------------------------------------------------- measurements
_METRIC = re.compile(r"(\w+)=(-?[0-9.eE+-]+|nan|inf)")


def last_log_metrics(log_path: str) -> Dict[str, float]:
  """The metrics of the last 'step N/M ...' progress line of a training log."""
  last = None
  with open(log_path, errors="replace") as f:
    for line in f:
      if re.match(r"^\s*(\[\w+\]\s*)?step \d+/\d+", line):
        last = line
  if last is None:
    return {}
  return {k: float(v) for k, v in _METRIC.findall(last)}


def main(argv=None) -> None:
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--dataset_dir", required=True)
  p.add_argument("--heldout_dir", required=True)
  p.add_argument("--output_dir", required=True)
  p.add_argument("--rungs", default=",".join(RUNGS))
  p.add_argument("--workers", type=int, default=2)
  p.add_argument("--num_steps", type=int, default=17_500)
  p.add_argument("--extra_flags", default="", help="flags added to every rung")
  p.add_argument("--suffix", default="", help="appended to each rung's run name")
  p.add_argument("--python", default=sys.executable)
  p.add_argument("--measure_only", action="store_true")
  args = p.parse_args(argv)
  rungs = [r.strip() for r in args.rungs.split(",") if r.strip()]
  bad = [r for r in rungs if r not in RUNGS]
  if bad:
    sys.exit(f"ladder.py: error: --rungs: unknown {bad}; valid: {', '.join(RUNGS)}")
  os.makedirs(args.output_dir, exist_ok=True)
  if not args.measure_only:
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.workers) as pool:
      for rung, code in zip(rungs, pool.map(lambda r: train(args, r), rungs)):
        print(f"rung {rung}: exit {code}", flush=True)
  measure(args, [r for r in rungs if finished(args, r)])


def greedy_actions(policy_dir: str, observations) -> "np.ndarray":
  """The actions an exported stateless greedy policy takes at `observations` [S, 84, 84, 4]."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tf_agents.trajectories import time_step as ts  # pylint: disable=g-import-not-at-top
  from ccvl_tf.evaluation import rollouts  # pylint: disable=g-import-not-at-top
  policy, _ = rollouts.load_saved_policy(policy_dir)
  out = []
  for i in range(0, len(observations), 128):
    obs = tf.constant(observations[i:i + 128])
    b = int(obs.shape[0])
    step = ts.TimeStep(step_type=tf.fill([b], ts.StepType.MID), reward=tf.zeros([b]),
                       discount=tf.ones([b]), observation=obs)
    state = policy.get_initial_state(b)
    out.append(np.asarray(policy.action(step, state).action))
  return np.concatenate(out).reshape(-1)


def heldout_observations(args, num_states: int = 512, seed: int = 100):
  """`num_states` observations drawn once (seed 100) from the held-out collection."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from ccvl_tf.data import frame_store, pipeline  # pylint: disable=g-import-not-at-top
  from ccvl_tf.envs import atari  # pylint: disable=g-import-not-at-top
  num_actions = atari.AtariEnvironment("Breakout", seed=0).num_actions
  store = frame_store.FrameStore.from_replay(args.heldout_dir, "all", num_actions=num_actions)
  return np.asarray(pipeline.sample_batch(store, num_states, seed, 0)["observation"])


def measure_rung(args, rung: str, observations) -> Dict[str, object]:
  """One finished rung's row (COLUMNS)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  root = run_dir(args, rung)
  with open(os.path.join(root, "summary.json")) as f:
    summary = json.load(f)
  table = {r["policy"]: r for r in summary.get("results_table", [])}
  rows = {k: r["mean"] for k, r in table.items()}
  low = {k: r["ci_low"] for k, r in table.items()}
  last = summary.get("last_metrics", {})
  ev = summary.get("last_eval", {})
  greedy_dir = summary.get("fixed_policy_dir") or summary["policy_dir"]
  actions = greedy_actions(greedy_dir, observations)
  counts = np.bincount(actions, minlength=4)
  diag = summary.get("diagnostics") or {}
  train_s = (summary.get("phase_times") or {}).get(f"training {summary['agent']}")
  return {"pass": args.suffix or "first", "rung": rung, "change": RUNGS[rung][0],
          "final_eval": ev.get("mean_raw_score"),
          "final_eval_ended": None if ev.get("ended_share") is None
          else int(round(10 * ev["ended_share"])),
          "ccvl_adaptive": rows.get("CCVL (adaptive)"), "fixed_ccvl": rows.get("Fixed-CCVL"),
          "cql": rows.get("cql"), "ccvl_adaptive_ci_low": low.get("CCVL (adaptive)"),
          "fixed_ccvl_ci_low": low.get("Fixed-CCVL"), "cql_ci_low": low.get("cql"),
          "behaviour": next((v for k, v in rows.items() if k.startswith("behaviour")), None),
          "lemma1_fraction": diag.get("lemma1_fraction"),
          "v_above_value_max_fraction": diag.get("v_above_value_max_fraction"),
          "greedy_mode_share": float(counts.max() / counts.sum()),
          "phi_dead_fraction": last.get("phi_dead_fraction"),
          "phi_sq_norm": last.get("phi_sq_norm"), "td_term": last.get("td_term"),
          "cql_gap": last.get("cql_gap"),
          "family_differs_any": diag.get("family_differs_any"),
          "train_seconds": train_s,
          "flags": " ".join(RUNGS[rung][1]) + (f" {args.extra_flags}" if args.extra_flags else "")}


def _fmt(x, spec=".2f") -> str:
  return "-" if x is None else format(x, spec) if isinstance(x, float) else str(x)


def measure(args, rungs: Sequence[str]) -> None:
  """ladder.csv, ladder.md and ladder.png of the finished rungs."""
  if not rungs:
    print("no finished rung to measure")
    return
  observations = heldout_observations(args)
  rows = [measure_rung(args, r, observations) for r in rungs]
  name = f"ladder{args.suffix}"
  with open(os.path.join(args.output_dir, f"{name}.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, COLUMNS, extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
  lines = ["| rung | change | final eval (ended of 10) | table: CQL or CCVL (adaptive) | Fixed-CCVL | "
           "greedy mode share | dead phi units | phi sq norm | td_term | CQL gap | "
           "family differs |", "| --- " * 11 + "|"]
  for r in rows:
    lines.append(
        f"| {r['rung']} | {r['change']} | {_fmt(r['final_eval'], '.1f')} "
        f"({_fmt(r['final_eval_ended'])}) | "
        f"{_fmt(r['cql'] if r['cql'] is not None else r['ccvl_adaptive'])} | "
        f"{_fmt(r['fixed_ccvl'])} | {_fmt(r['greedy_mode_share'])} | "
        f"{_fmt(r['phi_dead_fraction'])} | {_fmt(r['phi_sq_norm'], '.3g')} | "
        f"{_fmt(r['td_term'], '.3f')} | {_fmt(r['cql_gap'], '.3f')} | "
        f"{_fmt(r['family_differs_any'], '.3f')} |")
  with open(os.path.join(args.output_dir, f"{name}.md"), "w") as f:
    f.write("\n".join(lines) + "\n")
  print("\n".join(lines))
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, axes = plt.subplots(1, 3, figsize=(15, 4))
  labels = [r["rung"] for r in rows]
  for ax, key, title in zip(axes, ("final_eval", "greedy_mode_share", "phi_dead_fraction"),
                            ("final evaluation (raw score)", "greedy mode share (held-out)",
                             "dead phi units (last batch)")):
    ax.bar(labels, [r[key] if r[key] is not None else 0.0 for r in rows])
    ax.set_title(title)
    ax.set_xlabel("rung")
  fig.tight_layout()
  fig.savefig(os.path.join(args.output_dir, f"{name}.png"), dpi=100)
  plt.close(fig)


if __name__ == "__main__":
  main()
