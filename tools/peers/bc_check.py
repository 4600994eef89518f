"""Is our BC's gap to d3rlpy's DiscreteBC systematic? (docs/results/vector_peers.md, "Is BC's
gap systematic?"): both BCs of Study 2, the same settings, on one task's development dataset,
more training seeds; the rule is the page's.

  PYTHONPATH=. .venv/bin/python tools/peers/bc_check.py --data_dir=runs/gym_datasets \
      --work_dir=runs/bc_check [--task=CartPole-v1 --dataset_seed=100 --seeds=0-9]

Each run's record is kept under WORK/records (a rerun skips finished ones): ours through
vector_peers.ours_unit (ccvl_tf.fit's bc), d3rlpy's through vector_peers.train_peer and
evaluate_peer, both on the episode seeds of our run's first row. --side runs one library only
(two processes, one per core); the summary (per-seed normalized scores, the paired difference
with its bootstrap CI, the verdict) is printed and written to WORK/summary.json once both sides
are done.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
for _p in (ROOT, HERE):
  if _p not in sys.path:
    sys.path.insert(0, _p)

import vector_peers  # noqa: E402

BOOTSTRAP_REPS, BOOTSTRAP_SEED = 10_000, 0


def seed_list(text: str):
  lo, _, hi = text.partition("-")
  return list(range(int(lo), int(hi) + 1)) if hi else [int(s) for s in text.split(",")]


def paired_ci(diffs, reps: int = BOOTSTRAP_REPS, seed: int = BOOTSTRAP_SEED):
  """(mean, low, high): the mean of `diffs` and the 95% percentile bootstrap CI over them."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  d = np.asarray(diffs, np.float64)
  rng = np.random.default_rng(seed)
  means = d[rng.integers(0, len(d), size=(reps, len(d)))].mean(axis=1)
  return float(d.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def main(argv=None) -> None:
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--data_dir", default=os.path.join(ROOT, "runs", "gym_datasets"))
  p.add_argument("--task", default="CartPole-v1")
  p.add_argument("--dataset_seed", type=int, default=100)
  p.add_argument("--seeds", default="0-9")
  p.add_argument("--num_steps", type=int, default=10_000)
  p.add_argument("--batch_size", type=int, default=64)
  p.add_argument("--eval_episodes", type=int, default=20)
  p.add_argument("--work_dir", default="runs/bc_check")
  p.add_argument("--side", choices=("both", "ours", "d3rlpy"), default="both")
  p.add_argument("--peer_venv", default=os.path.join(HERE, ".venv"))
  args = p.parse_args(argv)
  vector_peers.setup_process(1)
  seeds = seed_list(args.seeds)
  data = os.path.join(vector_peers.dataset_dir(args.data_dir, args.task, args.dataset_seed),
                      "data.npz")
  refs = vector_peers.references(args.data_dir, args.task, args.dataset_seed)
  records = os.path.join(args.work_dir, "records")
  os.makedirs(records, exist_ok=True)
  log = vector_peers.Log(os.path.join(args.work_dir, "log.txt"))
  path = lambda side, s: os.path.join(records, f"{side}_seed{s}.json")
  if args.side in ("both", "ours"):
    for s in seeds:
      if not os.path.exists(path("ours", s)):
        rec = vector_peers.ours_unit({
            "task": args.task, "method": "bc", "seed": s, "data": data,
            "num_steps": args.num_steps, "batch_size": args.batch_size,
            "eval_episodes": args.eval_episodes,
            "root_dir": os.path.join(args.work_dir, "ours", f"seed_{s}")})
        row = next(r for r in rec["rows"] if r["policy"] == "BC")
        vector_peers.write_json(path("ours", s), {"mean": row["mean"], "scores": row["scores"],
                                                   "eval_seed": row["eval_seed"]})
        log(f"ours BC seed {s}: {row['mean']:.1f}")
  if args.side in ("both", "d3rlpy"):
    import numpy as np  # pylint: disable=g-import-not-at-top
    py = os.path.join(args.peer_venv, "bin", "python")
    obs_dim = int(np.load(data)["observations"].shape[1])
    for s in seeds:
      if not os.path.exists(path("d3rlpy", s)):
        out = os.path.join(args.work_dir, "d3rlpy", f"seed_{s}")
        vector_peers.train_peer(py, data, "bc", s, args.num_steps, args.batch_size, 1, out, log)
        played = vector_peers.evaluate_peer(py, os.path.join(out, "model.d3"), args.task,
                                            obs_dim, s, args.eval_episodes)
        vector_peers.write_json(path("d3rlpy", s), {
            "mean": float(np.mean(played["scores"])), "scores": played["scores"],
            "eval_seed": played["eval_seed"]})
        log(f"d3rlpy DiscreteBC seed {s}: {np.mean(played['scores']):.1f}")
  if not all(os.path.exists(path(side, s)) for side in ("ours", "d3rlpy") for s in seeds):
    return
  norm = lambda m: vector_peers.vector_table.normalized(m, refs["random"], refs["final_greedy"])
  ours = [norm(vector_peers.read_json(path("ours", s))["mean"]) for s in seeds]
  theirs = [norm(vector_peers.read_json(path("d3rlpy", s))["mean"]) for s in seeds]
  mean, low, high = paired_ci([a - b for a, b in zip(ours, theirs)])
  verdict = "systematic" if high < 0 else "not shown"
  summary = {"task": args.task, "dataset_seed": args.dataset_seed, "seeds": seeds,
             "references": refs, "ours_normalized": ours, "d3rlpy_normalized": theirs,
             "difference": {"mean": mean, "ci_low": low, "ci_high": high,
                            "reps": BOOTSTRAP_REPS, "seed": BOOTSTRAP_SEED},
             "verdict": verdict}
  vector_peers.write_json(os.path.join(args.work_dir, "summary.json"), summary)
  log(f"ours BC {sum(ours) / len(ours):.1f}, d3rlpy DiscreteBC {sum(theirs) / len(theirs):.1f}; "
      f"ours - d3rlpy {mean:.1f} [{low:.1f}, {high:.1f}]: {verdict}")


if __name__ == "__main__":
  main()
