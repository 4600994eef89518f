"""The comparison's outputs, from all result files: scores.csv, table.md, per-game tables,
iqm.png, confidence.md and confidence_rows.csv (`write_outputs`; runner.py's docstring lists
the files). `read_scores_csv` and `read_confidence_csv` read the two CSVs back, so the tables
recompute from committed rows.
"""
from __future__ import annotations

import csv
import json
import os
from typing import Dict, List, Optional, Sequence, Tuple

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from ccvl_tf.experiments.compare import config as compare_config
from ccvl_tf.evaluation import reporting
from ccvl_tf.evaluation import score_stats


def read_results(output_dir: str) -> List[dict]:
  """All result rows under output_dir/results."""
  rows = []
  base = os.path.join(output_dir, "results")
  for dirpath, _, files in os.walk(base):
    for f in sorted(files):
      if f.endswith(".json"):
        with open(os.path.join(dirpath, f)) as fh:
          rows.append(json.load(fh))
  return rows


def write_scores_csv(path: str, rows: Sequence[dict]) -> None:
  with open(path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(compare_config.SCORE_COLUMNS)
    for r in sorted(rows, key=lambda r: (r["method"], r["dataset"], r["game"], r["seed"])):
      w.writerow([r["method"], r["dataset"], r["game"], r["seed"], f"{r['score']:.6g}",
                  f"{r['normalized_score']:.6g}", r["train_steps"], r["train_seconds"],
                  r["eval_seconds"], r.get("tf_threads", ""), r.get("deterministic", "")])


def read_scores_csv(path: str) -> List[dict]:
  """scores.csv (write_scores_csv) back as result rows: seed int, score and normalized_score
  float, the rest as written; what aggregate(), per_game_table() and adaptive_vs_fixed_lines()
  need to recompute the tables from the committed rows."""
  with open(path, newline="") as f:
    return [dict(r, seed=int(r["seed"]), score=float(r["score"]),
                 normalized_score=float(r["normalized_score"])) for r in csv.DictReader(f)]


# confidence_rows.csv: one row per run that has confidence diagnostics (the CCVL runs), the
# rows behind confidence.md: the run's keys, its normalized score, then every numeric
# diagnostic (sorted by name).
CONFIDENCE_ROW_KEYS = ("method", "dataset", "game", "seed", "normalized_score")


def _numeric(value) -> bool:
  return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def write_confidence_csv(path: str, rows: Sequence[dict]) -> int:
  """Writes confidence_rows.csv for the rows with a 'diagnostics' dict; returns how many."""
  diag_rows = sorted((r for r in rows if isinstance(r.get("diagnostics"), dict)),
                     key=lambda r: (r["method"], r["dataset"], r["game"], r["seed"]))
  keys = sorted({k for r in diag_rows for k, v in r["diagnostics"].items() if _numeric(v)})
  with open(path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(list(CONFIDENCE_ROW_KEYS) + keys)
    for r in diag_rows:
      d = r["diagnostics"]
      w.writerow([r[k] for k in CONFIDENCE_ROW_KEYS]
                 + [repr(float(d[k])) if k in d and _numeric(d[k]) else "" for k in keys])
  return len(diag_rows)


def read_confidence_csv(path: str) -> List[dict]:
  """confidence_rows.csv back as rows with a 'diagnostics' dict (the numeric values)."""
  out = []
  with open(path, newline="") as f:
    for r in csv.DictReader(f):
      diag = {k: float(v) for k, v in r.items() if k not in CONFIDENCE_ROW_KEYS and v != ""}
      out.append(dict(method=r["method"], dataset=r["dataset"], game=r["game"],
                      seed=int(r["seed"]), normalized_score=float(r["normalized_score"]),
                      diagnostics=diag))
  return out


def merge_confidence_rows(score_rows: Sequence[dict], confidence_rows: Sequence[dict]
                          ) -> List[dict]:
  """The score rows with each run's diagnostics from confidence_rows attached: the input of
  confidence_table, from the two committed CSVs."""
  diag = {(r["method"], r["dataset"], r["game"], r["seed"]): r["diagnostics"]
          for r in confidence_rows}
  return [dict(r, diagnostics=diag[k]) if (k := (r["method"], r["dataset"], r["game"],
                                                  r["seed"])) in diag else dict(r)
          for r in score_rows]


_ordered = reporting.ordered


def _games_and_common_seeds(game_seed_pairs) -> Tuple[List[str], List[int]]:
  """(sorted games, sorted seeds present for every game) of (game, seed) pairs: the rows and
  columns of a complete [seeds, games] score matrix."""
  pairs = list(game_seed_pairs)
  games = sorted({g for g, _ in pairs})
  seeds = sorted(set.intersection(*[{s for g2, s in pairs if g2 == g} for g in games])) \
      if games else []
  return games, seeds


def aggregate(rows: Sequence[dict], reps: int = 2000) -> Dict[tuple, object]:
  """(method, dataset) -> score_stats.Aggregate of the normalized IQM over seeds x games.

  The score matrix is [seeds, games] of normalized scores (rliable's stratified bootstrap
  resamples seeds within each game). Only seeds present for every game are used.
  """
  out = {}
  for method in _ordered([r["method"] for r in rows], list(compare_config.METHODS)):
    for dataset in _ordered([r["dataset"] for r in rows], compare_config.DATASET_KINDS):
      sel = [r for r in rows if r["method"] == method and r["dataset"] == dataset]
      if not sel:
        continue
      games, seeds = _games_and_common_seeds((r["game"], r["seed"]) for r in sel)
      if not seeds:
        continue
      table = {(r["game"], r["seed"]): r["normalized_score"] for r in sel}
      matrix = np.array([[table[(g, s)] for g in games] for s in seeds])  # [seeds, games]
      out[(method, dataset)] = score_stats.aggregate_scores(matrix, reps=reps, seed=0)["iqm"]
  return out


# Suites whose raw scores are small numbers (a discounted return < 1, MinAtar points): their
# per-game tables show normalized scores; Atari's show raw game scores as the paper's Tables 3-5.
PER_GAME_NORMALIZED = {"gridworld": True, "minatar": True, "atari": False}


def per_game_table(rows: Sequence[dict], dataset: str, suite: str) -> str:
  """Game x method, mean ± std over seeds (reporting.render_per_game_table) of the raw score,
  or of the normalized score for the suites in PER_GAME_NORMALIZED."""
  methods = _ordered([r["method"] for r in rows if r["dataset"] == dataset],
                     list(compare_config.METHODS))
  if PER_GAME_NORMALIZED.get(suite, False):
    rows = [dict(r, score=r["normalized_score"]) for r in rows]
  return reporting.render_per_game_table(rows, dataset, methods)


def per_game_title(dataset: str, suite: str) -> str:
  what = "normalized score" if PER_GAME_NORMALIZED.get(suite, False) else "raw score"
  return f"Per game, {dataset} ({what}, mean ± std over seeds)"


def render_table(rows: Sequence[dict], suite: str, reps: int = 2000,
                 wall_seconds: Optional[float] = None) -> str:
  """table.md: Table 2 (dataset x method, normalized IQM (95% CI)), then per-game tables."""
  methods = _ordered([r["method"] for r in rows], list(compare_config.METHODS))
  datasets = _ordered([r["dataset"] for r in rows], compare_config.DATASET_KINDS)
  agg = aggregate(rows, reps)
  games = sorted({r["game"] for r in rows})
  seeds = sorted({r["seed"] for r in rows})
  lines = [f"# Method comparison, suite `{suite}`", "",
           "Normalized IQM over seeds x games with 95% stratified bootstrap CIs "
           f"(rliable, {reps} reps); best per row in bold. Games: {', '.join(games)}; "
           f"seeds: {', '.join(str(s) for s in seeds)}.", "",
           ] + reporting.iqm_table_lines(datasets, methods, agg)
  if wall_seconds is not None:
    lines += ["", f"Wall time of the last `compare.py` invocation: {wall_seconds:.0f} s."]
  for dataset in datasets:
    lines += ["", f"## {per_game_title(dataset, suite)}", "",
              per_game_table(rows, dataset, suite).rstrip()]
  return "\n".join(lines) + "\n"


def plot_iqm(path: str, rows: Sequence[dict], reps: int = 2000) -> None:
  """iqm.png: one panel per dataset kind, IQM point and 95% CI bar per method."""
  matplotlib.use("Agg")
  agg = aggregate(rows, reps)
  methods = _ordered([r["method"] for r in rows], list(compare_config.METHODS))
  datasets = _ordered([r["dataset"] for r in rows], compare_config.DATASET_KINDS)
  fig, axes = plt.subplots(1, len(datasets), figsize=(3.2 * len(datasets), 0.5 * len(methods)
                                                      + 1.2), squeeze=False, sharey=True)
  for ax, dataset in zip(axes[0], datasets):
    for i, m in enumerate(methods):
      if (m, dataset) not in agg:
        continue
      a = agg[(m, dataset)]
      ax.plot([a.ci_low, a.ci_high], [i, i], color="C0", lw=6, alpha=0.4,
              solid_capstyle="butt")
      ax.plot([a.value], [i], "o", color="C0")
    ax.set_title(dataset)
    ax.set_xlabel("normalized IQM")
    ax.grid(axis="x", alpha=0.3)
  axes[0][0].set_yticks(range(len(methods)))
  axes[0][0].set_yticklabels(methods)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


def write_outputs(output_dir: str, suite: str, reps: int,
                  wall_seconds: Optional[float] = None) -> Dict[str, str]:
  """scores.csv, table.md, per_game_<dataset>.md, iqm.png from all result files, and where
  runs have confidence diagnostics confidence.md with its rows, confidence_rows.csv."""
  rows = read_results(output_dir)
  if not rows:
    raise ValueError(f"no results under {os.path.join(output_dir, 'results')}")
  paths = {"scores": os.path.join(output_dir, "scores.csv"),
           "table": os.path.join(output_dir, "table.md"),
           "iqm": os.path.join(output_dir, "iqm.png")}
  write_scores_csv(paths["scores"], rows)
  with open(paths["table"], "w") as f:
    f.write(render_table(rows, suite, reps, wall_seconds))
  for dataset in _ordered([r["dataset"] for r in rows], compare_config.DATASET_KINDS):
    p = os.path.join(output_dir, f"per_game_{compare_config.slug(dataset)}.md")
    with open(p, "w") as f:
      f.write(f"# {suite}: {per_game_title(dataset, suite)}\n\n")
      f.write(per_game_table(rows, dataset, suite))
    paths[f"per_game_{compare_config.slug(dataset)}"] = p
  plot_iqm(paths["iqm"], rows, reps)
  confidence = confidence_table(rows, reps)
  if confidence:
    paths["confidence"] = os.path.join(output_dir, "confidence.md")
    with open(paths["confidence"], "w") as f:
      f.write(confidence)
    paths["confidence_rows"] = os.path.join(output_dir, "confidence_rows.csv")
    write_confidence_csv(paths["confidence_rows"], rows)
  return paths


CONFIDENCE_COLUMNS = (
    ("family_spread", "delta-family spread / mean abs TD target"),
    ("lemma1_fraction", "Lemma-1 fraction (V nondecreasing in delta)"),
    ("count_auc_random_policy", "AUC of n(s)^-1, random-policy vs dataset states"),
    ("count_auc_shuffled_pixels", "AUC of n(s)^-1, shuffled-pixel vs dataset states"),
    ("belief_max_shift", "belief: max shift of E[delta] from the prior"),
    ("belief_final_entropy", "belief: final entropy (nats)"),
)
# The delta family as greedy policies on held-out dataset states
# (ccvl_tf.evaluation.policy_diagnostics .family_summary): lo / hi = the grid's smallest / largest
# delta.
FAMILY_COLUMNS = (
    ("family_differs_ends", "greedy action differs, smallest vs largest delta"),
    ("family_differs_any", "greedy action differs anywhere along the grid"),
    ("family_agreement_lo", "agreement with the data's action, smallest delta"),
    ("family_agreement_hi", "agreement with the data's action, largest delta"),
    ("family_cql_gap_lo", "CQL gap, smallest delta"),
    ("family_cql_gap_hi", "CQL gap, largest delta"),
)


def _diagnostics_lines(rows: Sequence[dict], columns) -> List[str]:
  """Markdown table lines: one row per dataset kind, mean [min, max] over the rows'
  diagnostics of each column key ('n/a' where no row has the key)."""
  lines = ["| Data | runs | " + " | ".join(label for _, label in columns) + " |",
           "| --- | --- |" + " --- |" * len(columns)]
  for dataset in _ordered([r["dataset"] for r in rows], compare_config.DATASET_KINDS):
    sel = [r["diagnostics"] for r in rows if r["dataset"] == dataset]
    cells = []
    for key, _ in columns:
      v = np.array([d[key] for d in sel if key in d], np.float64)
      cells.append("n/a" if v.size == 0 else
                   f"{v.mean():.3g} [{v.min():.3g}, {v.max():.3g}]")
    lines.append(f"| {dataset} | {len(sel)} | " + " | ".join(cells) + " |")
  return lines


def adaptive_vs_fixed_lines(rows: Sequence[dict], reps: int = 2000) -> List[str]:
  """improvement_lines of CCVL (adaptive) against Fixed-CCVL: on the same game and seed they
  are the same trained network, so the runs compare the two policies of one learner."""
  return improvement_lines(rows, "CCVL", "Fixed-CCVL", reps)


def improvement_lines(rows: Sequence[dict], x: str, y: str, reps: int = 2000) -> List[str]:
  """Markdown table lines: per dataset kind, method `x` against method `y` on the runs both
  have (same game and seed): how many runs `x` scores higher / the same / lower, the mean
  difference of normalized scores, and P(x > y) with its 95% CI
  (score_stats.probability_of_improvement over the seeds both have in every game);
  [] without both methods."""
  keys = ("method", "dataset", "game", "seed", "normalized_score")
  by = {(r["method"], r["dataset"], r["game"], r["seed"]): r["normalized_score"] for r in rows
        if all(k in r for k in keys)}
  lines = []
  for dataset in _ordered([r["dataset"] for r in rows], compare_config.DATASET_KINDS):
    pairs = sorted((g, s) for (m, d, g, s) in by if m == x and d == dataset
                   and (y, d, g, s) in by)
    if not pairs:
      continue
    diff = np.array([by[(x, dataset, g, s)] - by[(y, dataset, g, s)] for g, s in pairs])
    games, seeds = _games_and_common_seeds(pairs)
    cell = "n/a"
    if seeds:
      xs = np.array([[by[(x, dataset, g, s)] for g in games] for s in seeds])  # [seeds, games]
      ys = np.array([[by[(y, dataset, g, s)] for g in games] for s in seeds])
      p = score_stats.probability_of_improvement(xs, ys, reps=reps, seed=0)
      cell = f"{p.value:.2f} [{p.ci_low:.2f}, {p.ci_high:.2f}]"
    lines.append(f"| {dataset} | {len(pairs)} | {int((diff > 0).sum())} / "
                 f"{int((diff == 0).sum())} / {int((diff < 0).sum())} | "
                 f"{diff.mean():+.1f} | {cell} |")
  if not lines:
    return []
  return [f"| Data | runs | {x} higher / same / lower | mean difference (normalized) | "
          f"P({x} > {y}) [95% CI] |", "| --- | --- | --- | --- | --- |"] + lines


def confidence_table(rows: Sequence[dict], reps: int = 2000) -> str:
  """Markdown: the confidence diagnostics of the CCVL runs
  (experiments/offline/confidence_report.py), mean [min, max] over games and seeds per dataset
  kind -- the value-level ones (CONFIDENCE_COLUMNS), then the family as greedy policies
  (FAMILY_COLUMNS); '' when no row has them."""
  ccvl = [r for r in rows if isinstance(r.get("diagnostics"), dict)]
  if not ccvl:
    return ""
  adaptive = adaptive_vs_fixed_lines(rows, reps)
  rows = ccvl
  k = len(rows[0].get("bellman_errors", [])) or 8
  return ("# CCVL confidence diagnostics (mean [min, max] over games and seeds)\n\n"
          + "\n".join(_diagnostics_lines(rows, CONFIDENCE_COLUMNS))
          + f"\n\nPrior entropy of the belief: log K = {np.log(k):.3f}.\n"
          + "\n## The delta family as greedy policies (held-out dataset states)\n\n"
          "Share of states whose greedy action argmax_a Q(s, a, delta) differs between the "
          "grid's smallest and largest delta, and anywhere along the grid; at those two "
          "deltas, the share of states where it is the data's action, and the CQL gap "
          "logsumexp_a Q(s, a, delta) - Q(s, a_D, delta) (log A: no preference; 0: all the "
          "mass on the data's action).\n\n"
          + "\n".join(_diagnostics_lines(rows, FAMILY_COLUMNS)) + "\n"
          + ("" if not adaptive else
             "\n## Does adapting delta help? CCVL (adaptive) vs Fixed-CCVL\n\n"
             "The same trained network per game and seed, acting with the confidence-adaptive "
             "policy (CCVL) or at the fixed delta chosen on held-out data (Fixed-CCVL). "
             "P(CCVL > Fixed-CCVL): rliable's probability of improvement (0.5: neither is "
             "better) with a 95% stratified bootstrap CI.\n\n" + "\n".join(adaptive) + "\n"))
