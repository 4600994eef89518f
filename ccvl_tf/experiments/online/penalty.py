"""The CCVL penalty during online fine-tuning: counts that follow the online data,
and a diagnostic of the weight the learner puts on its states.

More in docs/online.md "Module notes", `ccvl_tf/experiments/online/penalty.py`.
"""
from __future__ import annotations

import io
from typing import Callable, Dict, List, Optional, Sequence

import matplotlib
from matplotlib import colors as mcolors
from matplotlib.lines import Line2D
import matplotlib.pyplot as plt
import numpy as np

from ccvl_tf.runtime import paths
from ccvl_tf.tabular import gridworld
from ccvl_tf.tabular import dataset as tds

PENALTY_DELTA = 0.5  # the delta of the reported weight (the exported policy's default)
ONLINE_COUNTS = ("grow", "offline")
# tight/* keys plotted beside the weights (online_eval.bound_tightness at delta 0.5).
TIGHT_KEYS = ("tight/lower_minus_mc@0.5", "tight/upper_minus_mc@0.5")


def start_counts(agent, online_rows: int, samples_per_insert: float,
                 log: Callable[[str], None] = print) -> List[str]:
  """--online_counts=grow: n(s)^-1 of every CCVL bound with a linear estimate follows the
  online data from now on (see the module notes); returns the bounds it applies to ('lower',
  'upper'). Call under the learner's strategy scope (it creates variables), after the offline
  restore and before an online checkpoint's restore."""
  started = []
  for prefix, learner in agent.guarded_learners().items():
    start = getattr(learner, "start_online_counts", None)
    if start is not None and start(online_rows, samples_per_insert):
      started.append(_bound_name(prefix))
  if started:
    counts = agent.guarded_learners()[""].counts
    log(f"n(s)^-1 of {' and '.join(started)} follows the online data: |D| = "
        f"{counts.dataset_size:.0f} offline + online rows / SPI {samples_per_insert:g}, "
        f"normalized by the offline mean n(s)^-1 "
        f"{float(counts.running_mean_inverse_count().numpy()):.4g} (frozen).")
  return started


def _bound_name(prefix: str) -> str:
  return {"": "lower", "upper/": "upper"}[prefix]


def offline_states(game: str, path: Optional[str], size: int, seed: int) -> Optional[np.ndarray]:
  """Offline observations for the diagnostic: `path` (an .npz with 'observation' [K, ...],
  e.g. finetune_minatar.py's), else on the gridworld a sample of its dataset, else None."""
  if path:
    with np.load(io.BytesIO(paths.read_bytes(path))) as data:
      if "observation" not in data:
        raise ValueError(f"--offline_states {path} has no 'observation' array "
                         f"(it has {sorted(data.files)})")
      return np.asarray(data["observation"])[:size]
  if game.lower() == "gridworld":
    data = tds.make_gridworld_dataset(seed=0)
    idx = np.random.default_rng(seed).choice(len(data), min(size, len(data)), replace=False)
    return np.asarray(tds.one_hot_batch(gridworld.GridWorld(), data, idx)["observation"])
  return None


class PenaltyProbe:
  """The regularizer weight of each CCVL bound on new online states and on offline states
  (module notes). `add` the online rows of every trained batch; `measure` at each
  evaluation (it starts a new window of new states)."""

  def __init__(self, offline_observations: Optional[np.ndarray], capacity: int = 512,
               seed: int = 0):
    """
    Args:
      offline_observations: [K, ...] offline states, or None (no 'offline' keys).
      capacity: size of the uniform sample of new online rows kept per window.
      seed: of the reservoir sampling.
    """
    if int(capacity) != capacity or capacity < 1:
      raise ValueError(f"capacity must be an integer >= 1, got {capacity!r}")
    self.offline = offline_observations
    self.capacity = int(capacity)
    self._rng = np.random.default_rng(seed)
    self._reset()

  def _reset(self) -> None:
    self._sample: List[np.ndarray] = []
    self._seen = 0

  def add(self, observations) -> None:
    """Online rows [B, ...] the learner trained on: into the window's reservoir sample
    (Algorithm R: every row seen since the last `measure` is kept with equal probability)."""
    for row in np.asarray(observations):
      if len(self._sample) < self.capacity:
        self._sample.append(row.copy())
      else:
        j = int(self._rng.integers(0, self._seen + 1))
        if j < self.capacity:
          self._sample[j] = row.copy()
      self._seen += 1

  @property
  def new_observations(self) -> Optional[np.ndarray]:
    return np.stack(self._sample) if self._sample else None

  def measure(self, agent, delta: float = PENALTY_DELTA) -> Dict[str, float]:
    """The penalty keys (module notes) for every guarded learner of `agent` that has
    `regularizer_weight` (CCVL bounds); {} for other learners. Starts a new window."""
    out: Dict[str, float] = {}
    sets = {"new": self.new_observations, "offline": self.offline}
    for prefix, learner in agent.guarded_learners().items():
      weight = getattr(learner, "regularizer_weight", None)
      if weight is None:
        continue
      bound = _bound_name(prefix)
      for name, obs in sets.items():
        if obs is None:
          continue
        w = np.concatenate([np.asarray(weight(obs[i:i + 256], delta))
                            for i in range(0, len(obs), 256)])           # [K]
        out[f"penalty/{bound}_weight_{name}"] = float(w.mean())
        # n(s)^-1 as the objective uses it: (w / alpha)^2 / log(1/delta).
        alpha = learner.penalty_alpha
        if alpha > 0:
          out[f"penalty/{bound}_inverse_count_{name}"] = float(
              np.mean((w / alpha) ** 2) / np.log(1.0 / delta))
      counts = getattr(learner, "counts", None)
      if counts is not None:
        out[f"penalty/{bound}_dataset_size"] = float(counts.total_size().numpy())
    if out:
      out["penalty/new_states"] = float(self._seen)
    self._reset()
    return out


def plot(series: Dict[str, Sequence[dict]], path: str, title: str = "") -> dict:
  """Weights (lower bound: new and offline states) and Q_l / Q_u - Monte-Carlo return at
  delta 0.5 against online env steps, one line per label of `series` (label -> rows with
  'online_env_steps' and the keys; rows without a key are skipped). Each label keeps one
  colour in every panel and in the legend, also where a panel lacks some labels (Q_u exists
  only for the bounds agent). Returns {"legend": {label: colour}, "panels": {panel title:
  {label: colour of its line}}} (what was drawn)."""
  matplotlib.use("Agg")
  panels = [("penalty/lower_weight_new", "w(s, 0.5) of Q_l: new online states"),
            ("penalty/lower_weight_offline", "w(s, 0.5) of Q_l: offline states"),
            (TIGHT_KEYS[0], "Q_l - MC return (delta 0.5)"),
            (TIGHT_KEYS[1], "Q_u - MC return (delta 0.5)")]
  colour = {name: f"C{i % 10}" for i, name in enumerate(series)}
  drawn = {"legend": {}, "panels": {}}
  fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), squeeze=False)
  for ax, (key, label) in zip(axes[0], panels):
    drawn["panels"][label] = {}
    for name, rows in series.items():
      pts = sorted((r["online_env_steps"], r[key]) for r in rows
                   if key in r and np.isfinite(r.get("online_env_steps", np.nan)))
      if pts:
        xs, ys = zip(*pts)
        (line,) = ax.plot(xs, ys, marker="o", ms=3, label=name, color=colour[name])
        drawn["panels"][label][name] = mcolors.to_hex(line.get_color())
    if key.startswith("tight/"):
      ax.axhline(0.0, color="gray", lw=0.8)
    ax.set_title(label, fontsize=9)
    ax.set_xlabel("online env steps")
  shown = [n for n in series if any(n in p for p in drawn["panels"].values())]
  if shown:
    handles = [Line2D([], [], marker="o", ms=3, color=colour[n]) for n in shown]
    fig.legend(handles, shown, loc="lower center", ncol=min(len(shown), 4), fontsize=8)
    drawn["legend"] = {n: mcolors.to_hex(h.get_color()) for n, h in zip(shown, handles)}
  if title:
    fig.suptitle(title, fontsize=10)
  fig.tight_layout(rect=(0, 0.1, 1, 0.95))
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return drawn
