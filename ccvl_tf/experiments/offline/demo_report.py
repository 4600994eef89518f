"""The end-of-run results table of train_offline.py: random, behaviour and learned policies.

`report(...)` evaluates each policy for the same number of episodes in fresh ALE environments
(evaluation epsilon 0.001, the same episode cap), and writes ROOT/results.md (mean raw score
and its 95% bootstrap CI over episodes, rliable's percentile bootstrap through
`ccvl_tf.evaluation.score_stats.aggregate_scores`), ROOT/results.png (the same as bars with CIs) and
ROOT/learning_curve.png (the evaluations during training, from evals.json). The CCVL
(adaptive) row reuses the episodes the confidence diagnostics ran (their belief trace is the
same evaluation).
"""
from __future__ import annotations

import collections
import json
import os
from typing import Callable, Dict, List, Mapping, Optional, Sequence

import ccvl_tf  # noqa: F401

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import tensorflow as tf

from ccvl_tf.data import replay_writer
from ccvl_tf.envs import atari, scripted
from ccvl_tf.evaluation import atari_vector
from ccvl_tf.experiments.offline import phase_times
from ccvl_tf.experiments.offline.seeds import Seeds
from ccvl_tf.evaluation import rollouts, score_stats
from ccvl_tf.runtime import training
from ccvl_tf.runtime import strict_json

# TensorFlow (also through ccvl_tf.runtime.training and ccvl_tf.envs) and matplotlib each take ~2 s
# to import (python -X importtime); they are imported in the functions that need them, so the
# score rows and tables (score_row, render: tools/peers/peer_table.py) are made without them.

_Step = collections.namedtuple("_Step", ["action", "state", "info"])


class CallablePolicy:
  """A `time_step -> action index` callable with the policy interface run_episodes uses."""

  def __init__(self, fn: Callable):
    self._fn = fn

  def get_initial_state(self, batch_size=1):
    del batch_size
    return ()

  def action(self, time_step, state):
    return _Step(tf.constant([self._fn(time_step)], tf.int32), state, ())


# The table rows' seed offsets (added to seeds.Seeds.table_eval()): random, the behaviour
# policy, then the i-th evaluated policy.
RANDOM_OFFSET = 50_000
BEHAVIOUR_OFFSET = 51_000


def policy_offset(i: int) -> int:
  """The seed offset of the i-th evaluated policy of the table (0: the first reference)."""
  return 52_000 + 1_000 * i


def episode_records(make_policy: Callable, env_factory: Callable[[int], object], episodes: int,
                    max_steps: int, epsilon: float, seed: int) -> list:
  """The rollouts.EpisodeRecords of `episodes` episodes of make_policy(env) in a fresh
  environment env_factory(seed), evaluation epsilon `epsilon` drawn from `seed`
  (run_episodes); raw_score is the game score."""
  env = env_factory(seed)
  return rollouts.run_episodes(
      make_policy(env), env, episodes, epsilon=epsilon, seed=seed,
      raw_score_fn=lambda e: e.episode_raw_return,
      max_total_steps=episodes * (max_steps + 2))


def episode_scores(make_policy: Callable, env_factory: Callable[[int], object], episodes: int,
                   max_steps: int, epsilon: float, seed: int) -> List[float]:
  """The raw game scores of episode_records(...)."""
  return [r.raw_score for r in episode_records(make_policy, env_factory, episodes, max_steps,
                                               epsilon, seed)]


def score_row(name: str, scores: Sequence[float], reps: int = 2000) -> Dict[str, object]:
  """Mean raw score of the episodes and its 95% bootstrap CI (rliable)."""
  arr = np.asarray(scores, np.float64)
  if arr.size == 0:
    raise ValueError(f"no episodes for {name}")
  agg = score_stats.aggregate_scores(arr[:, None], reps=reps)["mean"]
  return {"policy": name, "episodes": int(arr.size), "mean": float(arr.mean()),
          "ci_low": agg.ci_low, "ci_high": agg.ci_high, "scores": arr.tolist()}


def render(rows: Sequence[Mapping[str, object]], game: str, note: str = "") -> str:
  lines = [f"# {game}: mean raw score per evaluation episode, 95% bootstrap CI (rliable)", "",
           "| policy | episodes | mean score | 95% CI |", "| --- | --- | --- | --- |"]
  for r in rows:
    lines.append(f"| {r['policy']} | {r['episodes']} | {r['mean']:.2f} | "
                 f"({r['ci_low']:.2f}, {r['ci_high']:.2f}) |")
  return "\n".join(lines) + ("\n\n" + note if note else "") + "\n"


def plot_rows(path: str, rows: Sequence[Mapping[str, object]], game: str) -> None:
  matplotlib.use("Agg")
  fig, ax = plt.subplots(figsize=(6, 3.2))
  y = np.arange(len(rows))
  means = [r["mean"] for r in rows]
  err = np.array([[r["mean"] - r["ci_low"] for r in rows], [r["ci_high"] - r["mean"]
                                                           for r in rows]])
  ax.barh(y, means, xerr=err, color="C0", alpha=0.7, capsize=4)
  ax.set_yticks(y, [r["policy"] for r in rows])
  ax.invert_yaxis()
  ax.set_xlabel("mean raw score (95% bootstrap CI)")
  ax.set_title(f"{game}: policies after offline training")
  ax.grid(axis="x", alpha=0.3)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def plot_learning_curve(path: str, evals: Mapping[str, Mapping[str, float]], game: str,
                        key: str = "mean_raw_score") -> bool:
  steps = sorted(int(s) for s in evals if key in evals[s])
  if not steps:
    return False
  matplotlib.use("Agg")
  fig, ax = plt.subplots(figsize=(5, 3.2))
  ax.plot(steps, [evals[str(s)][key] for s in steps], "o-")
  ax.set_xlabel("gradient step")
  ax.set_ylabel(f"{key} (training-time policy)")
  ax.set_title(f"{game}: evaluation during training")
  ax.grid(alpha=0.3)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return True


def report(root_dir: str, game: str, policies: Mapping[str, object],
           env_factory: Callable[[int], object], episodes: int, max_steps: int,
           epsilon: float, seed: int, *, behaviour: Optional[Callable] = None,
           behaviour_name: str = "behaviour", precomputed: Optional[Mapping[str, List]] = None,
           note: str = "", log: Callable[[str], None] = print,
           eval_env: str = "sequential", timer=None) -> List[Dict[str, object]]:
  """Evaluates and tabulates: 'random', the behaviour policy (if `behaviour`, a factory
  env -> callable), then `policies` (name -> TF-Agents policy, evaluated; on the vector
  environment when `eval_env` is 'vector', ccvl_tf/evaluation/atari_vector.py) or `precomputed`
  (name -> episode scores already measured); `timer` (phase_times.PhaseTimes) times each
  row's evaluation. Returns the rows (also in results.json); the row of an adaptive policy
  evaluated here (a CCVL reference agent) also lists the squared Bellman errors its belief
  summed in each episode (`rollouts.sq_error_fields`)."""
  precomputed = dict(precomputed or {})

  def timed(name):
    return phase_times.phase(timer, f"evaluation: {name}")

  def scores_of(make_policy, offset, name):
    with timed(name):
      return episode_scores(make_policy, env_factory, episodes, max_steps, epsilon,
                            seed + offset)

  rows = [score_row("random", scores_of(
      lambda env: CallablePolicy(replay_writer.random_policy(env.num_actions, seed=seed)),
      RANDOM_OFFSET, "random"))]
  if behaviour is not None:
    rows.append(score_row(behaviour_name, scores_of(
        lambda env: CallablePolicy(behaviour(env)), BEHAVIOUR_OFFSET, behaviour_name)))
  for i, (name, policy) in enumerate(policies.items()):
    if name in precomputed:
      rows.append(score_row(name, precomputed[name]))
    else:
      compiled = rollouts.CompiledPolicy(policy)
      with timed(name):
        if atari_vector.use_vector_env(game, eval_env):
          records = atari_vector.evaluate_atari(
              compiled, game, episodes, seed=seed + policy_offset(i), epsilon=epsilon,
              max_episode_steps=max_steps)
        else:
          records = episode_records(lambda env, c=compiled: c, env_factory, episodes,
                                    max_steps, epsilon, seed + policy_offset(i))
      # An adaptive policy's row also lists its belief's per-episode summed squared errors.
      rows.append(dict(score_row(name, [r.raw_score for r in records]),
                       **rollouts.sq_error_fields(records)))
  text = render(rows, game, note)
  with open(os.path.join(root_dir, "results.md"), "w") as f:
    f.write(text)
  with open(os.path.join(root_dir, "results.json"), "w") as f:
    strict_json.dump(rows, f, indent=1)
  plot_rows(os.path.join(root_dir, "results.png"), rows, game)
  plot_learning_curve(os.path.join(root_dir, "learning_curve.png"),
                      training.load_eval_record(root_dir)["evals"], game)
  log(text.rstrip())
  return rows


def results_table(cfg, game, replay_dir, spec, exports, precomputed, log,
                   references: Optional[Dict[str, object]] = None, timer=None):
  """train_offline.py's final table: random / behaviour / the reference agents / the learned
  policies of `cfg` (an offline.config.OfflineConfig), mean raw score with 95% bootstrap CIs:
  cfg.root_dir/results.md, results.png, learning_curve.png (`report`). `spec` is the trained
  agent's AgentSpec, `exports` its exported policies, `references` the output of
  compare/offline_table.train_references."""
  env_factory = lambda seed: atari.AtariEnvironment(cfg.game, seed=seed,
                                                    max_episode_steps=cfg.eval_max_steps)
  behaviour, behaviour_name, note = None, "behaviour", ""
  marker = os.path.join(replay_dir, "COMPLETE")
  info = {}
  if os.path.exists(marker):  # a default dataset (collected by this run or an earlier one)
    with open(marker) as f:
      info = json.load(f)
  factory = scripted.scripted_policies().get(game)
  if (info.get("policy") == f"scripted_eps{cfg.behaviour_epsilon:g}"
      and factory is not None):
    behaviour = lambda env: factory(env, epsilon=cfg.behaviour_epsilon,
                                    seed=Seeds(cfg.seed, cfg.eval_seed).table_behaviour())
    behaviour_name = f"behaviour (scripted, epsilon {cfg.behaviour_epsilon:g})"
  elif info.get("policy") == "random":
    note = "The behaviour policy of this dataset is the random policy (row 'random')."
  else:
    note = "The dataset's behaviour policy is not available here (an external dataset)."
  policies = dict(references or {})
  if spec.train_key == "ccvl":
    policies.update({"CCVL (adaptive)": None,
                     "Fixed-CCVL": exports.get("policy_fixed", exports.get("policy"))})
  else:
    policies[spec.name] = exports["policy"]
  note = (note + " " if note else "") + (
      f"{cfg.eval_episodes} episodes per policy, epsilon {cfg.eval_epsilon:g}, at most "
      f"{cfg.eval_max_steps} agent steps per episode.")
  return report(
      cfg.root_dir, game, policies, env_factory, cfg.eval_episodes, cfg.eval_max_steps,
      cfg.eval_epsilon, Seeds(cfg.seed, cfg.eval_seed).table_eval(), behaviour=behaviour,
      behaviour_name=behaviour_name,
      precomputed=precomputed, note=note, log=log, eval_env=cfg.eval_env, timer=timer)
