"""Matched learners (docs/matched_learners.md): the CQL alphas matched to the members' weights,
and the greedy-action disagreements of the family's members and of the learners on one fixed
set of probe states.

  .venv/bin/python tools/matched_learners.py alphas
  .venv/bin/python tools/matched_learners.py disagree --family=F --quantized=Q \
      --learners=L0,...,L7 --floor=L7b --output=OUT.json
  .venv/bin/python tools/matched_learners.py score --episodes_of=RUN --output_dir=OUT \
      --policies=L0=RUN_L0,L7=RUN_L7,...

`alphas` prints the table of the page (E w(delta_k) by a one-dimensional integral). `disagree`
restores each run's newest checkpoint (runner.saved_plan / restore_finished, the learner of any
--agent), takes P probe transitions of the family's dataset (ablation.probe_batch) and writes
every disagreement the page reports with its bootstrap CI over the states. `score` plays each
run's exported policy on the episodes binaries/headroom.py plays for a reference of the run
--episodes_of (its seed's headroom_eval stream, 10 slots x 10 episodes, its epsilon and step
cap; the same atari_vector.evaluate_atari call), one JSON per policy in headroom's episode
format under OUT (a finished one is skipped).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

CCVL_ALPHA = 3.0
NUM_GRID = 8
PROBE_STATES, PROBE_SEED = 2048, 2026
BOOTSTRAP_REPS, BOOTSTRAP_SEED = 10_000, 0


def grid(k: int = NUM_GRID) -> np.ndarray:
  """The policies' grid deltas (i + 0.5) / K."""
  return (np.arange(k) + 0.5) / k


def expected_weight(delta: float) -> float:
  """E[max_{j=1,2} sqrt(log(1/delta_{j,1}))] with delta_{j,1} ~ U(0, delta):
  E[sqrt(log(1/delta) + X)], X the larger of two Exp(1) draws (density 2 e^-x (1 - e^-x)),
  by the trapezoid rule on [0, 60] (the tail beyond is below 1e-24)."""
  x = np.linspace(0.0, 60.0, 600_001)
  f = np.sqrt(math.log(1.0 / delta) + x) * 2.0 * np.exp(-x) * (1.0 - np.exp(-x))
  return float(np.sum((f[1:] + f[:-1]) * 0.5 * np.diff(x)))


def matched_alphas(alpha: float = CCVL_ALPHA, k: int = NUM_GRID):
  """[(delta_k, E w(delta_k), alpha E w(delta_k))] over the grid."""
  return [(float(d), expected_weight(d), alpha * expected_weight(d)) for d in grid(k)]


def disagreement(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """Per state 1.0 where the greedy actions differ: [P]."""
  return (np.asarray(a) != np.asarray(b)).astype(np.float64)


def bootstrap_means(per_state, reps: int = BOOTSTRAP_REPS, seed: int = BOOTSTRAP_SEED):
  """{name: (mean, low, high)}: each [P] series' mean and 95% percentile CI, all resampled
  with the same state indices (so a difference of two series is paired)."""
  names = list(per_state)
  p = len(per_state[names[0]])
  idx = np.random.default_rng(seed).integers(0, p, size=(reps, p))
  out = {}
  for n in names:
    v = np.asarray(per_state[n], np.float64)
    boot = v[idx].mean(axis=1)
    out[n] = (float(v.mean()), float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5)))
  return out


def greedy_actions(root_dir: str, observations, deltas) -> np.ndarray:
  """The greedy actions [P, K] of a run's restored network at `deltas` (argmax of Q, ties to
  the lowest index)."""
  from ccvl_tf.evaluation import policy_diagnostics  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.offline import runner  # pylint: disable=g-import-not-at-top
  plan = runner.saved_plan(root_dir, None)
  setup, _ = runner.restore_finished(plan, lambda s: None, "the probe", "matched_learners")
  q = policy_diagnostics.q_at_deltas(
      setup.agent.q_network, observations, np.asarray(deltas, np.float32), 256)  # [P, K, A]
  return np.argmax(q, axis=-1)


def probe_states(root_dir: str):
  """PROBE_STATES transitions of a run's dataset (observation [P, ...], action [P])."""
  from ccvl_tf.experiments.offline import ablation, runner  # pylint: disable=g-import-not-at-top
  plan = runner.saved_plan(root_dir, None)
  setup = runner.setup(plan, lambda s: None, collect=False)
  return ablation.probe_batch(setup.store, PROBE_STATES, PROBE_SEED)


def per_state_disagreements(greedy) -> dict:
  """{name: [P] 0/1}: every disagreement the page reports, from the greedy actions
  {'F': [P, K], 'Q': [P, K] (either may be absent), 'L': K x [P], 'floor': [P]}."""
  per_state, fam = {}, {}
  for name in ("F", "Q"):
    if greedy.get(name) is not None:
      a = fam[name] = np.asarray(greedy[name])                           # [P, K]
      for k in range(a.shape[1] - 1):
        per_state[f"{name}_{k}_{k + 1}"] = disagreement(a[:, k], a[:, k + 1])
      per_state[f"{name}_0_7"] = disagreement(a[:, 0], a[:, -1])
      per_state[f"{name}_any"] = np.any(a != a[:, :1], axis=1).astype(np.float64)
  lact = [np.asarray(x) for x in greedy["L"]]                            # K x [P]
  for k in range(len(lact) - 1):
    per_state[f"L_{k}_{k + 1}"] = disagreement(lact[k], lact[k + 1])
  per_state["L_0_7"] = disagreement(lact[0], lact[-1])
  per_state["floor_7_7b"] = disagreement(lact[-1], np.asarray(greedy["floor"]))
  per_state["rule1_L07_minus_floor"] = per_state["L_0_7"] - per_state["floor_7_7b"]
  if "F" in fam:
    per_state["rule3_L07_minus_F07"] = per_state["L_0_7"] - per_state["F_0_7"]
  if "Q" in fam:
    per_state["L07_minus_Q07"] = per_state["L_0_7"] - per_state["Q_0_7"]
  return per_state


def summarize(greedy) -> dict:
  """{name: {'mean', 'ci_low', 'ci_high'}} of per_state_disagreements (paired bootstrap)."""
  stats = bootstrap_means(per_state_disagreements(greedy))
  return {k: {"mean": m, "ci_low": lo, "ci_high": hi} for k, (m, lo, hi) in stats.items()}


def disagree(family: str, quantized: str, learners, floor: str) -> dict:
  probe = probe_states(family)
  obs = probe["observation"]
  greedy = {"F": greedy_actions(family, obs, grid()),
            "Q": greedy_actions(quantized, obs, grid()) if quantized else None,
            "L": [greedy_actions(r, obs, [0.5])[:, 0] for r in learners],
            "floor": greedy_actions(floor, obs, [0.5])[:, 0]}
  as_lists = {k: (None if v is None else np.asarray(v).tolist()) for k, v in greedy.items()}
  return {"probe_states": PROBE_STATES, "probe_seed": PROBE_SEED,
          "bootstrap": {"reps": BOOTSTRAP_REPS, "seed": BOOTSTRAP_SEED},
          "runs": {"F": family, "Q": quantized, "learners": list(learners), "floor": floor},
          "data_action_share": {int(a): float(np.mean(probe["action"] == a))
                                for a in np.unique(probe["action"])},
          "greedy": as_lists, "disagreement": summarize(greedy)}


def score(episodes_of: str, policies, output_dir: str, sequences: int = 10,
          episodes_per_sequence: int = 10, log=print) -> dict:
  """{name: mean raw score} of each (name, run dir) in `policies` on headroom.py's reference
  episodes of the run `episodes_of`."""
  from ccvl_tf.evaluation import atari_vector, rollouts  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.offline import headroom_eval, runner  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.offline.seeds import Seeds  # pylint: disable=g-import-not-at-top
  cfg = runner.saved_plan(episodes_of, None).config
  seed = Seeds(cfg.seed, cfg.eval_seed).headroom_eval()
  os.makedirs(output_dir, exist_ok=True)
  means = {}
  for name, root in policies:
    path = os.path.join(output_dir, f"{name}.json")
    if os.path.exists(path):
      with open(path) as f:
        done = json.load(f)["episodes"]
    else:
      with open(os.path.join(root, "summary.json")) as f:
        summary = json.load(f)
      policy_dir = summary["exported_policies"]["policy"]
      run_cfg = runner.saved_plan(root, None).config
      if (run_cfg.eval_epsilon, run_cfg.eval_max_steps) != (cfg.eval_epsilon, cfg.eval_max_steps):
        raise ValueError(f"{root}: epsilon/step cap differ from {episodes_of}'s")
      loaded, _ = rollouts.load_saved_policy(policy_dir, game=cfg.game)
      records = atari_vector.evaluate_atari(
          rollouts.CompiledPolicy(loaded), cfg.game, sequences * episodes_per_sequence,
          seed=seed, epsilon=cfg.eval_epsilon, max_episode_steps=cfg.eval_max_steps,
          max_slots=sequences)
      done = [headroom_eval._record_dict(r) for r in records]  # pylint: disable=protected-access
      with open(path + ".tmp", "w") as f:
        json.dump({"key": {"policy": name, "path": os.path.abspath(policy_dir), "seed": seed,
                           "sequences": sequences,
                           "episodes_per_sequence": episodes_per_sequence,
                           "epsilon": cfg.eval_epsilon, "max_steps": cfg.eval_max_steps},
                   "episodes": done}, f)
      os.replace(path + ".tmp", path)
    means[name] = float(np.mean([e["raw_score"] for e in done]))
    log(f"{name}: mean {means[name]:.2f} over {len(done)} episodes")
  return means


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  sub = parser.add_subparsers(dest="cmd", required=True)
  sub.add_parser("alphas")
  d = sub.add_parser("disagree")
  d.add_argument("--family", required=True)
  d.add_argument("--quantized", default="")
  d.add_argument("--learners", required=True, help="L0,...,L7 run dirs, grid order")
  d.add_argument("--floor", required=True)
  d.add_argument("--output", required=True)
  sc = sub.add_parser("score")
  sc.add_argument("--episodes_of", required=True)
  sc.add_argument("--policies", required=True, help="NAME=RUN_DIR,...")
  sc.add_argument("--output_dir", required=True)
  args = parser.parse_args(argv)
  if args.cmd == "alphas":
    print("| k | delta_k | E w(delta_k) | CQL learner's alpha a_k = 3 E w |")
    print("| --- | --- | --- | --- |")
    for k, (dk, w, a) in enumerate(matched_alphas()):
      print(f"| {k} | {dk:.4f} | {w:.4f} | {a:.3f} |")
    return
  if args.cmd == "score":
    pairs = [tuple(item.split("=", 1)) for item in args.policies.split(",") if item]
    score(args.episodes_of, pairs, args.output_dir)
    return
  learners = [s for s in args.learners.split(",") if s]
  if len(learners) != NUM_GRID:
    sys.exit(f"matched_learners.py: error: --learners takes {NUM_GRID} run dirs, got "
             f"{len(learners)}")
  result = disagree(args.family, args.quantized, learners, args.floor)
  with open(args.output, "w") as f:
    json.dump(result, f, indent=1)
  for k, v in result["disagreement"].items():
    print(f"{k}: {v['mean']:.4f} [{v['ci_low']:.4f}, {v['ci_high']:.4f}]")


if __name__ == "__main__":
  main()
