"""The development-data studies of the confidence family on Breakout: the quantized head
(docs/quantized_head.md), the matched learners (docs/matched_learners.md) and the informed
priors (docs/belief_prior.md, "On Breakout"): their records gathered into one JSON and their
tables rendered from it.

  .venv/bin/python tools/family_dev_report.py collect --q=RUN_Q --f=RUN_F --matched=DIR \
      [--benchmark=BENCH.json] --output=docs/results/family_dev_runs.json
  .venv/bin/python tools/family_dev_report.py add_benchmark --record=RECORD --name=NAME \
      BENCH.json        # a binaries/benchmark.py record, kept under 'benchmarks'
  .venv/bin/python tools/family_dev_report.py add_reproduction --record=... --c0=RUN --f=RUN \
      --eval_c0=HEADROOM_DIR --eval_f=HEADROOM_DIR --data_c0=DIR --data_f=DIR
  .venv/bin/python tools/family_dev_report.py render docs/results/family_dev_runs.json

`collect` keeps the per-episode scores, beliefs and probe disagreements the tables need (so
tests/test_results_tables.py recomputes every table from the JSON); `render` prints the tables.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

PRIORS = ("uniform", "heldout_mean", "heldout_sum")
FIRST_EPISODES = 3
DIAGNOSTICS = ("family_differs_any", "family_differs_ends", "lemma1_fraction",
               "count_auc_random_policy", "family_spread")
LEARNERS = ("L0", "L1", "L2", "L3", "L4", "L5", "L6", "L7")
FLOOR = "L7b"


def _load(path):
  with open(path) as f:
    return json.load(f)


def collect_run(root: str) -> dict:
  """A family run's headroom record, diagnostics and rebuilt priors."""
  summary = _load(os.path.join(root, "summary.json"))
  out = {"headroom": _load(os.path.join(root, "headroom", "headroom.json")),
         "diagnostics": {k: summary["diagnostics"][k] for k in DIAGNOSTICS},
         "phi_dead_fraction": summary["last_metrics"].get("phi_dead_fraction"),
         "fixed_delta": summary["fixed_delta"], "bellman_errors": summary["bellman_errors"],
         "belief_temperature": summary["belief_temperature"],
         "training_seconds": summary["phase_times"].get(
             "training " + summary["config"]["agent"]),
         "priors": {}}
  for path in sorted(glob.glob(os.path.join(root, "headroom", "rebuilt_prior_*.json"))):
    r = _load(path)
    out["priors"][r["belief_prior"]] = {
        k: r[k] for k in ("fixed_delta", "belief_temperature", "adaptive_scores",
                          "log_beliefs", "analysis")}
  return out


def collect(q: str, f: str, matched: str, benchmark: str = "") -> dict:
  scores = {}
  for path in sorted(glob.glob(os.path.join(matched, "scores", "*.json"))):
    scores[os.path.basename(path)[:-5]] = [e["raw_score"] for e in _load(path)["episodes"]]
  out = {"runs": {"F": collect_run(f), "Q": collect_run(q)},
         "matched": {"disagree": _load(os.path.join(matched, "disagree.json")),
                     "scores": scores}}
  if benchmark:
    out["benchmark"] = _load(benchmark)
  return out


def _ci(d, fmt="+.2f"):
  return f"{d['mean']:{fmt}} [{d['ci_low']:{fmt}}, {d['ci_high']:{fmt}}]"


def prior_rows(run: dict) -> list:
  """Per prior: first episodes, all episodes and against the uniform prior, each minus
  Fixed-CCVL (paired over the sequences), and the mean final belief mass on Fixed-CCVL's
  delta."""
  from ccvl_tf.evaluation import headroom  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.offline import headroom_eval  # pylint: disable=g-import-not-at-top
  h = run["headroom"]
  s = h["sequences"]
  grid = np.asarray(h["grid"])
  seq = lambda v: headroom.as_sequences(v, s)  # noqa: E731
  fixed = seq(h["policies"][f"delta={h['fixed_delta']:.4f}"])           # [S, L]
  uniform = seq(h["policies"][headroom_eval.ADAPTIVE])
  rows = []
  for name in PRIORS:
    if name == "uniform" and name not in run["priors"]:
      scores, beliefs = uniform, None
    elif name in run["priors"]:
      p = run["priors"][name]
      scores, beliefs = seq(p["adaptive_scores"]), p["log_beliefs"]
    else:
      continue
    k = int(np.argmin(np.abs(grid - h["fixed_delta"])))
    mass = None
    if beliefs is not None:
      last = [beliefs[(scores.shape[1] - 1) * s + j] for j in range(s)]  # each sequence's end
      probs = [np.exp(np.asarray(b) - np.logaddexp.reduce(np.asarray(b))) for b in last]
      mass = float(np.mean([pr[k] for pr in probs]))
    rows.append({
        "prior": name,
        "first_minus_fixed": headroom.paired_difference(scores[:, :FIRST_EPISODES],
                                                        fixed[:, :FIRST_EPISODES]),
        "all_minus_fixed": headroom.paired_difference(scores, fixed),
        "minus_uniform": headroom.paired_difference(scores, uniform),
        "mean": float(scores.mean()),
        "final_mass_on_fixed": mass})
  return rows


def first_episodes_verdict(row) -> str:
  d = row["first_minus_fixed"]
  if d["ci_low"] > 0:
    return "above"
  return "not below" if d["ci_high"] >= 0 else "below"


def render_priors(runs: dict) -> str:
  lines = ["| run | prior | adaptive (100 episodes) | episodes 1-3 - Fixed | all - Fixed | "
           "- uniform prior | final mass on Fixed's delta | first episodes |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
  for name, run in runs.items():
    for r in prior_rows(run):
      mass = "-" if r["final_mass_on_fixed"] is None else f"{r['final_mass_on_fixed']:.3f}"
      lines.append(f"| {name} | {r['prior']} | {r['mean']:.2f} | {_ci(r['first_minus_fixed'])} | "
                   f"{_ci(r['all_minus_fixed'])} | {_ci(r['minus_uniform'])} | {mass} | "
                   f"{first_episodes_verdict(r)} |")
  return "\n".join(lines) + "\n"


def render_diagnostics(runs: dict, c0: dict) -> str:
  lines = ["| run | family_differs_any | family_differs_ends | lemma1_fraction | "
           "count_auc_random_policy | phi_dead_fraction (last step) | Fixed-CCVL's delta |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
  rows = dict(runs)
  for name, r in {"C0 (headroom study)": {"diagnostics": c0["diagnostics"],
                                          "phi_dead_fraction": c0.get("phi_dead_fraction"),
                                          "fixed_delta": c0["headroom"]["fixed_delta"]},
                  **rows}.items():
    d = r["diagnostics"]
    phi = r.get("phi_dead_fraction")
    ends = d.get("family_differs_ends")
    lines.append(f"| {name} | {d['family_differs_any']:.4f} | "
                 f"{'-' if ends is None else format(ends, '.4f')} | {d['lemma1_fraction']:.3f} | "
                 f"{d['count_auc_random_policy']:.3f} | "
                 f"{'-' if phi is None else format(phi, '.3f')} | {r['fixed_delta']:.4f} |")
  return "\n".join(lines) + "\n"


def learner_scores(matched: dict, s: int = 10) -> dict:
  """Each learner's mean and 95% CI over its 100 episodes (score_stats over the sequences'
  means), the rule-2 difference L_0 - L_7 and the floor L_7' - L_7 (paired over sequences)."""
  from ccvl_tf.evaluation import headroom  # pylint: disable=g-import-not-at-top
  sc = {n: headroom.as_sequences(v, s) for n, v in matched["scores"].items()}
  out = {"means": {n: float(v.mean()) for n, v in sc.items()}}
  if "L0" in sc and "L7" in sc:
    out["L0_minus_L7"] = headroom.paired_difference(sc["L0"], sc["L7"])
  if FLOOR in sc and "L7" in sc:
    out["floor_L7b_minus_L7"] = headroom.paired_difference(sc[FLOOR], sc["L7"])
  return out


def render_matched(matched: dict, f_headroom: dict, alphas) -> str:
  d = matched["disagree"]["disagreement"]
  sc = learner_scores(matched, f_headroom["sequences"] if f_headroom else 10)
  members = (f_headroom or {}).get("member_means", [None] * len(LEARNERS))
  lines = ["| k | delta_k | F member score | F d(k, k+1) | CQL alpha a_k | L_k score | "
           "L d(k, k+1) | Q d(k, k+1) |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
  for k, (dk, _, a) in enumerate(alphas):
    nxt = k + 1 < len(LEARNERS)
    cell = lambda key: (_ci(d[key], ".4f") if key in d else "-")  # noqa: E731
    lines.append(
        f"| {k} | {dk:.4f} | {'-' if members[k] is None else format(members[k], '.2f')} | "
        f"{cell(f'F_{k}_{k + 1}') if nxt else ''} | {a:.3f} | "
        f"{format(sc['means'][LEARNERS[k]], '.2f') if LEARNERS[k] in sc['means'] else '-'} | "
        f"{cell(f'L_{k}_{k + 1}') if nxt else ''} | {cell(f'Q_{k}_{k + 1}') if nxt else ''} |")
  table = "\n".join(lines) + "\n"
  ends = ["| comparison | share of probe states | 95% CI |", "| --- | --- | --- |"]
  for key, label in (("F_0_7", "F: member 0 vs member 7"), ("F_any", "F: differs anywhere"),
                     ("Q_0_7", "Q: member 0 vs member 7"), ("Q_any", "Q: differs anywhere"),
                     ("L_0_7", "L_0 vs L_7 (alpha 6.154 vs 3.535, seed 100)"),
                     ("floor_7_7b", "floor: L_7 vs L_7' (alpha 3.535, seeds 100, 101)"),
                     ("rule1_L07_minus_floor", "rule 1: d(L_0, L_7) - floor"),
                     ("rule3_L07_minus_F07", "rule 3: d(L_0, L_7) - d(F_0, F_7)"),
                     ("L07_minus_Q07", "d(L_0, L_7) - d(Q_0, Q_7)")):
    if key in d:
      ends.append(f"| {label} | {d[key]['mean']:+.4f} | [{d[key]['ci_low']:+.4f}, "
                  f"{d[key]['ci_high']:+.4f}] |")
  out = table + "\n" + "\n".join(ends) + "\n"
  if "L0_minus_L7" in sc:
    out += f"\nRule 2, L_0 - L_7: {_ci(sc['L0_minus_L7'])}"
  if "floor_L7b_minus_L7" in sc:
    out += f"; the floor L_7' - L_7: {_ci(sc['floor_L7b_minus_L7'])}"
  return out + "\n"


def verdicts(matched: dict) -> dict:
  d = matched["disagree"]["disagreement"]
  sc = learner_scores(matched)
  rule1 = d["rule1_L07_minus_floor"]["ci_low"] > 0
  rule2 = None
  if "L0_minus_L7" in sc:
    x = sc["L0_minus_L7"]
    rule2 = bool(x["ci_low"] > 0 or x["ci_high"] < 0)
  if rule2 is None:
    verdict = "rule 2 not measured"
  elif not rule1 and not rule2:
    verdict = "the span"
  elif rule1 and d["rule3_L07_minus_F07"]["ci_low"] > 0:
    verdict = "the conditioning"
  else:
    verdict = "no verdict"
  return {"rule1": rule1, "rule2": rule2, "verdict": verdict}


def collect_wide(path: str, root: str) -> dict:
  """Adds run W (docs/wide_span.md) to the record at `path`: its headroom record and
  diagnostics, and its members' greedy actions on the matched study's probe states."""
  from tools import matched_learners  # pylint: disable=g-import-not-at-top
  data = _load(path)
  probe = matched_learners.probe_states(root)
  run = collect_run(root)
  run["greedy"] = matched_learners.greedy_actions(
      root, probe["observation"], matched_learners.grid()).tolist()
  data["wide"] = run
  return data


def cost_line(bench: dict, variant: str) -> str:
  """One variant's train step in a binaries/benchmark.py record: its median ms over rounds and
  its median paired ratio to DqnAgent with the range of the paired ratios."""
  v = bench["variants"][variant]
  ratios = v["paired_ratios"]["dqn"] if isinstance(v["paired_ratios"], dict) else v["paired_ratios"]
  return (f"`{variant}` {v['train_step_ms']:.1f} ms, {v['ratio_over_dqn']:.2f}x DqnAgent "
          f"({min(ratios):.2f}-{max(ratios):.2f})")


def add_benchmark(path: str, name: str, bench_path: str) -> dict:
  """The record at `path` with the benchmark record `bench_path` under data['benchmarks'][name]."""
  data = _load(path)
  data.setdefault("benchmarks", {})[name] = _load(bench_path)
  return data


def _same_files(a: str, b: str) -> dict:
  """{file name: byte-identical?} over the data files of two dataset directories (COMPLETE, a
  marker holding its write time, left out)."""
  import filecmp  # pylint: disable=g-import-not-at-top
  names = sorted(n for n in os.listdir(a) if n != "COMPLETE")
  return {n: os.path.isfile(os.path.join(b, n)) and filecmp.cmp(
      os.path.join(a, n), os.path.join(b, n), shallow=False) for n in names}


def add_reproduction(path: str, c0: str, f: str, eval_c0: str, eval_f: str, data_c0: str,
                     data_f: str) -> dict:
  """The record at `path` with the check of whether C0's code trains F's network: the two
  runs' networks compared tensor by tensor (tools/same_weights.py), their Fixed-CCVL deltas,
  the per-episode scores of the same headroom episodes played by each commit's evaluator, and
  the datasets' files compared byte by byte; under data['reproduction']."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tools import same_weights  # pylint: disable=g-import-not-at-top
  data = _load(path)

  def newest(root):
    return tf.train.latest_checkpoint(os.path.join(root, "checkpoints"))

  nets = [same_weights.network_tensors(tf.train.load_checkpoint(newest(r))) for r in (c0, f)]
  weights = {}
  for net in same_weights.NETWORKS:
    r = same_weights.compare(nets[0][net], nets[1][net])
    weights[net] = {"compared": r["compared"], "equal": r["equal"],
                    "max_abs_diff": r["max_abs_diff"],
                    "only_c0": [list(x.shape) for x in r["only_a"]],
                    "only_f": [x.ravel().tolist() for x in r["only_b"]]}
  data["reproduction"] = {
      "checkpoints": [os.path.basename(newest(r)) for r in (c0, f)],
      "weights": weights,
      "fixed_delta": {"c0_code": _load(os.path.join(c0, "summary.json"))["fixed_delta"],
                      "f": _load(os.path.join(f, "summary.json"))["fixed_delta"]},
      "episodes": {name: _load(os.path.join(d, "headroom.json"))["policies"]
                   for name, d in (("c0_code", eval_c0), ("f", eval_f))},
      "dataset_files_identical": _same_files(data_c0, data_f)}
  return data


def reproduction_verdict(rep: dict) -> dict:
  """What the reproduction record says: the networks bit-identical (every paired tensor of both
  networks), the Fixed-CCVL deltas equal, the evaluators' episodes equal policy by policy, the
  datasets byte-identical."""
  eps = rep["episodes"]
  return {"same_weights": all(w["equal"] == w["compared"] for w in rep["weights"].values()),
          "same_fixed_delta": rep["fixed_delta"]["c0_code"] == rep["fixed_delta"]["f"],
          "same_episodes": sorted(eps["c0_code"]) == sorted(eps["f"]) and all(
              eps["c0_code"][k] == eps["f"][k] for k in eps["f"]),
          "policies": len(eps["f"]), "episodes_each": len(next(iter(eps["f"].values()))),
          "same_data": all(rep["dataset_files_identical"].values()),
          "data_files": len(rep["dataset_files_identical"])}


def wide_rules(data: dict) -> dict:
  """docs/wide_span.md's rules 1-4 from the record: W's headroom numbers, the paired difference
  of the shares of probe states where some member's action differs (W minus F), and W's member
  at 0.9375 minus its member at 0.0625 over the sequences."""
  from ccvl_tf.evaluation import headroom  # pylint: disable=g-import-not-at-top
  from tools import matched_learners  # pylint: disable=g-import-not-at-top
  w, h = data["wide"], data["wide"]["headroom"]
  any_w = matched_learners.per_state_disagreements(
      {"F": w["greedy"], "L": data["matched"]["disagree"]["greedy"]["L"],
       "floor": data["matched"]["disagree"]["greedy"]["floor"]})["F_any"]
  any_f = matched_learners.per_state_disagreements(data["matched"]["disagree"]["greedy"])["F_any"]
  stats = matched_learners.bootstrap_means({"W_any": any_w, "F_any": any_f,
                                            "W_minus_F": any_w - any_f})
  s = h["sequences"]
  top = headroom.as_sequences(h["policies"][f"delta={h['grid'][-1]:.4f}"], s)
  low = headroom.as_sequences(h["policies"][f"delta={h['grid'][0]:.4f}"], s)
  return {"rule1": h["split_half_oracle_minus_fixed"]["ci_low"] > 0,
          "rule2": h["adaptive_minus_fixed"]["ci_low"] > 0,
          "differs_any": {k: {"mean": m, "ci_low": lo, "ci_high": hi}
                          for k, (m, lo, hi) in stats.items()},
          "top_minus_bottom": headroom.paired_difference(top, low)}


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  sub = parser.add_subparsers(dest="cmd", required=True)
  c = sub.add_parser("collect")
  c.add_argument("--q", required=True)
  c.add_argument("--f", required=True)
  c.add_argument("--matched", required=True)
  c.add_argument("--benchmark", default="")
  c.add_argument("--output", required=True)
  w = sub.add_parser("collect_wide")
  w.add_argument("--w", required=True)
  w.add_argument("--record", required=True)
  b = sub.add_parser("add_benchmark")
  b.add_argument("--record", required=True)
  b.add_argument("--name", required=True)
  b.add_argument("bench")
  p = sub.add_parser("add_reproduction")
  p.add_argument("--record", required=True)
  for flag in ("c0", "f", "eval_c0", "eval_f", "data_c0", "data_f"):
    p.add_argument(f"--{flag}", required=True)
  r = sub.add_parser("render")
  r.add_argument("path")
  args = parser.parse_args(argv)
  if args.cmd == "collect":
    out = collect(args.q, args.f, args.matched, args.benchmark)
    with open(args.output, "w") as f:
      json.dump(out, f)
    return
  if args.cmd in ("collect_wide", "add_benchmark", "add_reproduction"):
    out = (collect_wide(args.record, args.w) if args.cmd == "collect_wide" else
           add_benchmark(args.record, args.name, args.bench) if args.cmd == "add_benchmark" else
           add_reproduction(args.record, args.c0, args.f, args.eval_c0, args.eval_f,
                            args.data_c0, args.data_f))
    with open(args.record, "w") as f:
      json.dump(out, f)
    return
  from ccvl_tf.experiments.offline import headroom_eval  # pylint: disable=g-import-not-at-top
  from tools import matched_learners  # pylint: disable=g-import-not-at-top
  data = _load(args.path)
  c0 = _load(os.path.join(ROOT, "docs", "results", "factorial_runs.json"))["C0"]
  runs = data["runs"]
  print(headroom_eval.render_runs({"C0 (headroom study)": c0["headroom"],
                                   **{n: r["headroom"] for n, r in runs.items()}}))
  print(render_diagnostics(runs, c0))
  print(render_priors(runs))
  print(render_matched(data["matched"], runs["F"]["headroom"], matched_learners.matched_alphas()))
  print(verdicts(data["matched"]))
  if "wide" in data:
    print(headroom_eval.render_runs({"F": runs["F"]["headroom"],
                                     "W": data["wide"]["headroom"]}))
    print(render_diagnostics({"F": runs["F"], "W": data["wide"]}, c0))
    print(json.dumps(wide_rules(data), indent=1))
  for name, bench in data.get("benchmarks", {}).items():
    print(name + ": " + "; ".join(cost_line(bench, v) for v in (
        "ccvl_default", "ccvl_quantized_head", "ccvl_pairs_at_delta") if v in bench["variants"]))
  if "reproduction" in data:
    print(json.dumps(reproduction_verdict(data["reproduction"])))


if __name__ == "__main__":
  main()
