"""Figures of the gridworld experiment (matplotlib, Agg backend)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ccvl_tf.tabular import value_iteration as vi  # noqa: E402
from ccvl_tf.tabular import evaluation as ev_lib

_COLORS = {"CQL": "tab:blue", "Fixed-CCVL": "tab:green", "CCVL": "tab:red",
           "CCVL-bonus": "tab:purple"}


_STYLES = {"": "-", "logsumexp": "-", "max": "--", "logsumexp+monotone": ":",
           "max+monotone": "-."}


def alpha_sweep(rows, alphas, path):
  """Fig. 1 left: normalized return against alpha, mean +- std over seeds; rows (method,
  reading, alpha, seed, score): colour by method, line style by reading."""
  fig, ax = plt.subplots(figsize=(6, 4.2))
  xs = sorted(alphas)
  for method in _COLORS:
    for reading in sorted({r[1] for r in rows if r[0] == method}):
      vals = [[r[4] for r in rows if r[0] == method and r[1] == reading and r[2] == a]
              for a in xs]
      if not all(vals):
        continue
      m = np.array([np.mean(v) for v in vals])
      s = np.array([np.std(v) for v in vals])
      label = f"{method} [{reading}]" if reading else method
      ax.plot(xs, m, "o" + _STYLES.get(reading, "-"), color=_COLORS[method], label=label,
              ms=3)
      if not reading or reading == "logsumexp":
        ax.fill_between(xs, m - s, m + s, color=_COLORS[method], alpha=0.1)
  ax.set_xscale("log")
  ax.set_xlabel(r"$\alpha$")
  ax.set_ylabel("normalized return (p = 0.15)")
  ax.set_ylim(-0.05, 1.1)
  ax.axhline(1.0, color="k", lw=0.5, ls=":")
  ax.legend(loc="lower left", fontsize=6, ncol=2)
  ax.set_title("Gridworld: return vs. alpha")
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def delta_adaptation(rows, alpha, path):
  """Fig. 1 right: the delta CCVL acts with in each evaluation episode, mean over seeds per
  reading; rows (reading, seed, episode, delta)."""
  fig, ax = plt.subplots(figsize=(5, 3.6))
  for i, reading in enumerate(sorted({r[0] for r in rows})):
    sel = [r for r in rows if r[0] == reading]
    seeds = sorted({r[1] for r in sel})
    episodes = sorted({r[2] for r in sel})
    d = np.array([[next(r[3] for r in sel if r[1] == s and r[2] == e) for e in episodes]
                  for s in seeds])
    ax.plot(episodes, d.mean(0), "o" + _STYLES.get(reading, "-"), color=f"C{i}",
            label=f"{reading} (mean of {len(seeds)} seeds)", ms=3)
  ax.set_xlabel("evaluation episode")
  ax.set_ylabel(r"$\delta$ acted with")
  ax.set_ylim(0, 1)
  ax.set_title(rf"CCVL adapting $\delta$ ($\alpha$ = {alpha:g})")
  ax.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def theorem2_coverage(rows, path):
  """Theorem 2 coverage per reading and alpha against 1 - delta; rows (reading, alpha, delta,
  coverage, n_datasets, target)."""
  fig, ax = plt.subplots(figsize=(5.5, 3.8))
  keys = sorted({(r[0], r[1]) for r in rows})
  for i, (reading, alpha) in enumerate(keys):
    sel = [r for r in rows if r[0] == reading and r[1] == alpha]
    ax.plot([r[2] for r in sel], [r[3] for r in sel], "o" + _STYLES.get(reading, "-"),
            color=f"C{i}", label=rf"{reading}, $\alpha$={alpha:g}", ms=3)
  d = sorted({r[2] for r in rows})
  ax.plot(d, [1 - x for x in d], "k--", label=r"target $1-\delta$")
  ax.set_xlabel(r"$\delta$")
  ax.set_ylabel(r"fraction of datasets with $\hat V \leq V^*$")
  ax.set_ylim(-0.05, 1.05)
  ax.legend(fontsize=6)
  ax.set_title(f"Theorem 2 coverage ({rows[0][4]} datasets)")
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def _draw_grid(ax, env):
  rows, cols = env.shape
  img = np.ones((rows, cols, 3))
  for r in range(rows):
    for c in range(cols):
      ch = env.layout[r][c]
      img[r, c] = {"#": (0.3, 0.3, 0.3), "L": (0.95, 0.45, 0.1), "S": (0.75, 0.85, 1.0),
                   "G": (0.6, 0.95, 0.6)}.get(ch, (1, 1, 1))
  ax.imshow(img, interpolation="nearest")
  for r in range(rows):
    for c in range(cols):
      if env.layout[r][c] in "SG":
        ax.text(c, r, env.layout[r][c], ha="center", va="center", fontsize=10, weight="bold")
  ax.set_xticks(np.arange(-0.5, cols, 1), minor=True)
  ax.set_yticks(np.arange(-0.5, rows, 1), minor=True)
  ax.grid(which="minor", color="k", lw=0.3)
  ax.set_xticks([])
  ax.set_yticks([])


def _draw_route(ax, env, policy, color):
  path = env.route_cells(policy)
  rc = np.array([env.cell(s) for s in path])
  ax.plot(rc[:, 1], rc[:, 0], "-", color=color, lw=3, alpha=0.9)


def _draw_visits(ax, env, episodes, color):
  counts = np.zeros(env.num_states)
  for e in episodes:
    np.add.at(counts, e.states, 1)
  for s in np.nonzero(counts)[0]:
    r, c = env.cell(s)
    ax.add_patch(plt.Circle((c, r), 0.12 + 0.25 * counts[s] / counts.max(), color=color,
                            alpha=0.35))


def trajectories(env, detail, grid, alpha, path):
  """Fig. 2: optimal (p = 0.15), CQL and CCVL routes on the grid. Lines: the no-slip path of the
  greedy policy; dots: states visited in the sampled evaluation episodes (size ~ visits)."""
  rng = np.random.default_rng(0)
  q_opt, _ = vi.value_iteration(env.P, env.R, env.gamma)
  pol_cql = vi.greedy_policy(detail["q_cql"])
  k_last = detail["episodes"][-1].delta_index
  panels = [
      ("optimal (p = 0.15)", vi.greedy_policy(q_opt), None, "k"),
      (rf"CQL ($\alpha$ = {alpha:g})", pol_cql, None, "tab:blue"),
      (rf"CCVL [{detail['reading']}] ($\alpha$ = {alpha:g}), last $\delta$ = {grid[k_last]:.2f}",
       vi.greedy_policy(detail["q_ccvl"][k_last]), detail["episodes"], "tab:red"),
  ]
  fig, axes = plt.subplots(1, 3, figsize=(11, 4))
  for ax, (title, pol, episodes, color) in zip(axes, panels):
    _draw_grid(ax, env)
    if episodes is None:
      episodes = [ev_lib.Episode(*ev_lib.run_episode(env, pol, rng), -1) for _ in range(10)]
    _draw_visits(ax, env, episodes, color)
    _draw_route(ax, env, pol, color)
    ax.set_title(title, fontsize=9)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def coverage(rows, path):
  """Theorem 1 coverage against the 1 - delta target."""
  fig, ax = plt.subplots(figsize=(5, 3.6))
  for kind, color, label in (("theorem1", "tab:red", "theorem alpha (per delta)"),
                             ("fixed", "tab:blue", None)):
    sel = [r for r in rows if r[4] == kind]
    if not sel:
      continue
    ax.plot([r[0] for r in sel], [r[1] for r in sel], "o-", color=color,
            label=label or rf"$\alpha$ = {sel[0][3]:g}")
  d = sorted({r[0] for r in rows})
  ax.plot(d, [1 - x for x in d], "k--", label=r"target $1-\delta$")
  ax.set_xlabel(r"$\delta$")
  ax.set_ylabel(r"fraction of datasets with $\hat Q \leq Q^*$")
  ax.set_ylim(-0.05, 1.05)
  ax.legend(fontsize=8)
  ax.set_title(f"Theorem 1 coverage ({rows[0][2]} datasets)")
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)
