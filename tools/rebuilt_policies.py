"""Re-scores a finished Atari CCVL run under the current Fixed-CCVL and belief-temperature rules.

For each run directory that binaries/headroom.py has evaluated: restores the run's newest intact
checkpoint, rebuilds its policies with the current library (agent_registry's CCVL policies:
Fixed-CCVL's delta by the TD error against the target network on the held-out batches, the
belief temperature by its rule), plays the rebuilt adaptive policy on the headroom evaluation's
episodes (the same seed, slots and episodes), and writes ROOT/headroom/rebuilt.json: the new
delta and temperature with both error vectors, the headroom statistics (headroom.analyze) with
Fixed-CCVL at the new delta (its row is the grid member already played) and the new adaptive
policy, and the belief after every episode.

  python tools/rebuilt_policies.py [--rule=current|consistency] RUN_DIR [RUN_DIR ...]

--rule=consistency rebuilds them by the consistency rules instead: Fixed-CCVL's delta by the
Bellman-consistency error (the same network on both sides) and the temperature 2 x its smallest
grid value (auto_belief_temperature) whatever the run's settings, on the same held-out batches;
it writes rebuilt_consistency.json.

--rule=prior:NAME (NAME a belief_prior: heldout_mean, heldout_sum, uniform) rebuilds them by the
run's own rules with the adaptive belief starting from that prior (docs/belief_prior.md, "On
Breakout"); it writes rebuilt_prior_NAME.json.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ccvl_tf  # noqa: F401,E402  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np  # noqa: E402

from ccvl_tf.algorithm import belief  # noqa: E402
from ccvl_tf.evaluation import atari_vector  # noqa: E402
from ccvl_tf.evaluation import diagnostics, headroom, rollouts  # noqa: E402
from ccvl_tf.experiments.offline import headroom_eval, runner  # noqa: E402
from ccvl_tf.runtime import strict_json  # noqa: E402


def rescore(root_dir: str, rule: str = "current") -> dict:
  with open(os.path.join(root_dir, "headroom", "headroom.json")) as f:
    before = json.load(f)
  s = int(before["sequences"])
  plan = runner.saved_ccvl_plan(root_dir, None, "the rebuilt policies")
  run_setup, checkpoint = runner.restore_finished(plan, print, "the rebuilt policies",
                                                  "rebuilt.json")
  settings = run_setup.settings
  if rule == "consistency":
    settings = dataclasses.replace(settings, belief_episode_steps=None)
  if rule.startswith("prior:"):
    settings = dataclasses.replace(settings, belief_prior=rule.split(":", 1)[1])
  exports, extra = run_setup.spec.policies(run_setup.agent, run_setup.time_step_spec,
                                           run_setup.action_spec,
                                           run_setup.batches.held_out(), settings)
  if rule == "consistency":
    grid = belief.delta_grid(settings.num_grid_deltas)
    extra["fixed_delta"] = float(grid[int(np.argmin(extra["bellman_errors_consistency"]))])
  print(f"{root_dir}: Fixed-CCVL delta {extra['fixed_delta']:.4f} (was "
        f"{before['fixed_delta']:.4f}); temperature {extra['belief_temperature']:.4g} (was "
        f"{before['belief_temperature']:.4g})", flush=True)
  ev = run_setup.evaluation
  episodes = len(before["policies"][headroom_eval.ADAPTIVE])
  records = atari_vector.evaluate_atari(
      rollouts.CompiledPolicy(exports["policy"]), plan.config.game, episodes,
      seed=before["seed"], epsilon=ev.epsilon, max_episode_steps=ev.max_steps, max_slots=s)
  grid = belief.delta_grid(run_setup.settings.num_grid_deltas)
  trace = diagnostics.belief_trace(records, grid)
  members = [before["policies"][f"delta={d:.4f}"] for d in grid]
  adaptive = [r.raw_score for r in records]
  result = headroom.analyze(
      grid, np.stack([headroom.as_sequences(m, s) for m in members]),
      float(extra["fixed_delta"]), headroom.as_sequences(adaptive, s), {},
      belief_entropy=headroom.as_sequences([t["entropy"] for t in trace], s))
  out = {"root_dir": root_dir, "checkpoint": checkpoint, "seed": before["seed"],
         "fixed_delta": extra["fixed_delta"], "fixed_delta_before": before["fixed_delta"],
         "bellman_errors_target": extra["bellman_errors"],
         "bellman_errors_consistency": extra["bellman_errors_consistency"],
         "belief_temperature": extra["belief_temperature"],
         "belief_temperature_source": extra["belief_temperature_source"],
         "belief_temperature_before": before["belief_temperature"],
         "adaptive_scores": adaptive,
         "adaptive_mean_delta": [float(np.mean(r.deltas)) if r.deltas else None
                                 for r in records],
         "belief_trace": trace, "analysis": result, "rule": rule,
         "log_beliefs": [None if r.log_belief is None else
                         np.asarray(r.log_belief, np.float64).reshape(-1).tolist()
                         for r in records],
         "belief_prior": settings.belief_prior}
  path = os.path.join(root_dir, "headroom", _file_name(rule))
  with open(path + ".tmp", "w") as f:
    strict_json.dump(out, f)
  os.replace(path + ".tmp", path)
  print(f"{root_dir}: adaptive {np.mean(adaptive):.2f}; wrote {path}", flush=True)
  return out


def _file_name(rule: str) -> str:
  if rule == "current":
    return "rebuilt.json"
  if rule == "consistency":
    return "rebuilt_consistency.json"
  return f"rebuilt_prior_{rule.split(':', 1)[1]}.json"


def check_rule(rule: str) -> None:
  """ValueError naming --rule unless it is current, consistency or prior:<a belief_prior>."""
  from ccvl_tf.runtime import run_settings  # pylint: disable=g-import-not-at-top
  priors = [f"prior:{p}" for p in run_settings.BELIEF_PRIORS]
  if rule not in ("current", "consistency", *priors):
    raise ValueError(f"--rule must be current, consistency or one of {', '.join(priors)}, "
                     f"got {rule!r}")


if __name__ == "__main__":
  args = sys.argv[1:]
  chosen = "current"
  if args and args[0].startswith("--rule="):
    chosen = args.pop(0).split("=", 1)[1]
  try:
    check_rule(chosen)
  except ValueError as e:
    sys.exit(f"rebuilt_policies.py: error: {e}")
  for arg in args:
    rescore(arg, chosen)
