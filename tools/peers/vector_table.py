"""Study 2's table from its rows: normalized scores, per-task means, the IQM over tasks x
training seeds with its 95% stratified-bootstrap CI (rliable, ccvl_tf.evaluation.score_stats)
and the protocol's goals. Pure functions of the rows; tools/peers/vector_peers.py writes them.

A row is one policy of one training run on one task: task, library, method, policy,
train_seed, eval_seed, episodes, mean (raw return over the episodes), ci_low, ci_high,
normalized.
"""
from __future__ import annotations

import csv
import os
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

FIELDS = ("task", "library", "method", "policy", "train_seed", "eval_seed", "episodes", "mean",
          "ci_low", "ci_high", "normalized")
# The table's rows, in order: (policy name in the rows, label in the table).
POLICIES = (("BC", "ccvl_tf BC"), ("CQL", "ccvl_tf CQL"),
            ("CCVL (adaptive)", "ccvl_tf CCVL (adaptive)"), ("Fixed-CCVL", "ccvl_tf Fixed-CCVL"),
            ("d3rlpy DiscreteBC", "d3rlpy DiscreteBC"),
            ("d3rlpy DiscreteCQL", "d3rlpy DiscreteCQL"))
# The goals of the protocol: our policy against d3rlpy's counterpart.
GOALS = (("BC", "d3rlpy DiscreteBC"), ("CQL", "d3rlpy DiscreteCQL"))
BOOTSTRAP_REPS, BOOTSTRAP_SEED = 2000, 0


def normalized(mean: float, random_score: float, reference_score: float) -> float:
  """100 * (mean - random) / (reference - random): 0 random, 100 the reference policy."""
  if reference_score == random_score:
    raise ValueError(f"the reference score equals the random one ({random_score})")
  return 100.0 * (float(mean) - random_score) / (reference_score - random_score)


def write_rows(path: str, rows: Sequence[Mapping[str, object]]) -> None:
  with open(path + ".tmp", "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
  os.replace(path + ".tmp", path)


def read_rows(path: str) -> List[Dict[str, object]]:
  """The rows `write_rows` wrote, typed as vector_peers made them (seeds and episode counts
  int, scores float)."""
  ints, floats = ("train_seed", "eval_seed", "episodes"), ("mean", "ci_low", "ci_high",
                                                            "normalized")
  with open(path, newline="") as f:
    return [{k: int(v) if k in ints else float(v) if k in floats else v for k, v in r.items()}
            for r in csv.DictReader(f)]


def score_matrix(rows: Sequence[Mapping[str, object]], policy: str, tasks: Sequence[str],
                 seeds: Sequence[int]) -> Optional[np.ndarray]:
  """Normalized scores [seeds, tasks] of `policy`, or None when a cell is missing (a cell
  given twice is an error)."""
  cells: Dict[Tuple[str, int], float] = {}
  for r in rows:
    if r["policy"] != policy:
      continue
    key = (str(r["task"]), int(r["train_seed"]))
    if key in cells:
      raise ValueError(f"two rows of {policy} on {key[0]}, training seed {key[1]}")
    cells[key] = float(r["normalized"])
  if any((t, s) not in cells for t in tasks for s in seeds):
    return None
  return np.array([[cells[(t, s)] for t in tasks] for s in seeds], np.float64)


def aggregates(rows, tasks: Sequence[str], seeds: Sequence[int]) -> Dict[str, Dict[str, object]]:
  """Per policy of POLICIES with rows: per-task mean normalized score (over the seeds it has)
  and, when every (seed, task) cell is there, the IQM with its 95% stratified-bootstrap CI."""
  from ccvl_tf.evaluation import score_stats  # pylint: disable=g-import-not-at-top
  out = {}
  for policy, label in POLICIES:
    mine = [r for r in rows if r["policy"] == policy]
    if not mine:
      continue
    per_task = {t: float(np.mean([float(r["normalized"]) for r in mine if r["task"] == t]))
                for t in tasks if any(r["task"] == t for r in mine)}
    entry = {"label": label, "per_task": per_task, "runs": len(mine), "iqm": None}
    matrix = score_matrix(rows, policy, tasks, seeds)
    if matrix is not None:
      entry["iqm"] = score_stats.aggregate_scores(
          matrix, reps=BOOTSTRAP_REPS, seed=BOOTSTRAP_SEED)["iqm"].as_dict()
    out[policy] = entry
  return out


def goals(aggs: Mapping[str, Mapping[str, object]],
          speed: Sequence[Mapping[str, object]] = ()) -> List[str]:
  """One line per goal of the protocol: met or missed, with its numbers."""
  lines = []
  for ours, theirs in GOALS:
    a, b = aggs.get(ours, {}).get("iqm"), aggs.get(theirs, {}).get("iqm")
    if a is None or b is None:
      lines.append(f"{ours} vs {theirs}: not decided (runs missing).")
      continue
    verdict = "met" if a["value"] >= b["ci_low"] else "missed"
    lines.append(f"Our {ours} not below the lower end of {theirs}'s CI: **{verdict}** "
                 f"(IQM {a['value']:.1f} vs {theirs} {b['value']:.1f}, CI "
                 f"[{b['ci_low']:.1f}, {b['ci_high']:.1f}]).")
  for r in speed:
    if r.get("ratio") is None:
      continue
    verdict = "met" if r["ratio"] >= 1.0 else "missed"
    lines.append(f"Our {r['method'].upper()} train step no slower than d3rlpy's at "
                 f"{r['threads']} thread(s): **{verdict}** ({r['ours_steps_per_s']:.1f} vs "
                 f"{r['d3rlpy_steps_per_s']:.1f} steps/s, ratio {r['ratio']:.2f}).")
  return lines


def render(rows, tasks: Sequence[str], seeds: Sequence[int], note: str = "",
           speed: Sequence[Mapping[str, object]] = (), speed_table: str = "") -> str:
  """The markdown page: the score table, the goals, the speed table and `note`."""
  aggs = aggregates(rows, tasks, seeds)
  lines = ["# Study 2: ccvl_tf and d3rlpy on the same vector data", "",
           "Normalized score per task (0 = random, 100 = the dataset's final greedy DQN), the "
           f"mean over training seeds {', '.join(map(str, seeds))}; IQM over tasks x seeds "
           "with its 95% stratified-bootstrap CI (rliable).", "",
           "| policy | " + " | ".join(tasks) + " | IQM | 95% CI | runs |",
           "| --- " * (len(tasks) + 4) + "|"]
  for policy, entry in aggs.items():
    cells = [f"{entry['per_task'][t]:.1f}" if t in entry["per_task"] else "-" for t in tasks]
    iqm = entry["iqm"]
    tail = (f"{iqm['value']:.1f} | [{iqm['ci_low']:.1f}, {iqm['ci_high']:.1f}]" if iqm
            else "- | -")
    lines.append(f"| {entry['label']} | " + " | ".join(cells) + f" | {tail} | {entry['runs']} |")
  lines += ["", "## Goals (stated before the runs)", ""]
  lines += [f"- {g}" for g in goals(aggs, speed)]
  if speed_table:
    lines += ["", "## Train-step speed (steps per second, medians of interleaved runs)", "",
              speed_table.rstrip()]
  if note:
    lines += ["", note]
  return "\n".join(lines) + "\n"
