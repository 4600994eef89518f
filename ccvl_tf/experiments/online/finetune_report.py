"""The fine-tuning measurement's report (finetune_suite.py): normalized scores
before and after the online budget, the gain with 95% stratified bootstrap CIs (rliable, over
seeds x games), score against online steps, and the bounds' tightness against Monte-Carlo
returns.

Score of a run: the mean raw score of its primary policy's evaluation episodes
(online_eval.primary_policy_name: the confidence-adaptive policy over Q_l for the CCVL agents,
the greedy policy for CQL), normalized with the datasets' references (100 x (score - random) /
(data DQN - random), ccvl_tf.envs.scores). "Before" is the evaluation at the offline step,
"after" the one at the final step; gain = after - before, per run.
"""
from __future__ import annotations

import csv
import json
import os
from typing import Callable, Dict, List, Tuple

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from ccvl_tf.data import minatar_datasets
from ccvl_tf.experiments.online import penalty as online_penalty
from ccvl_tf.experiments.online import scores_and_bounds as online_eval
from ccvl_tf.evaluation import score_stats
from ccvl_tf.envs import scores
from ccvl_tf.runtime import training


LABELS = {"cql": "CQL", "ccvl_lower": "CCVL (lower bound only)", "ccvl": "CCVL (bounds)"}


def run_dir(cfg, method: str, game: str, seed: int) -> str:
  """The fine-tuning run of (method, game, seed): ``<output_dir>/runs/<method>/<Game>/seed_<k>``
  (a finetune_online root_dir; finetune_suite.run writes it, :func:`load_runs` reads it)."""
  return os.path.join(cfg.output_dir, "runs", method, game, f"seed_{seed}")


def load_runs(cfg) -> List[dict]:
  """One row per evaluation of every finished or partial run: method, game, seed, step,
  learner_steps (since the offline start), online_env_steps (the actors', as counted at the
  server), the primary policy's raw and normalized score, and the run's summary."""
  refs = minatar_datasets.load_scores(cfg.data_dir)
  rows = []
  for method in cfg.methods:
    for game in cfg.games:
      norm = scores.normalizer(game, refs)
      for seed in cfg.seeds:
        root = run_dir(cfg, method, game, int(seed))
        evals = training.load_eval_record(root)["evals"]
        summary_path = os.path.join(root, "summary.json")
        summary = json.load(open(summary_path)) if os.path.exists(summary_path) else {}
        offline_step = summary.get("offline_step", min((int(s) for s in evals), default=0))
        for step in sorted(evals, key=int):
          e = evals[step]
          raw = e.get(f"{online_eval.primary_policy_name(method)}_mean_score")
          if raw is None:
            continue
          row = dict(method=method, game=game, seed=int(seed), step=int(step),
                     learner_steps=int(step) - int(offline_step),
                     online_env_steps=float(e.get("online_env_steps", float("nan"))),
                     score=float(raw), normalized_score=float(norm(np.array([raw]))[0]),
                     final=summary.get("final_step") == int(step))
          if "bounds_mean_score" in e:
            row["bounds_normalized_score"] = float(norm(np.array([e["bounds_mean_score"]]))[0])
          row.update({k: v for k, v in e.items() if k.startswith(("tight/", "penalty/"))})
          row["throughput"] = summary.get("throughput", {}) if row["final"] else {}
          rows.append(row)
  return rows


def before_after(rows: List[dict]) -> Dict[tuple, dict]:
  """(method, game, seed) -> {'before', 'after', 'gain', 'final_row'} for finished runs."""
  runs: Dict[tuple, List[dict]] = {}
  for r in rows:
    runs.setdefault((r["method"], r["game"], r["seed"]), []).append(r)
  out = {}
  for key, rs in runs.items():
    rs = sorted(rs, key=lambda r: r["step"])
    finals = [r for r in rs if r["final"]]
    if not finals or rs[0]["online_env_steps"] != 0:
      continue  # unfinished, or no evaluation before the first online step
    out[key] = dict(before=rs[0]["normalized_score"], after=finals[0]["normalized_score"],
                    gain=finals[0]["normalized_score"] - rs[0]["normalized_score"],
                    final_row=finals[0], first_row=rs[0])
  return out


# runs.csv: one row per finished run, the table's inputs. before / after / gain are normalized
# scores (before_score / after_score raw); bounds_normalized_score is the Eq. upper policy's
# after; then the run's final tight/* (bounds against Monte-Carlo returns) and penalty/* values.
RUN_COLUMNS = ("method", "game", "seed", "before", "after", "gain", "before_score",
               "after_score", "online_env_steps", "bounds_normalized_score")


def run_rows(pairs: Dict[tuple, dict]) -> List[dict]:
  """runs.csv's rows (RUN_COLUMNS, then the final tight/* and penalty/* keys), sorted."""
  out = []
  for (method, game, seed), v in sorted(pairs.items()):
    final, first = v["final_row"], v.get("first_row", {})
    row = dict(method=method, game=game, seed=seed, before=v["before"], after=v["after"],
               gain=v["gain"], before_score=first.get("score", ""),
               after_score=final.get("score", ""),
               online_env_steps=final.get("online_env_steps", ""),
               bounds_normalized_score=final.get("bounds_normalized_score", ""))
    row.update({k: final[k] for k in sorted(final) if k.startswith(("tight/", "penalty/"))})
    out.append(row)
  return out


def write_runs_csv(path: str, pairs: Dict[tuple, dict]) -> None:
  rows = run_rows(pairs)
  extra = sorted({k for r in rows for k in r} - set(RUN_COLUMNS))
  with open(path, "w", newline="") as f:
    w = csv.DictWriter(f, list(RUN_COLUMNS) + extra, restval="")
    w.writeheader()
    w.writerows(rows)


def read_runs_csv(path: str) -> Dict[tuple, dict]:
  """runs.csv back as before_after's mapping (method, game, seed) -> {'before', 'after',
  'gain', 'final_row'}, so the tables recompute from the committed rows (the final row
  carries bounds_normalized_score and the tight/* and penalty/* values; no throughput)."""
  out = {}
  with open(path, newline="") as f:
    for r in csv.DictReader(f):
      num = {k: float(v) for k, v in r.items()
             if k not in ("method", "game", "seed") and v != ""}
      final = {k: v for k, v in num.items()
               if k.startswith(("tight/", "penalty/")) or k == "bounds_normalized_score"}
      final.update(throughput={}, score=num.get("after_score"))
      out[(r["method"], r["game"], int(r["seed"]))] = dict(
          before=num["before"], after=num["after"], gain=num["gain"], final_row=final)
  return out


def _matrix(pairs, cfg, method, what) -> np.ndarray:
  """[seeds, games] of `what` for `method` (NaN where a run is missing)."""
  return np.array([[pairs.get((method, g, int(s)), {}).get(what, np.nan) for g in cfg.games]
                   for s in cfg.seeds], np.float64)


def aggregate_lines(cfg, pairs) -> List[str]:
  lines = ["| Method | runs | before (IQM) | after (IQM) | gain: mean [95% CI] | "
           "gain: IQM [95% CI] |", "| --- | --- | --- | --- | --- | --- |"]
  for method in cfg.methods:
    gain = _matrix(pairs, cfg, method, "gain")
    if np.isnan(gain).any():
      lines.append(f"| {LABELS[method]} | {int(np.sum(~np.isnan(gain)))} of {gain.size} "
                   "(incomplete) | | | | |")
      continue
    agg = score_stats.aggregate_scores(gain, reps=cfg.bootstrap_reps)
    before = score_stats.iqm(_matrix(pairs, cfg, method, "before").ravel())
    after = score_stats.iqm(_matrix(pairs, cfg, method, "after").ravel())
    m, q = agg["mean"], agg["iqm"]
    lines.append(f"| {LABELS[method]} | {gain.size} | {before:.1f} | {after:.1f} | "
                 f"{m.value:+.1f} [{m.ci_low:+.1f}, {m.ci_high:+.1f}] | "
                 f"{q.value:+.1f} [{q.ci_low:+.1f}, {q.ci_high:+.1f}] |")
  return lines


def per_game_lines(cfg, pairs) -> List[str]:
  lines = ["| Game | Method | before | after | gain | Eq. upper policy after |",
           "| --- | --- | --- | --- | --- | --- |"]
  for game in cfg.games:
    for method in cfg.methods:
      vals = [pairs[(method, game, int(s))] for s in cfg.seeds if (method, game, int(s)) in pairs]
      if not vals:
        continue

      def ms(xs):
        xs = np.asarray(xs, np.float64)
        return f"{xs.mean():.1f} ± {xs.std():.1f}"
      upper = [v["final_row"].get("bounds_normalized_score") for v in vals]
      lines.append(f"| {game} | {LABELS[method]} | {ms([v['before'] for v in vals])} | "
                   f"{ms([v['after'] for v in vals])} | {ms([v['gain'] for v in vals])} | "
                   + (ms(upper) if all(u is not None for u in upper) else "") + " |")
  return lines


def tightness_lines(cfg, pairs) -> List[str]:
  """Mean over the finished runs of each method and game of the final tightness values."""
  keys = sorted({k for v in pairs.values() for k in v["final_row"] if k.startswith("tight/")})
  deltas = sorted({k.split("@")[1] for k in keys if "@" in k}, key=float)
  lines = ["| Game | Method | delta | mean MC return | Q_l - G | share Q_l <= G | Q_u - G | "
           "share Q_u >= G |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
  for game in cfg.games:
    for method in cfg.methods:
      finals = [pairs[(method, game, int(s))]["final_row"] for s in cfg.seeds
                if (method, game, int(s)) in pairs]
      if not finals:
        continue
      for d in deltas:
        def mean(key):
          xs = [f[key] for f in finals if key in f]
          return f"{np.mean(xs):.3f}" if xs else "-"
        lines.append(f"| {game} | {LABELS[method]} | {d} | {mean('tight/mc_return')} | "
                     f"{mean(f'tight/lower_minus_mc@{d}')} | {mean(f'tight/lower_holds@{d}')} | "
                     f"{mean(f'tight/upper_minus_mc@{d}')} | {mean(f'tight/upper_holds@{d}')} |")
  return lines


def _evaluation_groups(rows, method, game) -> List[Tuple[float, List[dict]]]:
  """The seeds' evaluations of one method and game grouped by when they were made (the same
  learner steps since the offline start, or the end of the run: the actors' env steps at an
  evaluation differ a little between runs), as (mean online env steps, rows), in order."""
  groups: Dict[object, List[dict]] = {}
  for r in rows:
    if r["method"] == method and r["game"] == game:
      groups.setdefault("end" if r["final"] else r["learner_steps"], []).append(r)
  return sorted(((float(np.mean([r["online_env_steps"] for r in rs])), rs)
                 for rs in groups.values()), key=lambda g: g[0])


def _per_step_means(rows, method, game, keys) -> Dict[float, Dict[str, float]]:
  """mean online env steps of an evaluation group (`_evaluation_groups`) -> {key: mean over
  the group's evaluations that have it}."""
  out = {}
  for x, rs in _evaluation_groups(rows, method, game):
    means = {k: float(np.mean([r[k] for r in rs if k in r])) for k in keys
             if any(k in r for r in rs)}
    if means:
      out[x] = means
  return out


PENALTY_COLUMNS = (("penalty/lower_weight_new", "w new (Q_l)"),
                   ("penalty/lower_weight_offline", "w offline (Q_l)"),
                   ("penalty/upper_weight_new", "w new (Q_u)"),
                   ("penalty/upper_weight_offline", "w offline (Q_u)"),
                   ("penalty/lower_dataset_size", "|D| (Q_l)"),
                   ("tight/lower_minus_mc@0.5", "Q_l - G @0.5"),
                   ("tight/upper_minus_mc@0.5", "Q_u - G @0.5"))


def penalty_lines(cfg, rows) -> List[str]:
  """The penalty diagnostic per evaluation (penalty.py): the regularizer weight
  w(s, 0.5) on the new online states and on offline states, the |D| in force and the bounds
  against Monte-Carlo returns, mean over seeds, per game, method and online env steps."""
  lines = ["| Game | Method | online env steps | "
           + " | ".join(label for _, label in PENALTY_COLUMNS) + " |",
           "| --- | --- | --- | " + " | ".join("---" for _ in PENALTY_COLUMNS) + " |"]
  keys = [k for k, _ in PENALTY_COLUMNS]
  for game in cfg.games:
    for method in cfg.methods:
      for x, means in _per_step_means(rows, method, game, keys).items():
        cells = [f"{means[k]:.4g}" if k in means else "-" for k in keys]
        lines.append(f"| {game} | {LABELS[method]} | {x:.0f} | " + " | ".join(cells) + " |")
  return lines


def penalty_plot(cfg, rows, path: str) -> None:
  """online_penalty.plot of the per-step means over seeds, one line per method and game."""
  keys = ["penalty/lower_weight_new", "penalty/lower_weight_offline",
          *online_penalty.TIGHT_KEYS]
  series = {}
  for game in cfg.games:
    for method in cfg.methods:
      means = _per_step_means(rows, method, game, keys)
      if means:
        series[f"{LABELS[method]}, {game}"] = [dict(m, online_env_steps=x)
                                               for x, m in means.items()]
  online_penalty.plot(series, path, title="Penalty weight w(s, 0.5) and bounds - MC return "
                      "(mean over seeds)")


def throughput_lines(cfg, pairs) -> List[str]:
  lines = ["| Method | learner steps/s | actor env steps/s | actor time inserting | learner "
           "time waiting for samples | train s |", "| --- | --- | --- | --- | --- | --- |"]
  for method in cfg.methods:
    ts = [v["final_row"]["throughput"] for k, v in pairs.items()
          if k[0] == method and v["final_row"]["throughput"]]
    if not ts:
      continue

    def mean(key):
      xs = [t[key] for t in ts if key in t]
      return f"{np.mean(xs):.1f}" if xs else "-"
    share = [t["sample_wait_seconds"] / max(t["train_seconds"], 1e-9) for t in ts
             if "sample_wait_seconds" in t]
    lines.append(f"| {LABELS[method]} | {mean('learner_steps_per_s')} | "
                 f"{mean('actors/actor_env_steps_per_s')} | "
                 f"{100 * np.mean([t.get('actors/insert_share', np.nan) for t in ts]):.0f}% | "
                 f"{100 * np.mean(share) if share else np.nan:.0f}% | "
                 f"{mean('train_seconds')} |")
  return lines


def plot(cfg, rows, path: str) -> None:
  """Normalized score of the primary policy vs online env steps: mean over seeds per method,
  shaded between the seeds' min and max, one panel per game."""
  matplotlib.use("Agg")
  fig, axes = plt.subplots(1, len(cfg.games), figsize=(5 * len(cfg.games), 3.8), squeeze=False)
  for ax, game in zip(axes[0], cfg.games):
    for method in cfg.methods:
      by_step = {x: [r["normalized_score"] for r in rs]
                 for x, rs in _evaluation_groups(rows, method, game)}
      if not by_step:
        continue
      xs = sorted(by_step)
      mean = [np.mean(by_step[x]) for x in xs]
      ax.plot(xs, mean, marker="o", ms=3, label=LABELS[method])
      ax.fill_between(xs, [min(by_step[x]) for x in xs], [max(by_step[x]) for x in xs],
                      alpha=0.15)
    ax.set_title(f"MinAtar {game}")
    ax.set_xlabel("online environment steps")
    ax.set_ylabel("normalized score")
    ax.grid(alpha=0.3)
  axes[0][0].legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def write_report(cfg, log: Callable[[str], None] = print) -> Dict[str, str]:
  """table.md (aggregate, per game, tightness, penalty per evaluation, throughput),
  scores.csv (one row per evaluation), runs.csv (one row per finished run: run_rows),
  score_vs_steps.png, penalty_vs_steps.png."""
  rows = load_runs(cfg)
  pairs = before_after(rows)
  out = {k: os.path.join(cfg.output_dir, v) for k, v in dict(
      table="table.md", csv="scores.csv", runs="runs.csv", plot="score_vs_steps.png",
      penalty_plot="penalty_vs_steps.png").items()}
  write_runs_csv(out["runs"], pairs)
  with open(out["csv"], "w", newline="") as f:
    cols = ["method", "game", "seed", "step", "online_env_steps", "score", "normalized_score",
            "bounds_normalized_score"]
    w = csv.DictWriter(f, cols, extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
  lines = [f"# Online fine-tuning on MinAtar ({cfg.dataset} offline runs, "
           f"{cfg.num_env_steps} online env steps per run)", "",
           "Normalized score of each method's policy (CCVL: confidence-adaptive over Q_l; CQL: "
           "greedy) before and after fine-tuning; gain = after - before per run, aggregated "
           f"over {len(cfg.seeds)} seeds x {len(cfg.games)} games with 95% stratified "
           "bootstrap CIs (rliable).", ""]
  lines += aggregate_lines(cfg, pairs) + ["", "## Per game (mean ± std over seeds)", ""]
  lines += per_game_lines(cfg, pairs)
  lines += ["", "## Tightness of the bounds at the end (Monte-Carlo returns G of the "
            "evaluated policy, clipped rewards)", ""] + tightness_lines(cfg, pairs)
  lines += ["", "## The penalty during fine-tuning (per evaluation, mean over seeds)", "",
            "w = alpha sqrt(log(1/delta) n(s)^-1) at delta 0.5 on a uniform sample of the "
            "online states trained on since the previous evaluation (new) and on offline "
            "states; |D| in force; Q_l / Q_u minus the Monte-Carlo return G at delta 0.5.", ""]
  lines += penalty_lines(cfg, rows)
  lines += ["", "## Throughput (1 actor process, learner and actor on the same 2 cores)", ""]
  lines += throughput_lines(cfg, pairs)
  with open(out["table"], "w") as f:
    f.write("\n".join(lines) + "\n")
  if rows:
    plot(cfg, rows, out["plot"])
    penalty_plot(cfg, rows, out["penalty_plot"])
  log("\n".join(lines))
  log(f"Wrote {', '.join(out.values())}.")
  return out
