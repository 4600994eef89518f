"""Reports of evaluation results: the paper's tables as markdown (Table 2 and the per-game
Tables 3-5), the results CSV they are made from, and the per-episode CSV files and plots that
binaries/evaluate.py writes.

A results CSV has one row per (method, dataset, game, seed) with the raw game score of that run
(the average return of its evaluation episodes): columns RESULTS_COLUMNS. Normalized scores come
from ccvl_tf.envs.scores, aggregates (IQM, stratified bootstrap CIs) from
ccvl_tf.evaluation.rollouts.
"""
from __future__ import annotations

import csv
import io
import math
from typing import Iterable, List, Optional, Sequence

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np

from ccvl_tf.evaluation import rollouts, score_stats
from ccvl_tf.envs import scores
from ccvl_tf.runtime import writes

RESULTS_COLUMNS = ("method", "dataset", "game", "seed", "score")


def read_results_csv(path_or_file) -> List[dict]:
  """Rows of a results CSV (columns RESULTS_COLUMNS; score parsed as float)."""
  if hasattr(path_or_file, "read"):
    text = path_or_file.read()
  else:
    with open(path_or_file, newline="") as f:
      text = f.read()
  reader = csv.DictReader(io.StringIO(text))
  missing = set(RESULTS_COLUMNS) - set(reader.fieldnames or ())
  if missing:
    raise ValueError(f"results CSV lacks columns {sorted(missing)}; expected {RESULTS_COLUMNS}")
  rows = []
  for row in reader:
    row = dict(row)
    row["score"] = float(row["score"])
    rows.append(row)
  return rows


def ordered(values: Iterable[str], preferred: Sequence[str]) -> List[str]:
  """The distinct `values`: those in `preferred` in its order, then the others sorted."""
  values = list(dict.fromkeys(values))
  return [v for v in preferred if v in values] + sorted(v for v in values if v not in preferred)


def score_matrix_from_rows(rows: Sequence[dict], method: str, dataset: str,
                           games: Optional[Sequence[str]] = None) -> np.ndarray:
  """Normalized scores [num_seeds, num_games] of one method on one dataset.

  Seeds are matched by the 'seed' column; every game must have the same seeds.
  """
  sel = [r for r in rows if r["method"] == method and r["dataset"] == dataset]
  if not sel:
    raise ValueError(f"no rows for method={method!r} dataset={dataset!r}")
  games = (list(games) if games is not None
           else ordered([r["game"] for r in sel], scores.ATARI_GAMES))
  seeds = sorted({r["seed"] for r in sel}, key=lambda s: (len(s), s))
  table = {(r["game"], r["seed"]): r["score"] for r in sel}
  out = np.empty([len(seeds), len(games)])
  for j, game in enumerate(games):
    for i, seed in enumerate(seeds):
      if (game, seed) not in table:
        raise ValueError(f"{method}/{dataset}: no score for game {game!r} seed {seed!r}")
      out[i, j] = scores.normalized_score(game, table[(game, seed)])
  return out


def _fmt(x: float, digits: int = 1) -> str:
  return f"{x:.{digits}f}"


def iqm_table_lines(datasets: Sequence[str], methods: Sequence[str], cells) -> List[str]:
  """Markdown lines of a Table-2 style table: header, then one row per dataset with
  "IQM (CI low, CI high)" per method ("-" where `cells` has no (method, dataset) entry),
  the best IQM of each row in bold. `cells`: {(method, dataset): aggregate with value,
  ci_low, ci_high}."""
  lines = ["| Data | " + " | ".join(methods) + " |",
           "| --- | " + " | ".join("---" for _ in methods) + " |"]
  for dataset in datasets:
    row = {m: cells[(m, dataset)] for m in methods if (m, dataset) in cells}
    best = max((a.value for a in row.values()), default=None)
    out = []
    for m in methods:
      if m not in row:
        out.append("-")
        continue
      a = row[m]
      text = f"{_fmt(a.value)} ({_fmt(a.ci_low)}, {_fmt(a.ci_high)})"
      out.append(f"**{text}**" if a.value == best else text)
    lines.append(f"| {dataset} | " + " | ".join(out) + " |")
  return lines


def render_aggregate_table(rows: Sequence[dict], reps: int = 2000, seed: int = 0,
                           methods: Optional[Sequence[str]] = None,
                           datasets: Optional[Sequence[str]] = None) -> str:
  """The paper's Table 2 as markdown: dataset x method, normalized IQM and 95% CI.

  Games without both reference scores (YarsRevenge) are excluded and named in a footnote.
  The best IQM of each dataset row is bold.
  """
  methods = (list(methods) if methods
             else ordered([r["method"] for r in rows], scores.TABLE_METHODS))
  datasets = (list(datasets) if datasets
              else ordered([r["dataset"] for r in rows], scores.PAPER_DATASETS))
  all_games = ordered([r["game"] for r in rows], scores.ATARI_GAMES)
  games = [g for g in all_games if scores.has_reference(g)]
  skipped = [g for g in all_games if g not in games]
  cells = {}
  for dataset in datasets:
    for method in methods:
      if any(r["method"] == method and r["dataset"] == dataset for r in rows):
        cells[(method, dataset)] = score_stats.aggregate_scores(
            score_matrix_from_rows(rows, method, dataset, games), reps=reps, seed=seed)["iqm"]
  lines = iqm_table_lines(datasets, methods, cells)
  note = (f"\nNormalized IQM over {len(games)} games x seeds, 95% stratified bootstrap CIs "
          f"(rliable, {reps} reps).")
  if skipped:
    note += f" Excluded (no reference score): {', '.join(skipped)}."
  return "\n".join(lines) + "\n" + note + "\n"


def render_per_game_table(rows: Sequence[dict], dataset: str,
                          methods: Optional[Sequence[str]] = None) -> str:
  """The paper's per-game Tables 3-5 as markdown: game x method, mean +- std of raw returns
  across seeds (sample std, ddof=1; 0 for a single seed)."""
  sel = [r for r in rows if r["dataset"] == dataset]
  if not sel:
    raise ValueError(f"no rows for dataset {dataset!r}")
  methods = (list(methods) if methods
             else ordered([r["method"] for r in sel], scores.TABLE_METHODS))
  games = ordered([r["game"] for r in sel], scores.ATARI_GAMES)
  lines = ["| Game | " + " | ".join(methods) + " |",
           "| --- | " + " | ".join("---" for _ in methods) + " |"]
  for game in games:
    cells = []
    for method in methods:
      vals = np.array([r["score"] for r in sel if r["game"] == game and r["method"] == method])
      if vals.size == 0:
        cells.append("-")
        continue
      std = float(np.std(vals, ddof=1)) if vals.size > 1 else 0.0
      cells.append(f"{_fmt(float(np.mean(vals)))} ± {_fmt(std)}")
    lines.append(f"| {game} | " + " | ".join(cells) + " |")
  return "\n".join(lines) + "\n"


def write_results_csv(path: str, rows: Sequence[dict]) -> None:
  """A results CSV (RESULTS_COLUMNS, the score to 6 significant digits): what read_results_csv
  reads back."""
  def write(f):
    w = csv.writer(f)
    w.writerow(RESULTS_COLUMNS)
    for r in rows:
      w.writerow([r["method"], r["dataset"], r["game"], r["seed"], f"{r['score']:.6g}"])
  writes.write_atomic(path, write, newline="")


# ------------------------------------------------------------------------------ evaluate.py's files
def write_returns_csv(path: str, records: Sequence[rollouts.EpisodeRecord],
                      normalized) -> None:
  """returns.csv: per episode its run, index, length, return, raw and normalized score."""
  def write(f):
    w = csv.writer(f)
    w.writerow(["run", "episode", "length", "return", "raw_score", "normalized_score"])
    for rec, n in zip(records, normalized):
      w.writerow([rec.run, rec.episode, rec.length, f"{rec.return_:.6g}",
                  f"{rec.raw_score:.6g}", f"{float(n):.6g}"])
  writes.write_atomic(path, write, newline="")


def write_delta_csv(path: str, records: Sequence[rollouts.EpisodeRecord],
                    grid: Optional[Sequence[float]] = None) -> None:
  """delta.csv: per episode the mean / first / last delta acted under and the belief's argmax
  at its end (nan for a policy without deltas); for a policy whose belief records them
  (EpisodeRecord.sq_error_sum), also the number of transitions the belief scored in the
  episode (sq_error_count) and, one column per grid delta (`rollouts.sq_error_columns` of
  `grid`, default the delta grid of their size K), the squared Bellman errors it summed there,
  written to full precision."""
  sums = [r.sq_error_sum for r in records if r.sq_error_sum is not None]
  columns = []
  if sums:
    columns = ["sq_error_count"] + rollouts.sq_error_columns(
        rollouts.delta_grid_of(len(sums[0])) if grid is None else grid)

  def write(f):
    w = csv.writer(f)
    w.writerow(["run", "episode", "delta_mean", "delta_first", "delta_last", "map_delta"]
               + columns)
    for rec in records:
      d = rec.deltas
      vals = (np.mean(d), d[0], d[-1]) if d else (math.nan,) * 3
      row = [rec.run, rec.episode] + [f"{v:.6g}" for v in (*vals, rec.map_delta)]
      if columns:
        row += sq_error_cells(rec, len(columns) - 1)
      w.writerow(row)
  writes.write_atomic(path, write, newline="")


def sq_error_cells(rec, k: int) -> List[str]:
  """The cells of `rec`'s sq_error_count and its K summed squared errors (full precision:
  repr of each float), or K + 1 empty cells for a record without them."""
  if getattr(rec, "sq_error_sum", None) is None:
    return [""] * (k + 1)
  sums = np.asarray(rec.sq_error_sum, np.float64).reshape(-1)
  if sums.size != k:
    raise ValueError(f"episode {rec.episode} of run {rec.run} records {sums.size} summed "
                     f"squared errors, the others {k}")
  return [str(int(rec.sq_error_count))] + [repr(float(v)) for v in sums]


def plot_runs(path: str, records: Sequence[rollouts.EpisodeRecord], values, ylabel: str,
              title: str) -> None:
  """One line per run: `values` (aligned with records) against the episode index."""
  # Here: matplotlib (~250 ms to import) only when a figure is drawn.
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, ax = plt.subplots(figsize=(6, 3.5))
  values = np.asarray(values, np.float64)
  for run in sorted({r.run for r in records}):
    idx = [i for i, r in enumerate(records) if r.run == run]
    ax.plot([records[i].episode for i in idx], values[idx], marker=".", label=f"seed {run}")
  ax.set_xlabel("episode")
  ax.set_ylabel(ylabel)
  ax.set_title(title)
  ax.grid(alpha=0.3)
  if len({r.run for r in records}) <= 10:
    ax.legend(fontsize="small")
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


