"""Do the learned bounds bound? Q_l(s, a, delta) <= Q*(s, a) <= Q_u(s, a, delta) on the gridworld,
checked against exact values.

More in docs/library.md "Module notes", `ccvl_tf/experiments/gridworld/bounds.py`.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import tensorflow as tf

from ccvl_tf.tabular.gridworld import GridWorld
from ccvl_tf.tabular.dataset import Transitions
from ccvl_tf.tabular import learners
from ccvl_tf.tabular import value_iteration as vi

# The largest return of the gridworld: one reward of +1, on arriving at the goal, then the
# episode ends (every return is 0 or gamma^t <= 1). A property of the MDP, not of any learner.
GRIDWORLD_VALUE_MAX = 1.0


def references(data: Transitions, world: GridWorld, deltas: Sequence[float], alpha: float,
               upper_alpha: Optional[float] = None, counts: Optional[np.ndarray] = None,
               value_max: float = GRIDWORLD_VALUE_MAX) -> Dict[str, np.ndarray]:
  """The exact references for the data `data` from `world`.

  Args:
    data: the transitions the learner trained on (one dataset, arrays [N]).
    world: the gridworld the data came from (Q* is its value iteration).
    deltas: the sorted grid [K].
    alpha, upper_alpha: the bonus weights of Q_l and Q_u (upper_alpha None: alpha).
    counts: n(s) [S] of the learner's bonus (None: the state counts of `data`).
    value_max: the upper bound's cap and prior for unseen pairs.

  Returns:
    dict: 'q_star' [S, A], 'lower' and 'upper' [K, S, A] (tabular bounds), 'visited' [S, A]
    bool (pairs in `data`), 'counts' [S].
  """
  model = learners.empirical_model(data, world.num_states, world.num_actions)
  n_s = model.n_s.astype(np.float64) if counts is None else np.asarray(counts, np.float64)
  if n_s.shape != (world.num_states,):
    raise ValueError(f"counts must have shape [S] = ({world.num_states},), got {n_s.shape}")
  q_star, _ = vi.value_iteration(world.P, world.R, world.gamma)
  grid = learners.check_deltas(deltas)
  lower = learners.ccvl_bonus_q(model, world.gamma, alpha, grid, counts=n_s[:, None])
  upper = learners.ccvl_upper_bonus_q(model, world.gamma,
                                      alpha if upper_alpha is None else upper_alpha, grid,
                                      value_max, counts=n_s[:, None])
  return {"q_star": q_star, "lower": lower, "upper": upper, "visited": model.seen_sa,
          "counts": n_s}


def coverage_rows(q_lower: np.ndarray, q_upper: Optional[np.ndarray], refs: Dict[str, np.ndarray],
                  deltas: Sequence[float]) -> List[Dict[str, float]]:
  """One row per grid delta (keys in the module notes).

  Args:
    q_lower: the learner's Q_l [K, S, A] at `deltas`.
    q_upper: its Q_u [K, S, A], or None (a learner without an upper bound: upper keys omitted).
    refs: `references(...)` of the data it trained on.
    deltas: [K].
  """
  visited = np.asarray(refs["visited"], bool)                       # [S, A]
  if not visited.any():
    raise ValueError("no visited (s, a) pair to check the bounds on")
  states = visited.any(axis=1)                                      # [S]
  q_star = refs["q_star"]
  v_star = q_star.max(axis=1)                                       # [S]
  rows = []
  for k, delta in enumerate(np.asarray(deltas, np.float64)):
    row = {"delta": float(delta), "target": 1.0 - float(delta), "pairs": int(visited.sum())}
    for name, q, tab, holds in (
        ("lower", q_lower, refs["lower"], lambda x, y: x <= y),
        ("upper", q_upper, refs["upper"], lambda x, y: x >= y)):
      if q is None:
        continue
      qk = np.asarray(q[k], np.float64)                             # [S, A]
      row[f"{name}_holds"] = float(np.mean(holds(qk[visited], q_star[visited])))
      row[f"{name}_gap"] = float(np.mean(qk[visited] - q_star[visited]))
      row[f"{name}_minus_tabular"] = float(np.mean(qk[visited] - tab[k][visited]))
      row[f"tabular_{name}_holds"] = float(np.mean(holds(tab[k][visited], q_star[visited])))
      row[f"tabular_{name}_gap"] = float(np.mean(tab[k][visited] - q_star[visited]))
      row[f"v_{name}_holds"] = float(np.mean(holds(qk.max(axis=1)[states], v_star[states])))
    rows.append(row)
  return rows


def flat_metrics(rows: List[Dict[str, float]], prefix: str) -> Dict[str, float]:
  """'<prefix>/<key>@<delta>' -> value, for evals.json / TensorBoard."""
  out = {}
  for row in rows:
    for key, value in row.items():
      if key not in ("delta", "target"):
        out[f"{prefix}/{key}@{row['delta']:.4g}"] = float(value)
  return out


def coverage_met(rows: List[Dict[str, float]]) -> Dict[str, bool]:
  """{'lower': Q_l <= Q* at >= 1 - delta of the visited pairs at every grid delta,
  'upper': the same for Q_u >= Q*} (only the bounds present in `rows`)."""
  out = {}
  for name in ("lower", "upper"):
    if f"{name}_holds" in rows[0]:
      out[name] = all(r[f"{name}_holds"] >= r["target"] - 1e-12 for r in rows)
  return out


_COLUMNS = (("delta", "delta", "{:.4g}"), ("target", "1 - delta", "{:.3f}"),
            ("lower_holds", "Q_l <= Q*", "{:.3f}"), ("upper_holds", "Q_u >= Q*", "{:.3f}"),
            ("lower_gap", "mean Q_l - Q*", "{:+.3f}"), ("upper_gap", "mean Q_u - Q*", "{:+.3f}"),
            ("lower_minus_tabular", "mean Q_l - Q_l^tab", "{:+.3f}"),
            ("upper_minus_tabular", "mean Q_u - Q_u^tab", "{:+.3f}"),
            ("tabular_lower_holds", "Q_l^tab <= Q*", "{:.3f}"),
            ("tabular_upper_holds", "Q_u^tab >= Q*", "{:.3f}"),
            ("v_lower_holds", "V_l <= V*", "{:.3f}"), ("v_upper_holds", "V_u >= V*", "{:.3f}"))


def markdown_table(rows: List[Dict[str, float]], title: str) -> str:
  """The rows as a markdown table under `title` (columns of the bounds present)."""
  cols = [c for c in _COLUMNS if c[0] in rows[0]]
  lines = [f"### {title}", "", "| " + " | ".join(c[1] for c in cols) + " |",
           "|" + "---|" * len(cols)]
  for row in rows:
    lines.append("| " + " | ".join(fmt.format(row[key]) for key, _, fmt in cols) + " |")
  return "\n".join(lines) + "\n"


def plot(rows_by_phase: Dict[str, List[Dict[str, float]]], path: str) -> None:
  """Coverage (left) and mean gaps to Q* (right) against delta, one line style per phase."""
  matplotlib.use("Agg")
  fig, (ax_c, ax_g) = plt.subplots(1, 2, figsize=(10, 3.8))
  styles = ("o-", "s--", "^:")
  for (phase, rows), style in zip(rows_by_phase.items(), styles):
    d = [r["delta"] for r in rows]
    for name, color in (("lower", "tab:blue"), ("upper", "tab:red")):
      if f"{name}_holds" not in rows[0]:
        continue
      ax_c.plot(d, [r[f"{name}_holds"] for r in rows], style, color=color,
                label=f"{phase}: Q_{name[0]} {'<=' if name == 'lower' else '>='} Q*")
      ax_g.plot(d, [r[f"{name}_gap"] for r in rows], style, color=color,
                label=f"{phase}: Q_{name[0]} - Q*")
      ax_g.plot(d, [r[f"tabular_{name}_gap"] for r in rows], style, color=color, alpha=0.35,
                label=f"{phase}: tabular Q_{name[0]} - Q*")
  grid = np.linspace(0, 1, 51)
  ax_c.plot(grid, 1 - grid, "k:", lw=1, label="1 - delta")
  ax_c.set_xlabel("delta")
  ax_c.set_ylabel("share of visited (s, a)")
  ax_c.set_ylim(-0.02, 1.02)
  ax_c.set_title("Coverage of the bounds")
  ax_c.legend(fontsize=7, loc="lower left")
  ax_g.axhline(0.0, color="k", lw=0.5)
  ax_g.set_xlabel("delta")
  ax_g.set_ylabel("mean over visited (s, a)")
  ax_g.set_title("Gap to Q* (neural; faint: tabular)")
  ax_g.legend(fontsize=6, loc="best")
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def q_tables(agent, deltas: Sequence[float], num_states: int):
  """(Q_l [K, S, A], Q_u [K, S, A] or None) of a learner on one-hot states at `deltas`
  (agent.q_network; agent.upper_q_network when it has one)."""
  obs = tf.constant(np.eye(num_states, dtype=np.float32))                 # [S, S]
  d = tf.constant(np.tile(np.asarray(deltas, np.float32)[None], (num_states, 1)))  # [S, K]

  def table(net):
    q = net({"observation": obs, "delta": d}, training=False)             # [S, K, A]
    return np.transpose(np.asarray(q, np.float64), (1, 0, 2))            # -> [K, S, A]

  upper = getattr(agent, "upper_q_network", None)
  return table(agent.q_network), (None if upper is None else table(upper))
