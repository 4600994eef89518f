"""The reported seeds' table from their headroom evaluations (docs/five_seeds.md): every policy
of every training seed on the same episodes, with the oracle rows beside them.

`report(results)` takes {seed: headroom.json} (binaries/headroom.py's output of each seed's
run) and returns the markdown page section; `seed_rows` the per-seed rows (policy, mean, 95%
bootstrap CI over its episodes) that demo_seeds.across_seeds aggregates over seeds. The rows:
BC and CQL (the run's references), CCVL (adaptive), Fixed-CCVL (the grid member at the run's
delta), the oracle in hindsight (the member of highest mean, biased upward by that choice) and
the split-half oracle (the member chosen on one half of the sequences played on the other:
its episodes are the other half's, so its CI is over the same number of episodes).
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Sequence

import numpy as np

from ccvl_tf.evaluation import headroom
from ccvl_tf.evaluation import score_stats
from ccvl_tf.experiments.offline import demo_seeds

ADAPTIVE = "CCVL (adaptive)"
FIXED = "Fixed-CCVL"
ORACLE = "oracle in hindsight"
SPLIT = "split-half oracle"
# headroom.json's reference names (the run's --reference_agents) as the table shows them.
REFERENCE_NAMES = {"bc": "BC", "cql": "CQL", "BC": "BC", "CQL": "CQL"}
ROW_ORDER = ("BC", "CQL", ADAPTIVE, FIXED, ORACLE, SPLIT)


def member_name(delta: float) -> str:
  """headroom_eval's name of the grid member at `delta`."""
  return f"delta={float(delta):.4f}"


def _row(name: str, scores, reps: int, seed: int = 0) -> Dict[str, object]:
  x = np.asarray(scores, np.float64).reshape(-1)
  agg = score_stats.aggregate_scores(x[:, None], reps=reps, seed=seed)["mean"]
  return {"policy": name, "mean": float(x.mean()), "ci_low": float(agg.ci_low),
          "ci_high": float(agg.ci_high), "episodes": int(x.size)}


def policy_sequences(result: Mapping[str, object]) -> Dict[str, np.ndarray]:
  """{row name: [S, L] scores} of one seed's headroom.json (ROW_ORDER's rows it has)."""
  s = int(result["sequences"])
  pol = result["policies"]
  seq = lambda name: headroom.as_sequences(pol[name], s)  # noqa: E731
  grid = [float(d) for d in result["grid"]]
  members = np.stack([seq(member_name(d)) for d in grid])           # [K, S, L]
  out = {}
  for ref, shown in REFERENCE_NAMES.items():
    if ref in pol and shown not in out:
      out[shown] = seq(ref)
  out[ADAPTIVE] = seq(ADAPTIVE)
  out[FIXED] = seq(member_name(result["fixed_delta"]))
  out[ORACLE] = members[int(np.argmax(members.mean(axis=(1, 2))))]
  split = headroom.split_half_oracle(members)
  half = s // 2
  out[SPLIT] = np.concatenate([members[split["second_choice"], :half],
                               members[split["first_choice"], half:]])
  return {n: out[n] for n in ROW_ORDER if n in out}


def seed_rows(result: Mapping[str, object], reps: int = 2000) -> List[Dict[str, object]]:
  """One seed's rows: each policy's mean and 95% bootstrap CI over its episodes."""
  return [_row(name, x, reps) for name, x in policy_sequences(result).items()]


def pooled_difference(results: Mapping[str, Mapping[str, object]], a: str, b: str,
                      reps: int = 2000) -> Dict[str, float]:
  """a minus b over every seed's sequences pooled ([seeds x S, L]): the mean with a 95%
  bootstrap CI over the (seed, sequence) units (headroom.paired_difference)."""
  xs = [policy_sequences(r) for r in results.values()]
  return headroom.paired_difference(np.concatenate([x[a] for x in xs]),
                                    np.concatenate([x[b] for x in xs]), reps=reps)


def report(results: Mapping[str, Mapping[str, object]], game: str = "Breakout",
           reps: int = 2000) -> str:
  """The page section: demo_seeds' across-seed table of the rows, P(adaptive > Fixed-CCVL) over
  the seeds' means, the pooled paired differences, and per seed Fixed-CCVL's and the
  oracle's delta, the grid's spread and the belief's settling."""
  per_seed = {str(k): seed_rows(r, reps) for k, r in results.items()}
  rows = demo_seeds.across_seeds(per_seed, reps=reps)
  text = demo_seeds.render(rows, game, reps=reps)
  lines = ["", "Paired differences pooled over the seeds' sequences (95% bootstrap CI over "
           f"the {sum(int(r['sequences']) for r in results.values())} (seed, sequence) units):",
           ""]
  for a, b in ((ADAPTIVE, FIXED), (ADAPTIVE, "CQL"), (SPLIT, FIXED), (ORACLE, FIXED)):
    if all(a in policy_sequences(r) and b in policy_sequences(r) for r in results.values()):
      d = pooled_difference(results, a, b, reps)
      lines.append(f"- {a} - {b}: {d['mean']:+.2f} ({d['ci_low']:+.2f}, {d['ci_high']:+.2f})")
  lines += ["", "| seed | Fixed-CCVL delta | oracle delta | grid spread | belief temperature "
            "| sequences settled (entropy < 0.1 log K) |", "| --- | --- | --- | --- | --- | --- |"]
  for k, r in results.items():
    belief = r.get("belief") or {}
    settled = (f"{belief['settled_sequences']} of {r['sequences']} (after "
               f"{', '.join('-' if e is None else str(e) for e in belief['settle_episode'])})"
               if belief else "-")
    t = r.get("belief_temperature")
    lines.append(f"| {k} | {float(r['fixed_delta']):.4f} | {float(r['oracle_delta']):.4f} | "
                 f"{float(r['spread']):.2f} | {'-' if t is None else f'{float(t):.4g}'} | "
                 f"{settled} |")
  return text + "\n".join(lines) + "\n"


def compact(result: Mapping[str, object]) -> Dict[str, object]:
  """What the page is recomputed from (docs/results/five_seeds_runs.json): headroom.json's
  per-episode scores and the fields `report` reads."""
  keys = ("grid", "sequences", "episodes_per_sequence", "fixed_delta", "oracle_delta",
          "spread", "belief_temperature", "belief", "policies", "step", "checkpoint", "seed",
          "epsilon", "max_steps")
  return {k: result[k] for k in keys if k in result}


def check_same_episodes(results: Mapping[str, Mapping[str, object]]) -> Sequence[str]:
  """The seeds whose evaluation settings differ from the first's (sequences, episodes per
  sequence, the episodes' seed): a table over seeds needs one set of episodes."""
  first = next(iter(results.values()))
  keys = ("sequences", "episodes_per_sequence", "seed", "epsilon", "max_steps")
  return [k for k, r in results.items() if any(r.get(x) != first.get(x) for x in keys)]


def summary_table(results: Mapping[str, Mapping[str, object]], reps: int = 2000) -> str:
  """README's table: per row the mean over seeds, SD, range, 95% CI over seeds and the
  per-seed means (demo_seeds.across_seeds of `seed_rows`)."""
  per_seed = {str(k): seed_rows(r, reps) for k, r in results.items()}
  rows = demo_seeds.across_seeds(per_seed, reps=reps)
  seeds = list(per_seed)
  lines = [f"| policy | mean over seeds | SD over seeds | range | 95% CI over seeds | per-seed "
           f"means (seeds {seeds[0]}-{seeds[-1]}) |", "| --- | --- | --- | --- | --- | --- |"]
  for r in rows:
    ci = f"({r['ci_low']:.2f}, {r['ci_high']:.2f})" if "ci_low" in r else "-"
    lines.append(f"| {r['policy']} | {r['mean']:.2f} | {r['sd']:.2f} | [{r['min']:.2f}, "
                 f"{r['max']:.2f}] | {ci} | "
                 + ", ".join(f"{float(x['mean']):.1f}" for x in r["seed_rows"]) + " |")
  return "\n".join(lines) + "\n"
