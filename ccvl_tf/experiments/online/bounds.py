"""The gridworld's bounds check during online fine-tuning: the online transitions the
learner trained on (`TransitionLog`) and the report of Q_l, Q_u against exact values at the
offline start and after fine-tuning (`report_phase`; the references and the coverage rows are
experiments/gridworld/bounds.py's, the learner's Q tables scores_and_bounds.gridworld_bounds_report's).

Phases:
  START  'offline start': on the offline dataset (tabular.dataset.make_gridworld_dataset(seed=0),
         2,500 transitions), Q* of the world it came from (p = 0.3);
  AFTER  'after fine-tuning': on the online transitions the learner trained on (with the
         repetitions of replay sampling), Q* of the world they came from (p = 0.15).
Both with the learner's n(s) at that point (the offline counts, grown online).
"""
from __future__ import annotations

import json
import os
from typing import Callable, Dict, Optional

import numpy as np

from ccvl_tf.tabular import gridworld
from ccvl_tf.experiments.gridworld import bounds as gridworld_bounds
from ccvl_tf.experiments.online import scores_and_bounds as online_eval
from ccvl_tf.tabular import dataset as tds
from ccvl_tf.runtime import strict_json

START = "offline start"
AFTER = "after fine-tuning"


class TransitionLog:
  """The online transitions a gridworld learner trained on (integer states, with the
  repetitions of replay sampling), for the end-of-run bounds report; saved with every
  checkpoint (`save`) and reloaded on resume, cut to the resumed step."""

  KEYS = ("state", "action", "reward", "next_state", "terminal", "step")

  def __init__(self, path: str, resume_step: Optional[int]):
    """path: the .npz file; resume_step: the learner step resumed at (None: a fresh run)."""
    self.path = path
    self.rows = {k: [] for k in self.KEYS}
    if resume_step is not None and os.path.exists(path):
      with np.load(path) as saved:
        keep = saved["step"] <= resume_step
        self.rows = {k: list(saved[k][keep]) for k in self.KEYS}

  def add(self, rows: Dict[str, np.ndarray], step: int) -> None:
    """rows: the online part of the batch of learner step `step` (one-hot observations
    [B, S], next_observation [B, S], action, reward, terminal [B])."""
    self.rows["state"].extend(np.argmax(rows["observation"], axis=-1).tolist())
    self.rows["next_state"].extend(np.argmax(rows["next_observation"], axis=-1).tolist())
    for k in ("action", "reward", "terminal"):
      self.rows[k].extend(np.asarray(rows[k]).reshape(-1).tolist())
    self.rows["step"].extend([int(step)] * len(rows["action"]))

  def save(self) -> None:
    if self.rows["state"]:
      tmp = self.path + ".tmp.npz"
      np.savez(tmp, **{k: np.asarray(v) for k, v in self.rows.items()})
      os.replace(tmp, self.path)

  def as_transitions(self):
    """tabular.dataset.Transitions of the log, or None when it is empty."""
    if not self.rows["state"]:
      return None
    return tds.Transitions(np.asarray(self.rows["state"], np.int64),
                           np.asarray(self.rows["action"], np.int64),
                           np.asarray(self.rows["reward"], np.float32),
                           np.asarray(self.rows["next_state"], np.int64),
                           np.asarray(self.rows["terminal"], np.float32))


def report_phase(cfg, agent, alpha: float, counts: np.ndarray, transitions: TransitionLog,
                 phase: str, step: int, log: Callable[[str], None]) -> Dict[str, float]:
  """The bounds of `agent` against exact values at `phase` (module docstring). Writes
  cfg.root_dir/bounds_report.json, .md and .png (one section per phase, the earlier phase's
  kept), logs the table and whether the coverage is >= 1 - delta at every grid delta, and
  returns the rows as flat metrics 'bounds_start/<key>@<delta>' (START) or
  'bounds/<key>@<delta>' (AFTER); {} when AFTER has no online transitions.

  Args:
    cfg: OnlineConfig (root_dir; its exploration's num_grid_deltas, upper_alpha).
    agent: the learner.
    alpha: its bonus weight of Q_l.
    counts: its n(s) [S].
    transitions: the online transitions it trained on.
    phase: START or AFTER.
    step: the learner step (for the title).
    log: where the table goes.
  """
  if phase not in (START, AFTER):
    raise ValueError(f"phase must be {START!r} or {AFTER!r}, got {phase!r}")
  if phase == START:
    data, world = tds.make_gridworld_dataset(seed=0), gridworld.GridWorld()
  else:
    data = transitions.as_transitions()
    world = gridworld.GridWorld(slip_prob=gridworld.EVAL_SLIP_PROB)
    if data is None:
      log("[bounds] no online transitions recorded: no report after fine-tuning")
      return {}
  rows = online_eval.gridworld_bounds_report(cfg, agent, alpha, data, world, counts)
  title = (f"{phase} (learner step {step}; {len(data)} transitions, Q* at p = "
           f"{world.slip_prob:g})")
  path = os.path.join(cfg.root_dir, "bounds_report.json")
  sections = {}
  if os.path.exists(path):
    with open(path) as f:
      sections = json.load(f)
  sections[phase] = {"title": title, "rows": rows}
  with open(path, "w") as f:
    strict_json.dump(sections, f, indent=2)
  with open(os.path.join(cfg.root_dir, "bounds_report.md"), "w") as f:
    f.write("# Bounds against exact values (gridworld)\n\n" + "\n".join(
        gridworld_bounds.markdown_table(v["rows"], v["title"]) for v in sections.values()))
  gridworld_bounds.plot({k: v["rows"] for k, v in sections.items()},
                        os.path.join(cfg.root_dir, "bounds_report.png"))
  met = gridworld_bounds.coverage_met(rows)
  log(f"[bounds] {gridworld_bounds.markdown_table(rows, title)}"
      + "coverage >= 1 - delta at every grid delta: "
      + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in met.items()))
  return gridworld_bounds.flat_metrics(rows, "bounds_start" if phase == START else "bounds")
