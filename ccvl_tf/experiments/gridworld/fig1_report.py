"""The numbers docs/results/gridworld.md quotes for the layout 'fig1', recomputed from the
committed per-dataset rows (the runner's alpha_sweep.csv, oracle.csv, routes.csv and
delta_adaptation.csv, copied to docs/gridworld_fig1_*.csv).

  * `sweep_table`: Fig. 1 left, normalized return at p = 0.15 against alpha, mean over datasets
    with its 95% bootstrap CI, for CQL, Fixed-CCVL and CCVL (adaptive) per reading, and CCVL
    scored exactly: the mean over its evaluation episodes of the exact expected return of the
    delta each episode acted with (no sampling noise from the dynamics).
  * `oracle_table`: per reading and alpha, on how many datasets some grid delta's greedy route
    is the short (evaluation-optimal) one, on how many CCVL acted with such a delta in one of
    its evaluation episodes, and the mean over datasets of the best member's return.
  * `delta_per_episode`: Fig. 1 right, the mean delta over datasets of each evaluation episode.
  * `cql_routes`: Fig. 2, CQL's greedy route per alpha (datasets per route).
"""
from __future__ import annotations

import csv
from collections import defaultdict

import numpy as np

BOOTSTRAP_REPS = 2000


def read_rows(path: str) -> list:
  with open(path, newline="") as f:
    return list(csv.DictReader(f))


def mean_ci(values, reps: int = BOOTSTRAP_REPS, seed: int = 0) -> tuple:
  """(mean, low, high): the 95% percentile bootstrap CI of the mean of `values` (datasets
  resampled with replacement, `reps` times, numpy's default_rng(seed))."""
  v = np.asarray(values, np.float64)
  idx = np.random.default_rng(seed).integers(0, len(v), size=(reps, len(v)))
  means = v[idx].mean(axis=1)
  return float(v.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def fmt_ci(values) -> str:
  m, lo, hi = mean_ci(values)
  return f"{m:.3f} [{lo:.3f}, {hi:.3f}]"


def exact_ccvl_scores(oracle_rows, route_rows) -> dict:
  """{(reading, alpha, seed): mean over CCVL's evaluation episodes of the exact normalized
  return of the grid delta each episode acted with}."""
  exact = {(r["reading"], float(r["alpha"]), int(r["seed"]), float(r["delta"])):
           float(r["normalized_return"]) for r in oracle_rows if r["method"] == "CCVL"}
  per = defaultdict(list)
  for r in route_rows:
    key = (r["reading"], float(r["alpha"]), int(r["seed"]))
    per[key].append(exact[key + (float(r["delta"]),)])
  return {k: float(np.mean(v)) for k, v in per.items()}


def paired_table(sweep_rows, reading: str) -> list:
  """Markdown lines: per alpha, Fixed-CCVL and CCVL (adaptive) in `reading` minus CQL on the
  same datasets, the mean difference with its 95% bootstrap CI over datasets (mean_ci)."""
  by = defaultdict(dict)  # (method, alpha) -> {seed: score}
  for r in sweep_rows:
    if r["method"] == "CQL" or r["reading"] == reading:
      by[(r["method"], float(r["alpha"]))][int(r["seed"])] = float(r["normalized_return"])
  alphas = sorted({a for m, a in by if m == "CQL"})
  lines = ["| method - CQL | " + " | ".join(f"alpha={a:g}" for a in alphas) + " |",
           "|---|" + "---|" * len(alphas)]
  for method in ("Fixed-CCVL", "CCVL"):
    cells = []
    for a in alphas:
      seeds = sorted(by[("CQL", a)])
      diff = [by[(method, a)][s] - by[("CQL", a)][s] for s in seeds]
      cells.append(fmt_ci(diff))
    lines.append(f"| {method} [{reading}] | " + " | ".join(cells) + " |")
  return lines


# docs/gridworld_reading.md's rule: the alphas it judges, its tie margin and its tie order.
CHOICE_ALPHAS = (0.05, 0.1, 0.2, 0.5, 1.0)
CHOICE_TIE = 0.01
CHOICE_ORDER = ("bonus", "logsumexp+monotone", "bonus+logsumexp")


def reading_choice(sweep_rows, readings=CHOICE_ORDER) -> tuple:
  """(the chosen default reading, {reading: {'qualifies', 'mean', method: (alphas above,
  never below)}}) by docs/gridworld_reading.md's rule on `sweep_rows`: a reading qualifies
  when Fixed-CCVL's and CCVL's paired differences with CQL have their CI low above 0 at 3 or
  more of CHOICE_ALPHAS and their CI high at least 0 at every one; the qualifying reading of
  the highest mean difference wins, a reading within CHOICE_TIE of it winning in CHOICE_ORDER;
  none: 'bonus'."""
  out = {}
  for reading in readings:
    by = defaultdict(dict)
    for r in sweep_rows:
      if r["method"] == "CQL" or r["reading"] == reading:
        by[(r["method"], float(r["alpha"]))][int(r["seed"])] = float(r["normalized_return"])
    info, means, ok = {}, [], True
    for method in ("Fixed-CCVL", "CCVL"):
      above, never_below = 0, True
      for a in CHOICE_ALPHAS:
        seeds = sorted(by[("CQL", a)])
        mean, lo, hi = mean_ci([by[(method, a)][s] - by[("CQL", a)][s] for s in seeds])
        means.append(mean)
        above += lo > 0
        never_below &= hi >= 0
      info[method] = (above, never_below)
      ok &= above >= 3 and never_below
    out[reading] = dict(info, qualifies=bool(ok), mean=float(np.mean(means)))
  qualified = [r for r in readings if out[r]["qualifies"]]
  if not qualified:
    return "bonus", out
  best = max(out[r]["mean"] for r in qualified)
  return [r for r in CHOICE_ORDER if r in qualified
          and out[r]["mean"] >= best - CHOICE_TIE][0], out


def sweep_table(sweep_rows, oracle_rows, route_rows, readings) -> list:
  """Markdown lines of Fig. 1 left's table (one row per method, one column per alpha)."""
  scores = defaultdict(list)  # (label, alpha) -> per-dataset scores in seed order
  for r in sorted(sweep_rows, key=lambda r: int(r["seed"])):
    label = f"{r['method']} [{r['reading']}]" if r["reading"] else r["method"]
    scores[(label, float(r["alpha"]))].append(float(r["normalized_return"]))
  for (reading, alpha, _), v in sorted(exact_ccvl_scores(oracle_rows, route_rows).items(),
                                       key=lambda kv: kv[0][2]):
    scores[(f"CCVL [{reading}], scored exactly", alpha)].append(v)
  alphas = sorted({a for _, a in scores})
  labels = ["CQL"]
  for reading in readings:
    labels += [f"Fixed-CCVL [{reading}]", f"CCVL [{reading}]", f"CCVL [{reading}], scored exactly"]
  labels += [l for l in sorted({l for l, _ in scores}) if l not in labels]
  lines = ["| method | " + " | ".join(f"alpha={a:g}" for a in alphas) + " |",
           "|---|" + "---|" * len(alphas)]
  for label in labels:
    if not any(scores.get((label, a)) for a in alphas):
      continue  # e.g. no exact scores of a reading the oracle was not written for
    lines.append(f"| {label} | " + " | ".join(fmt_ci(scores[(label, a)]) for a in alphas) + " |")
  return lines


def oracle_table(oracle_rows, route_rows, readings) -> list:
  """Markdown lines of the oracle's table: per reading and alpha, datasets with a short member
  in the family / datasets where CCVL acted with one / mean best member return / mean share of
  short members."""
  fam = defaultdict(list)
  for r in oracle_rows:
    if r["method"] == "CCVL":
      fam[(r["reading"], float(r["alpha"]), int(r["seed"]))].append(r)
  acted_short = defaultdict(bool)
  for r in route_rows:
    acted_short[(r["reading"], float(r["alpha"]), int(r["seed"]))] |= r["route"] == "short"
  lines = ["| reading | alpha | datasets: family has the short route | datasets: CCVL acted with "
           "it | best member, mean | share of short members, mean |", "|---|---|---|---|---|---|"]
  for reading in readings:
    for alpha in sorted({k[1] for k in fam if k[0] == reading}):
      keys = sorted(k for k in fam if k[:2] == (reading, alpha))
      has = [any(m["route"] == "short" for m in fam[k]) for k in keys]
      reached = [acted_short[k] for k in keys]
      best = [max(float(m["normalized_return"]) for m in fam[k]) for k in keys]
      share = [np.mean([m["route"] == "short" for m in fam[k]]) for k in keys]
      lines.append(f"| {reading} | {alpha:g} | {sum(has)}/{len(keys)} | {sum(reached)}/{len(keys)} "
                   f"| {np.mean(best):.3f} | {np.mean(share):.2f} |")
  return lines


def delta_per_episode(rows, reading, alpha=None) -> list:
  """Mean over datasets of the delta of each evaluation episode (Fig. 1 right), from
  delta_adaptation rows (one alpha) or routes rows filtered to `alpha`."""
  per = defaultdict(list)
  for r in rows:
    if r["reading"] == reading and (alpha is None or float(r["alpha"]) == alpha):
      per[int(r["episode"])].append(float(r["delta"]))
  return [round(float(np.mean(per[e])), 2) for e in sorted(per)]


def cql_routes(oracle_rows) -> dict:
  """{alpha: {route: datasets}} of CQL's greedy route."""
  out = defaultdict(lambda: defaultdict(int))
  for r in oracle_rows:
    if r["method"] == "CQL":
      out[float(r["alpha"])][r["route"]] += 1
  return {a: dict(v) for a, v in sorted(out.items())}


def per_dataset_table(sweep_rows, oracle_rows, route_rows, reading: str, alpha: float) -> list:
  """Markdown lines, one per dataset at `alpha`: CQL's return and route, Fixed-CCVL's and
  CCVL's (sampled and scored exactly) in `reading`, the family's short members and the
  episodes CCVL acted with one."""
  val = {(r["method"], r["reading"], int(r["seed"])): float(r["normalized_return"])
         for r in sweep_rows if float(r["alpha"]) == alpha}
  exact = exact_ccvl_scores(oracle_rows, route_rows)
  cql_route = {int(r["seed"]): r["route"] for r in oracle_rows
               if r["method"] == "CQL" and float(r["alpha"]) == alpha}
  short = defaultdict(list)
  for r in oracle_rows:
    if r["method"] == "CCVL" and r["reading"] == reading and float(r["alpha"]) == alpha \
        and r["route"] == "short":
      short[int(r["seed"])].append(float(r["delta"]))
  acted = defaultdict(int)
  for r in route_rows:
    if r["reading"] == reading and float(r["alpha"]) == alpha and r["route"] == "short":
      acted[int(r["seed"])] += 1
  lines = ["| dataset | CQL | CQL route | Fixed-CCVL | CCVL | CCVL scored exactly | short members "
           "(delta) | episodes acted with one |", "|---|---|---|---|---|---|---|---|"]
  for seed in sorted(cql_route):
    members = ", ".join(f"{d:g}" for d in short[seed]) or "none"
    lines.append(f"| {seed} | {val[('CQL', '', seed)]:.3f} | {cql_route[seed]} | "
                 f"{val[('Fixed-CCVL', reading, seed)]:.3f} | {val[('CCVL', reading, seed)]:.3f} | "
                 f"{exact[(reading, alpha, seed)]:.3f} | {members} | {acted[seed]}/10 |")
  return lines


def belief_reach(oracle_rows, route_rows, reading: str) -> dict:
  """{alpha: (datasets with a short member, mean final belief mass on the short members, mean
  share of evaluation episodes acted with one)}, the means over the datasets that have one."""
  mass, has = defaultdict(float), defaultdict(bool)
  for r in oracle_rows:
    if r["method"] == "CCVL" and r["reading"] == reading and r["route"] == "short":
      key = (float(r["alpha"]), int(r["seed"]))
      has[key] = True
      mass[key] += float(r["final_belief"])
  acted = defaultdict(list)
  for r in route_rows:
    if r["reading"] == reading:
      acted[(float(r["alpha"]), int(r["seed"]))].append(r["route"] == "short")
  out = {}
  for alpha in sorted({k[0] for k in acted}):
    keys = [k for k in acted if k[0] == alpha and has[k]]
    out[alpha] = (len(keys), float(np.mean([mass[k] for k in keys])) if keys else float("nan"),
                  float(np.mean([np.mean(acted[k]) for k in keys])) if keys else float("nan"))
  return out


def neural_table(neural_rows) -> list:
  """Markdown lines, one per (reading, alpha, dataset) of tools/gridworld_fig1_neural.py's rows:
  the short members of the trained network and of the exact family (deltas of the grid), the
  best member's normalized return of each, and the greedy agreement over visited states."""
  by = defaultdict(list)
  for r in neural_rows:
    by[(r["reading"], float(r["alpha"]), int(r["seed"]))].append(r)
  lines = ["| reading | alpha | dataset | short members: network | short members: exact | best "
           "member: network | best member: exact | agreement |", "|---|---|---|---|---|---|---|---|"]
  for (reading, alpha, seed), rs in by.items():
    net = sum(r["neural_route"] == "short" for r in rs)
    ex = sum(r["exact_route"] == "short" for r in rs)
    best_net = max(float(r["neural_normalized_return"]) for r in rs)
    best_ex = max(float(r["exact_normalized_return"]) for r in rs)
    lines.append(f"| {reading} | {alpha:g} | {seed} | {net}/{len(rs)} | {ex}/{len(rs)} | "
                 f"{best_net:.3f} | {best_ex:.3f} | {float(rs[0]['agreement_with_exact']):.2f} |")
  return lines
