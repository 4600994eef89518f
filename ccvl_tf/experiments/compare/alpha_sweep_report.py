"""The alpha sweep's report (alpha_sweep.py): rows.csv, table.md, alpha_sweep.png.

From the result files of every part of a sweep (OUT/alpha_<a>/results, OUT/bc/results):
  rows.csv        one row per run: method, alpha (empty for BC), game, dataset, seed, score,
                  normalized_score, training steps and seconds, the adaptive policy's mean
                  delta over the run's episodes (CCVL), the delta Fixed-CCVL selects on
                  held-out Bellman errors (in the rows of both: one learner), and CCVL's
                  diagnostics (DIAGNOSTIC_COLUMNS: the delta family as greedy policies,
                  ccvl_tf.evaluation.policy_diagnostics, and the value-level confidence diagnostics,
                  experiments/offline/confidence_report.py);
  table.md        per dataset kind: (1) normalized IQM [95% CI] over seeds x games of each
                  method at each alpha (rliable via
                  ccvl_tf.evaluation.score_stats.aggregate_scores), BC as one alpha-free row; (2)
                  flatness over alpha per method (`flatness`); (3) CCVL's family diagnostics vs
                  alpha, mean over runs;
  alpha_sweep.png per dataset kind: normalized IQM vs alpha (log axis) with 95% CI bands for
                  CQL, CCVL, Fixed-CCVL and BC as a horizontal band; below, CCVL's
                  family_differs_any (and _ends) vs alpha.
"""
from __future__ import annotations

import csv
import math
import os
import re
from typing import Dict, List, Optional, Sequence, Tuple

import matplotlib
import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np

from ccvl_tf.experiments.compare import config as compare_config
from ccvl_tf.experiments.compare import report as compare_report
from ccvl_tf.evaluation import reporting
from ccvl_tf.evaluation import score_stats

# The sweep's layout (alpha_sweep.py runs it): the alpha-dependent methods (run at
# every alpha) and the alpha-free reference (run once), and the part directories.
ALPHA_METHODS = ("CQL", "CCVL", "Fixed-CCVL")
ALPHA_FREE_METHODS = ("BC",)
SWEEP_METHODS = ALPHA_METHODS + ALPHA_FREE_METHODS
BC_DIR = "bc"
ALPHA_DIR_PREFIX = "alpha_"


def alpha_dir_name(alpha: float) -> str:
  """The part directory of one alpha: 0.03 -> 'alpha_0.03', 1.0 -> 'alpha_1'."""
  return f"{ALPHA_DIR_PREFIX}{float(alpha):g}"

# CCVL's diagnostics in rows.csv (keys of a CCVL result's `diagnostics`; empty where a run has
# none: CQL, Fixed-CCVL and BC results carry no diagnostics).
FAMILY_KEYS = ("family_differs_ends", "family_differs_any", "family_agreement_lo",
               "family_agreement_hi", "family_greedy_mode_share_lo",
               "family_greedy_mode_share_hi", "family_cql_gap_lo", "family_cql_gap_hi")
DIAGNOSTIC_COLUMNS = FAMILY_KEYS + (
    "greedy_mode_share", "behaviour_agreement", "behaviour_mode_share", "family_spread",
    "lemma1_fraction", "count_auc_random_policy", "count_auc_shuffled_pixels",
    "belief_max_shift", "belief_final_entropy")
ROW_COLUMNS = ("method", "alpha", "game", "dataset", "seed", "score", "normalized_score",
               "train_steps", "train_seconds", "mean_delta", "fixed_delta") + DIAGNOSTIC_COLUMNS
# The family table of table.md: (diagnostics key, column label).
FAMILY_TABLE = (("family_differs_ends", "differs ends"), ("family_differs_any", "differs any"),
                ("family_agreement_lo", "agreement lo"), ("family_agreement_hi", "agreement hi"),
                ("family_greedy_mode_share_lo", "mode share lo"),
                ("family_greedy_mode_share_hi", "mode share hi"),
                ("family_cql_gap_lo", "CQL gap lo"), ("family_cql_gap_hi", "CQL gap hi"))
_ALPHA_DIR = re.compile(re.escape(ALPHA_DIR_PREFIX) + r"(.+)$")


# ------------------------------------------------------------------------------ rows
def part_dirs(output_dir: str, alphas: Optional[Sequence[float]] = None
              ) -> List[Tuple[Optional[float], str]]:
  """(alpha or None, directory) of the sweep's parts under output_dir that exist: OUT/bc, then
  OUT/alpha_<a> for each of `alphas` (None: every alpha_<number> directory), by alpha."""
  out: List[Tuple[Optional[float], str]] = []
  bc = os.path.join(output_dir, BC_DIR)
  if os.path.isdir(bc):
    out.append((None, bc))
  if alphas is not None:
    found = [(float(a), alpha_dir_name(a)) for a in alphas]
  else:
    found = []
    for name in (os.listdir(output_dir) if os.path.isdir(output_dir) else []):
      m = _ALPHA_DIR.match(name)
      try:
        a = float(m.group(1)) if m else None
      except ValueError:
        a = None
      if a is not None:
        found.append((a, name))
  for a, name in sorted(found):
    path = os.path.join(output_dir, name)
    if os.path.isdir(path):
      out.append((a, path))
  return out


def read_rows(output_dir: str, alphas: Optional[Sequence[float]] = None) -> List[dict]:
  """Every result row of the sweep (compare_report.read_results of each part), with 'alpha'
  (None for the alpha-free part)."""
  rows = []
  for alpha, path in part_dirs(output_dir, alphas):
    rows += [dict(r, alpha=alpha) for r in compare_report.read_results(path)]
  return rows


def _run_mean_delta(row: dict) -> Optional[float]:
  """The mean over a run's episodes of the delta acted under (None if no episode has one)."""
  vals = [d for d in row.get("mean_delta") or [] if d is not None]
  return float(np.mean(vals)) if vals else None


def csv_row(row: dict) -> dict:
  """One rows.csv row (ROW_COLUMNS) of a result row; '' where a value does not apply."""
  diag = row.get("diagnostics") if isinstance(row.get("diagnostics"), dict) else {}
  g = lambda x: "" if x is None else f"{x:.6g}"  # noqa: E731
  out = {"method": row["method"], "alpha": "" if row["alpha"] is None else f"{row['alpha']:g}",
         "game": row["game"], "dataset": row["dataset"], "seed": row["seed"],
         "score": g(row["score"]), "normalized_score": g(row["normalized_score"]),
         "train_steps": row.get("train_steps", ""), "train_seconds": row.get("train_seconds", ""),
         "mean_delta": g(_run_mean_delta(row)) if row["method"] == "CCVL" else "",
         "fixed_delta": g(row.get("fixed_delta"))}
  out.update({k: g(diag.get(k)) for k in DIAGNOSTIC_COLUMNS})
  return out


def _sort_key(row: dict):
  methods = list(SWEEP_METHODS)
  kinds = list(compare_config.DATASET_KINDS)
  return (methods.index(row["method"]) if row["method"] in methods else len(methods),
          row["method"], -1.0 if row["alpha"] is None else row["alpha"],
          kinds.index(row["dataset"]) if row["dataset"] in kinds else len(kinds),
          row["dataset"], row["game"], row["seed"])


def write_rows_csv(path: str, rows: Sequence[dict]) -> None:
  with open(path, "w", newline="") as f:
    w = csv.DictWriter(f, ROW_COLUMNS)
    w.writeheader()
    for r in sorted(rows, key=_sort_key):
      w.writerow(csv_row(r))


def read_rows_csv(path: str) -> List[dict]:
  """rows.csv (write_rows_csv) back as result rows for the tables: alpha float (None for the
  alpha-free part), seed int, score and normalized_score float, and for the rows that have
  them the diagnostics (DIAGNOSTIC_COLUMNS) as a 'diagnostics' dict; so table.md's numbers
  recompute from the committed rows."""
  out = []
  with open(path, newline="") as f:
    for r in csv.DictReader(f):
      diag = {k: float(r[k]) for k in DIAGNOSTIC_COLUMNS if r.get(k, "") != ""}
      row = dict(method=r["method"], alpha=float(r["alpha"]) if r["alpha"] != "" else None,
                 game=r["game"], dataset=r["dataset"], seed=int(r["seed"]),
                 score=float(r["score"]), normalized_score=float(r["normalized_score"]))
      if diag:
        row["diagnostics"] = diag
      out.append(row)
  return out


# ------------------------------------------------------------------------------ aggregates
def _select(rows, method, dataset, alpha):
  return [r for r in rows if r["method"] == method and r["dataset"] == dataset
          and r["alpha"] == alpha]


def score_matrix(rows: Sequence[dict], method: str, dataset: str, alpha: Optional[float]
                 ) -> Optional[np.ndarray]:
  """Normalized scores [seeds, games] of one method / dataset kind / alpha (None: BC's part);
  only seeds present for every game (as compare_report.aggregate); None if there are none."""
  sel = _select(rows, method, dataset, alpha)
  if not sel:
    return None
  games = sorted({r["game"] for r in sel})
  seeds = sorted(set.intersection(*[{r["seed"] for r in sel if r["game"] == g} for g in games]))
  if not seeds:
    return None
  table = {(r["game"], r["seed"]): r["normalized_score"] for r in sel}
  return np.array([[table[(g, s)] for g in games] for s in seeds], np.float64)


def iqm_cells(rows: Sequence[dict], reps: int = 2000
              ) -> Dict[Tuple[str, str, Optional[float]], score_stats.Aggregate]:
  """(method, dataset, alpha) -> the normalized IQM with its 95% stratified bootstrap CI
  (score_stats.aggregate_scores, seed 0) over that cell's score matrix."""
  out = {}
  for key in sorted({(r["method"], r["dataset"], r["alpha"]) for r in rows},
                    key=lambda k: (k[0], k[1], -1.0 if k[2] is None else k[2])):
    m = score_matrix(rows, *key)
    if m is not None:
      out[key] = score_stats.aggregate_scores(m, reps=reps, seed=0)["iqm"]
  return out


def flatness(rows: Sequence[dict], method: str, dataset: str,
             alphas: Optional[Sequence[float]] = None, reps: int = 2000, seed: int = 0,
             confidence: float = 0.95) -> Optional[Dict[str, object]]:
  """How flat a method's normalized IQM is over alpha (the paper's Fig. 1 claim, as numbers).

  Over the alphas at which the method has results (`alphas`: only those), on the (game, seed)
  runs present at every one of them, with IQM_k the IQM (rliable's aggregate_iqm) of the
  normalized scores at alpha_k:
    range = max_k IQM_k - min_k IQM_k (normalized points; 0 = flat);
    ratio = min_k IQM_k / max_k IQM_k (1 = flat; nan when max_k IQM_k <= 0: no alpha beats
      random, the ratio says nothing).
  CIs: paired stratified bootstrap, `reps` replications: the seeds of each game are resampled
  with replacement, the same resampled seeds at every alpha (seed k has the same data, batch
  order and initial weights at every alpha, so the runs are paired); percentile interval.
  The ratio's CI is (nan, nan) when a replication has max_k IQM_k <= 0.

  Returns None when fewer than two alphas have results or they share no (game, seed), else
  dict(alphas, iqm [per alpha], best_alpha, worst_alpha, range, range_ci, ratio, ratio_ci,
  num_seeds, num_games).
  """
  have = sorted({r["alpha"] for r in rows if r["method"] == method and r["dataset"] == dataset
                 and r["alpha"] is not None})
  if alphas is not None:
    have = [a for a in have if a in set(float(x) for x in alphas)]
  sel = [r for r in rows if r["method"] == method and r["dataset"] == dataset
         and r["alpha"] in have]
  if len(have) < 2:
    return None
  # The (game, seed) runs present at every alpha: games with runs at every alpha, and the
  # seeds every such game has at every alpha.
  games = sorted(set.intersection(*[{r["game"] for r in sel if r["alpha"] == a}
                                    for a in have]))
  if not games:
    return None
  seeds = sorted(set.intersection(*[{r["seed"] for r in sel if r["game"] == g
                                     and r["alpha"] == a} for g in games for a in have]))
  if not seeds:
    return None
  table = {(r["alpha"], r["game"], r["seed"]): r["normalized_score"] for r in sel}
  cube = np.array([[[table[(a, g, s)] for g in games] for s in seeds] for a in have])  # [K,S,G]

  def stats(c):
    iqms = np.array([score_stats.iqm(c[k]) for k in range(c.shape[0])])
    best = iqms.max()
    return iqms, best - iqms.min(), (iqms.min() / best if best > 0 else math.nan)

  iqms, rng_point, ratio_point = stats(cube)
  gen = np.random.default_rng(seed)
  n_s, n_g = len(seeds), len(games)
  ranges, ratios = np.empty(reps), np.empty(reps)
  for b in range(reps):
    idx = gen.integers(0, n_s, size=(n_s, n_g))          # resampled seed per (row, game)
    resampled = np.take_along_axis(cube, idx[np.newaxis], axis=1)  # [K, S, G], paired over K
    _, ranges[b], ratios[b] = stats(resampled)
  q = [100 * (1 - confidence) / 2, 100 * (1 + confidence) / 2]
  range_ci = tuple(float(v) for v in np.percentile(ranges, q))
  ratio_ci = ((math.nan, math.nan) if np.any(np.isnan(ratios))
              else tuple(float(v) for v in np.percentile(ratios, q)))
  return {"alphas": [float(a) for a in have], "iqm": [float(v) for v in iqms],
          "best_alpha": float(have[int(np.argmax(iqms))]),
          "worst_alpha": float(have[int(np.argmin(iqms))]),
          "range": float(rng_point), "range_ci": range_ci,
          "ratio": float(ratio_point), "ratio_ci": ratio_ci,
          "num_seeds": n_s, "num_games": n_g}


def family_means(rows: Sequence[dict], dataset: str
                 ) -> List[Tuple[float, int, Dict[str, float]]]:
  """(alpha, runs, {key: mean over runs}) of CCVL's family diagnostics (FAMILY_TABLE keys) on
  one dataset kind, by alpha; a key no run has is nan."""
  out = []
  ccvl = [r for r in rows if r["method"] == "CCVL" and r["dataset"] == dataset
          and r["alpha"] is not None and isinstance(r.get("diagnostics"), dict)]
  for a in sorted({r["alpha"] for r in ccvl}):
    diags = [r["diagnostics"] for r in ccvl if r["alpha"] == a]
    means = {}
    for key, _ in FAMILY_TABLE:
      v = [d[key] for d in diags if key in d]
      means[key] = float(np.mean(v)) if v else math.nan
    out.append((a, len(diags), means))
  return out


# ------------------------------------------------------------------------------ table.md
def _cell(a: Optional[score_stats.Aggregate]) -> str:
  return "-" if a is None else f"{a.value:.1f} [{a.ci_low:.1f}, {a.ci_high:.1f}]"


def _num(x: float, spec: str) -> str:
  return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def _methods(rows):
  return reporting.ordered([r["method"] for r in rows], SWEEP_METHODS)


def _datasets(rows):
  return reporting.ordered([r["dataset"] for r in rows], compare_config.DATASET_KINDS)


def _alphas(rows):
  return sorted({r["alpha"] for r in rows if r["alpha"] is not None})


def iqm_table_lines(rows: Sequence[dict], dataset: str, cells) -> List[str]:
  """Method x alpha: normalized IQM [95% CI]; the alpha-free methods (BC) in an 'alpha-free'
  column, '-' elsewhere."""
  alphas = _alphas(rows)
  lines = ["| Method | " + " | ".join(f"α = {a:g}" for a in alphas) + " | alpha-free |",
           "| --- |" + " --- |" * (len(alphas) + 1)]
  for m in _methods([r for r in rows if r["dataset"] == dataset]):
    free = m in ALPHA_FREE_METHODS
    name = f"{m} (alpha-free)" if free else m
    per_alpha = ["-" if free else _cell(cells.get((m, dataset, a))) for a in alphas]
    lines.append(f"| {name} | " + " | ".join(per_alpha)
                 + f" | {_cell(cells.get((m, dataset, None))) if free else '-'} |")
  return lines


def flatness_lines(rows: Sequence[dict], dataset: str, reps: int) -> List[str]:
  lines = ["| Method | alphas | seeds x games | best α: IQM | worst α: IQM | "
           "range (max - min) [95% CI] | worst / best [95% CI] |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
  for m in _methods([r for r in rows if r["dataset"] == dataset]):
    if m in ALPHA_FREE_METHODS:
      continue
    f = flatness(rows, m, dataset, reps=reps)
    if f is None:
      lines.append(f"| {m} | no runs common to two or more alphas | - | - | - | - | - |")
      continue
    iqm_of = dict(zip(f["alphas"], f["iqm"]))
    lines.append(
        f"| {m} | {len(f['alphas'])} | {f['num_seeds']} x {f['num_games']} | "
        f"{f['best_alpha']:g}: {iqm_of[f['best_alpha']]:.1f} | "
        f"{f['worst_alpha']:g}: {iqm_of[f['worst_alpha']]:.1f} | "
        f"{f['range']:.1f} [{f['range_ci'][0]:.1f}, {f['range_ci'][1]:.1f}] | "
        f"{_num(f['ratio'], '.2f')} [{_num(f['ratio_ci'][0], '.2f')}, "
        f"{_num(f['ratio_ci'][1], '.2f')}] |")
  return lines


def family_lines(rows: Sequence[dict], dataset: str) -> List[str]:
  lines = ["| α | runs | " + " | ".join(label for _, label in FAMILY_TABLE) + " |",
           "| --- | --- |" + " --- |" * len(FAMILY_TABLE)]
  for a, n, means in family_means(rows, dataset):
    lines.append(f"| {a:g} | {n} | "
                 + " | ".join(_num(means[k], ".3g") for k, _ in FAMILY_TABLE) + " |")
  return lines


def render_table(rows: Sequence[dict], suite: str, reps: int = 2000) -> str:
  """table.md (see the module docstring)."""
  games = sorted({r["game"] for r in rows})
  seeds = sorted({r["seed"] for r in rows})
  lines = [f"# Alpha sweep, suite `{suite}` (the neural Fig. 1, left)", "",
           "Normalized score vs the regularizer weight alpha: IQM over seeds x games with 95% "
           f"stratified bootstrap CIs (rliable, {reps} reps) per method and alpha; BC has no "
           "alpha (trained once per game and seed: the reference line). "
           f"Games: {', '.join(games)}; seeds: {', '.join(str(s) for s in seeds)}."]
  cells = iqm_cells(rows, reps)
  for dataset in _datasets(rows):
    lines += ["", f"## {dataset}", "", "### Normalized IQM [95% CI]", ""]
    lines += iqm_table_lines(rows, dataset, cells)
    lines += ["", "### Flatness over alpha", "",
              "range: the IQM at the best alpha minus the IQM at the worst (normalized points; "
              "0 = flat). worst / best: their ratio (1 = flat; n/a when no alpha's IQM is "
              "> 0). CIs: paired stratified bootstrap (the seeds of each game resampled, the "
              "same resampled seeds at every alpha: seed k is the same data, batch order and "
              f"initial weights at every alpha), {reps} reps, percentile; over the runs present at "
              "every alpha.", ""]
    lines += flatness_lines(rows, dataset, reps)
    fam = family_lines(rows, dataset)
    if len(fam) > 2:
      lines += ["", "### CCVL's delta family as greedy policies vs alpha (mean over runs)", "",
                "On held-out dataset states (ccvl_tf.evaluation.policy_diagnostics): share of "
                "states whose greedy action differs between the grid's smallest and largest delta "
                "(differs ends) and anywhere along the grid (differs any); at the smallest "
                "(lo) and largest (hi) grid delta, the share of states where the greedy action "
                "is the data's action (agreement), the largest share of one greedy action "
                "(mode share; 1 = one action everywhere) and the CQL gap logsumexp_a Q - "
                "Q(s, a_D) (log A: no preference).", ""]
      lines += fam
  return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ the figure
def plot(path: str, rows: Sequence[dict], reps: int = 2000) -> None:
  """alpha_sweep.png: per dataset kind, normalized IQM vs alpha (log x) with 95% CI bands, BC
  as a horizontal band; below, CCVL's family_differs_any (solid) and _ends (dashed) vs alpha,
  mean over runs with the runs as dots."""
  matplotlib.use("Agg")
  cells = iqm_cells(rows, reps)
  datasets = _datasets(rows)
  fig, axes = plt.subplots(2, len(datasets), figsize=(4.5 * len(datasets), 7), squeeze=False,
                           sharex=True, gridspec_kw={"height_ratios": [2, 1]})
  # Distinct markers and line styles: equal IQMs (e.g. CCVL and Fixed-CCVL) stay visible.
  styles = {"CQL": ("C3", "o-"), "CCVL": ("C0", "s-"), "Fixed-CCVL": ("C2", "^--")}
  for j, dataset in enumerate(datasets):
    ax, ax2 = axes[0][j], axes[1][j]
    for m in _methods(rows):
      if m in ALPHA_FREE_METHODS:
        a = cells.get((m, dataset, None))
        if a is not None:
          ax.axhspan(a.ci_low, a.ci_high, color="0.5", alpha=0.2, lw=0)
          ax.axhline(a.value, color="0.35", ls="--", label=f"{m} (alpha-free)")
        continue
      pts = [(al, cells[(m, dataset, al)]) for al in _alphas(rows) if (m, dataset, al) in cells]
      if not pts:
        continue
      xs = [p[0] for p in pts]
      c, fmt = styles.get(m, (None, "o-"))
      ax.fill_between(xs, [p[1].ci_low for p in pts], [p[1].ci_high for p in pts], color=c,
                      alpha=0.2, lw=0)
      ax.plot(xs, [p[1].value for p in pts], fmt, color=c, label=m, mfc="none", ms=8)
    ax.set_xscale("log")
    ax.set_title(dataset)
    ax.set_ylabel("normalized IQM (95% CI)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fam = family_means(rows, dataset)
    if fam:
      ax2.plot([f[0] for f in fam], [f[2]["family_differs_any"] for f in fam], "o-",
               color="C0", label="differs any")
      ax2.plot([f[0] for f in fam], [f[2]["family_differs_ends"] for f in fam], "s--",
               color="C0", alpha=0.6, label="differs ends")
      runs = [(r["alpha"], r["diagnostics"]["family_differs_any"]) for r in rows
              if r["method"] == "CCVL" and r["dataset"] == dataset and r["alpha"] is not None
              and isinstance(r.get("diagnostics"), dict)
              and "family_differs_any" in r["diagnostics"]]
      if runs:
        ax2.plot([x for x, _ in runs], [y for _, y in runs], ".", color="C0", alpha=0.35)
      ax2.legend(fontsize="small")
    ax2.set_xscale("log")
    if _alphas(rows):  # the grid's alphas as the ticks (shared with the panel above)
      ax2.set_xticks(_alphas(rows), [f"{a:g}" for a in _alphas(rows)])
      ax2.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax2.set_ylim(-0.03, 1.03)
    ax2.set_xlabel("alpha")
    ax2.set_ylabel("CCVL: share of states whose\ngreedy action changes with delta")
    ax2.grid(alpha=0.3)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


def write_outputs(output_dir: str, suite: str, reps: int = 2000,
                  alphas: Optional[Sequence[float]] = None) -> Dict[str, str]:
  """rows.csv, table.md and alpha_sweep.png from the result files of the sweep's parts
  (`alphas`: only those alpha parts; None: every alpha_<a> directory)."""
  rows = read_rows(output_dir, alphas)
  if not rows:
    raise ValueError(f"no results under {output_dir}/{BC_DIR} or "
                     f"{output_dir}/{ALPHA_DIR_PREFIX}*/results")
  paths = {"rows": os.path.join(output_dir, "rows.csv"),
           "table": os.path.join(output_dir, "table.md"),
           "plot": os.path.join(output_dir, "alpha_sweep.png")}
  write_rows_csv(paths["rows"], rows)
  with open(paths["table"], "w") as f:
    f.write(render_table(rows, suite, reps))
  plot(paths["plot"], rows, reps)
  return paths
