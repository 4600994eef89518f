"""The demo over several training seeds: one network is one draw.

`run(DemoSeedsConfig(...), train_flags)` runs `binaries/train_offline.py` once per seed, each in
its own process and root (`output_dir/seed_<k>`, resumable; a finished seed is skipped), all
on one dataset: the first seed's run collects the default dataset (seed 0 first: the dataset
of `make demo`), the others train on it (`--dataset_dir`). Only the training seed changes
between runs: initial weights, data order and the delta samples. Every run scores its policies
on the same evaluation episodes (`--eval_seed` = the first seed), so the table's spread over
seeds is the networks', not the episodes'. `train_flags` are further train_offline.py flags
given to every run (e.g. `--num_steps=10000`; not --seed, --root_dir, --dataset_dir or
--eval_seed, which this sets).

It then writes, beside each seed's results table (results.md: mean raw score over that run's
evaluation episodes with a 95% bootstrap CI over episodes),
  output_dir/seeds.md   per policy: each seed's mean (95% CI over episodes), the mean over
                        seeds, their standard deviation and range, a 95% bootstrap CI over
                        seeds (rliable, the same percentile bootstrap), in how many seeds
                        each learned policy scores above each other one, P(CCVL (adaptive) >
                        Fixed-CCVL) over the seeds' means with its CI, and per seed the
                        confidence family's diagnostics (summary.json 'diagnostics');
  output_dir/seeds.csv  one row per (seed, policy): episodes, mean, ci_low, ci_high;
  output_dir/seeds_results.json      {seed: that run's results.json rows (per-episode scores)};
  output_dir/seeds_diagnostics.json  {seed: that run's summary.json 'diagnostics'}
(the last two are what docs/results/ commits and tests/test_results_tables.py recomputes from).
"""
from __future__ import annotations

import csv
import dataclasses
import itertools
import json
import os
import subprocess
import sys
from typing import Callable, Dict, List, Mapping, Sequence

import ccvl_tf  # noqa: F401

import numpy as np

from ccvl_tf.runtime import config_flags
from ccvl_tf.runtime.config_flags import setting
from ccvl_tf.envs import atari
from ccvl_tf.envs import factory
from ccvl_tf.evaluation import score_stats
from ccvl_tf.runtime import strict_json

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))  # ccvl_tf/experiments/offline/<this file>
TRAIN_OFFLINE = os.path.join(_REPO_ROOT, "binaries", "train_offline.py")
SET_HERE = ("--seed", "--root_dir", "--dataset_dir", "--eval_seed")
# Rows of a demo results table that are not trained networks (not compared across seeds).
REFERENCE_ROWS = ("random",)
# P(X > Y) over the seeds' means is reported for these (X, Y) pairs when both rows exist: what
# the confidence-adaptive policy adds over one fixed delta.
IMPROVEMENT_PAIRS = (("CCVL (adaptive)", "Fixed-CCVL"),)
# The confidence family's diagnostics (ccvl_tf.evaluation.diagnostics, summary.json 'diagnostics')
# shown per seed: (key, column heading).
FAMILY_COLUMNS = (
    ("family_differs_any", "greedy action differs along delta"),
    ("lemma1_fraction", "Lemma 1: V ordered by delta"),
    ("v_above_value_max_fraction", "V above the largest return"),
    ("family_spread", "family spread"),
    ("behaviour_agreement", "agreement with the data's actions"))


def _parse_seeds(text) -> tuple:
  if isinstance(text, str):
    return tuple(t.strip() for t in text.split(",") if t.strip())
  return tuple(str(t) for t in text)


# Each field compared when a finished seed's run is reused (changed_settings on its
# summary.json), or not, and why.
@config_flags.compared_settings(
    compared=("game",),
    not_compared={"output_dir": "where the runs and the table go",
                  "seeds": "which runs the table holds; each seed is its own run directory"})
@dataclasses.dataclass(frozen=True)
class DemoSeedsConfig:
  """Settings of binaries/demo_seeds.py (its flags; further train_offline.py flags follow
  `--` on its command line)."""
  output_dir: str = setting("", "Directory of the per-seed runs (seed_<k>/) and the "
                            "across-seed table (resumable).", flag_default=None, required=True,
                            output="dir")
  seeds: Sequence[str] = setting(("0", "1", "2", "3", "4"), "Training seeds; the first one's "
                                 "run collects the dataset all of them train on.", kind="csv",
                                 parse=_parse_seeds)
  game: str = setting("Breakout", "Atari game (train_offline.py --game).")

  def validate(self, train_flags: Sequence[str] = ()) -> None:
    if not self.output_dir:
      raise ValueError("--output_dir is required")
    factory.refuse_gymnasium(self.game, "--game", "demo_seeds.py runs train_offline.py, which "
                             "trains on an Atari game's replay data")
    if not self.seeds:
      raise ValueError("--seeds must not be empty")
    for s in self.seeds:
      if not str(s).isdigit():
        raise ValueError(f"--seeds must be integers >= 0, got {s!r}")
    if len(set(self.seeds)) != len(self.seeds):
      raise ValueError(f"--seeds has repeated seeds: {','.join(self.seeds)}")
    for flag in train_flags:
      if not flag.startswith("--"):
        raise ValueError(f"the train_offline.py flags after '--' must look like --name=value, "
                         f"got {flag!r}")
      if flag.split("=", 1)[0] in SET_HERE + ("--game",):
        raise ValueError(f"{flag.split('=', 1)[0]} is set by demo_seeds.py (--seeds, "
                         f"--output_dir, --game); remove it from the train_offline.py flags")


def seed_dir(cfg: DemoSeedsConfig, seed) -> str:
  return os.path.join(cfg.output_dir, f"seed_{int(seed)}")


def _finished(root: str) -> bool:
  path = os.path.join(root, "summary.json")
  if not (os.path.exists(path) and os.path.exists(os.path.join(root, "results.json"))):
    return False
  with open(path) as f:
    summary = json.load(f)
  return summary.get("step", -1) >= summary.get("config", {}).get("num_steps", 0)


def run(cfg: DemoSeedsConfig, train_flags: Sequence[str] = (),
        log: Callable[[str], None] = print) -> Dict[str, object]:
  """Every seed's train_offline.py run in turn (finished ones skipped), then the table."""
  cfg.validate(train_flags)
  dataset = os.path.join(seed_dir(cfg, cfg.seeds[0]), "default_dataset",
                         atari.canonical_game(cfg.game))  # where train_offline.py collects it
  args_of = {}
  for i, seed in enumerate(cfg.seeds):
    args = [f"--game={cfg.game}", f"--seed={int(seed)}", f"--root_dir={seed_dir(cfg, seed)}",
            f"--eval_seed={int(cfg.seeds[0])}"]
    args_of[seed] = args + ([f"--dataset_dir={dataset}"] if i > 0 else [])
  # A finished seed is reused only under the settings now in force (checked before anything
  # is written, config.json included).
  changed = []
  for seed in cfg.seeds:
    if _finished(seed_dir(cfg, seed)):
      # Here: the run config (and TensorFlow under it) loads only when a seed is finished.
      from ccvl_tf.experiments.offline import config as offline_config  # pylint: disable=g-import-not-at-top
      with open(os.path.join(seed_dir(cfg, seed), "summary.json")) as f:
        saved = json.load(f).get("config") or {}
      now = offline_config.config_from_args(args_of[seed] + list(train_flags))
      diffs = offline_config.changed_settings(saved, now)
      if diffs:
        changed.append(f"seed {seed}: " + "; ".join(diffs))
  if changed:
    raise ValueError(f"--output_dir {cfg.output_dir} holds finished seeds run with other "
                     f"settings than these flags give, whose results would be reported as "
                     f"theirs: " + " | ".join(changed) + ". Use another --output_dir, or give "
                     f"the flags they were run with")
  os.makedirs(cfg.output_dir, exist_ok=True)
  with open(os.path.join(cfg.output_dir, "config.json"), "w") as f:
    strict_json.dump(dict(dataclasses.asdict(cfg), train_flags=list(train_flags)), f, indent=2)
  env = dict(os.environ, PYTHONUNBUFFERED="1")
  env["PYTHONPATH"] = _REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
  for i, seed in enumerate(cfg.seeds):
    root = seed_dir(cfg, seed)
    if _finished(root):
      log(f"[{i + 1}/{len(cfg.seeds)}] seed {seed}: done (skipped)")
      continue
    args = args_of[seed]
    os.makedirs(root, exist_ok=True)
    log_path = os.path.join(root, "train_offline.log")
    log(f"[{i + 1}/{len(cfg.seeds)}] seed {seed}: train_offline.py {' '.join(args)} "
        f"{' '.join(train_flags)} (log {log_path})")
    with open(log_path, "a") as out:
      code = subprocess.call([sys.executable, TRAIN_OFFLINE, *args, *train_flags],
                             stdout=out, stderr=subprocess.STDOUT, env=env, cwd=_REPO_ROOT)
    if code != 0:
      with open(log_path) as f:
        tail = f.read()[-1500:]
      raise RuntimeError(f"seed {seed}: train_offline.py exited with code {code}; see "
                         f"{log_path}:\n{tail}")
  return write_report(cfg, log)


def load_rows(cfg: DemoSeedsConfig) -> Dict[str, List[Mapping[str, object]]]:
  """{seed: that run's results.json rows}."""
  out = {}
  for seed in cfg.seeds:
    path = os.path.join(seed_dir(cfg, seed), "results.json")
    if not os.path.exists(path):
      raise FileNotFoundError(f"{path} is missing: the run of seed {seed} did not finish")
    with open(path) as f:
      out[str(seed)] = json.load(f)
  return out


def across_seeds(per_seed: Mapping[str, Sequence[Mapping[str, object]]],
                 reps: int = 2000) -> List[Dict[str, object]]:
  """Per policy (in the first seed's row order, policies every seed has): the per-seed means
  and, over seeds, their mean, sample standard deviation, range and 95% percentile-bootstrap
  CI (rliable, as the per-episode CIs)."""
  seeds = list(per_seed)
  by_seed = {s: {r["policy"]: r for r in rows} for s, rows in per_seed.items()}
  names = [r["policy"] for r in per_seed[seeds[0]]
           if all(r["policy"] in by_seed[s] for s in seeds)]
  out = []
  for name in names:
    means = np.array([float(by_seed[s][name]["mean"]) for s in seeds], np.float64)
    row = {"policy": name, "seeds": seeds, "seed_rows": [by_seed[s][name] for s in seeds],
           "mean": float(means.mean()),
           "sd": float(means.std(ddof=1)) if len(means) > 1 else 0.0,
           "min": float(means.min()), "max": float(means.max())}
    if len(means) > 1:
      agg = score_stats.aggregate_scores(means[:, None], reps=reps)["mean"]
      row["ci_low"], row["ci_high"] = float(agg.ci_low), float(agg.ci_high)
    out.append(row)
  return out


def orderings(rows: Sequence[Mapping[str, object]]) -> List[str]:
  """'A > B in n of N seeds' for every pair of learned policies (not the reference rows and
  not the behaviour policy), by the per-seed means."""
  learned = [r for r in rows if r["policy"] not in REFERENCE_ROWS
             and not str(r["policy"]).startswith("behaviour")]
  lines = []
  for a, b in itertools.combinations(learned, 2):
    above = sum(float(x["mean"]) > float(y["mean"])
                for x, y in zip(a["seed_rows"], b["seed_rows"]))
    below = sum(float(x["mean"]) < float(y["mean"])
                for x, y in zip(a["seed_rows"], b["seed_rows"]))
    n = len(a["seed_rows"])
    lines.append(f"{a['policy']} > {b['policy']} in {above} of {n} seeds, < in {below}, "
                 f"= in {n - above - below}")
  return lines


def improvements(rows: Sequence[Mapping[str, object]], reps: int = 2000) -> List[str]:
  """'P(X > Y) over the N seeds' means: p (95% CI lo, hi)' for each of IMPROVEMENT_PAIRS whose
  rows are both present: rliable's probability of improvement (the share of (seed of X, seed
  of Y) pairs with X's mean above Y's, ties counting 1/2) with its stratified bootstrap CI."""
  by_name = {r["policy"]: r for r in rows}
  lines = []
  for x, y in IMPROVEMENT_PAIRS:
    if x not in by_name or y not in by_name:
      continue
    means = [np.array([[float(s["mean"])] for s in by_name[n]["seed_rows"]], np.float64)
             for n in (x, y)]  # [num_seeds, 1 game]
    p = score_stats.probability_of_improvement(means[0], means[1], reps=reps, seed=0)
    lines.append(f"P({x} > {y}) over the {len(means[0])} seeds' means: {p.value:.2f} "
                 f"(95% CI {p.ci_low:.2f}, {p.ci_high:.2f})")
  return lines


def load_diagnostics(cfg: DemoSeedsConfig) -> Dict[str, Mapping[str, float]]:
  """{seed: that run's summary.json 'diagnostics'} for the seeds that have them."""
  out = {}
  for seed in cfg.seeds:
    path = os.path.join(seed_dir(cfg, seed), "summary.json")
    if os.path.exists(path):
      with open(path) as f:
        diag = json.load(f).get("diagnostics")
      if diag:
        out[str(seed)] = dict(diag)
  return out


def family_columns(diagnostics: Mapping[str, Mapping[str, float]]
                   ) -> Dict[str, Dict[str, float]]:
  """Only FAMILY_COLUMNS' keys of {seed: diagnostics}."""
  return {s: {k: d[k] for k, _ in FAMILY_COLUMNS if k in d} for s, d in diagnostics.items()}


def render_family(diagnostics: Mapping[str, Mapping[str, float]]) -> List[str]:
  """The per-seed family diagnostics as markdown lines (none without diagnostics)."""
  if not diagnostics:
    return []
  head = ["seed"] + [h for _, h in FAMILY_COLUMNS]
  lines = ["", "The confidence family per seed (held-out states of the run's data; "
           "docs/agent.md, diagnostics):", "", "| " + " | ".join(head) + " |",
           "|" + " --- |" * len(head)]
  for seed, diag in diagnostics.items():
    cells = [f"{float(diag[k]):.3f}" if k in diag else "-" for k, _ in FAMILY_COLUMNS]
    lines.append(f"| {seed} | " + " | ".join(cells) + " |")
  return lines


def render(rows: Sequence[Mapping[str, object]], game: str, reps: int = 2000,
           diagnostics: Mapping[str, Mapping[str, float]] = None) -> str:
  seeds = rows[0]["seeds"] if rows else []
  head = ["policy"] + [f"seed {s}: mean (95% CI over episodes)" for s in seeds] + [
      "mean over seeds", "SD over seeds", "range", "95% CI over seeds"]
  lines = [f"# {game}: the demo over {len(seeds)} training seeds", "",
           "Per seed: mean raw score of that run's evaluation episodes, 95% bootstrap CI over "
           "its episodes. Over seeds: the mean and sample standard deviation of the per-seed "
           "means, their range, and a 95% bootstrap CI of their mean (rliable).", "",
           "| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
  for r in rows:
    cells = [f"{float(x['mean']):.2f} ({float(x['ci_low']):.2f}, {float(x['ci_high']):.2f})"
             for x in r["seed_rows"]]
    ci = (f"({r['ci_low']:.2f}, {r['ci_high']:.2f})" if "ci_low" in r else "-")
    lines.append(f"| {r['policy']} | " + " | ".join(cells)
                 + f" | {r['mean']:.2f} | {r['sd']:.2f} | [{r['min']:.2f}, {r['max']:.2f}] "
                 f"| {ci} |")
  order = orderings(rows)
  if order:
    lines += ["", "Per-seed orderings of the learned policies:", ""] + [f"- {o}" for o in order]
  better = improvements(rows, reps=reps)
  if better:
    lines += ["", "Probability of improvement (rliable):", ""] + [f"- {b}" for b in better]
  lines += render_family(diagnostics or {})
  return "\n".join(lines) + "\n"


def write_report(cfg: DemoSeedsConfig, log: Callable[[str], None] = print,
                 reps: int = 2000) -> Dict[str, object]:
  """seeds.md and seeds.csv from the seeds' results.json (module docstring); returns
  {'rows': across_seeds(...), 'table': the markdown}."""
  per_seed = load_rows(cfg)
  with open(os.path.join(cfg.output_dir, "seeds.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["seed", "policy", "episodes", "mean", "ci_low", "ci_high"])
    for seed, rows in per_seed.items():
      for r in rows:
        w.writerow([seed, r["policy"], r["episodes"], r["mean"], r["ci_low"], r["ci_high"]])
  with open(os.path.join(cfg.output_dir, "seeds_results.json"), "w") as f:
    strict_json.dump(per_seed, f, indent=1)
  diagnostics = load_diagnostics(cfg)
  with open(os.path.join(cfg.output_dir, "seeds_diagnostics.json"), "w") as f:
    strict_json.dump(diagnostics, f, indent=1)
  rows = across_seeds(per_seed, reps=reps)
  text = render(rows, cfg.game, reps=reps, diagnostics=family_columns(diagnostics))
  with open(os.path.join(cfg.output_dir, "seeds.md"), "w") as f:
    f.write(text)
  log(text.rstrip())
  return {"rows": rows, "table": text}
