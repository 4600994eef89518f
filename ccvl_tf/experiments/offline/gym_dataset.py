"""A dataset of a Gymnasium environment: the body of binaries/collect_dataset.py for
--game=gymnasium:<EnvId>.

`run(CollectConfig(...))` plays `steps` agent steps of a uniformly random policy, or of an
exported policy (--policy=DIR, checked against the environment's actions, observations and
game first) with `epsilon` random actions, in the environment of `game` seeded `seed`, and
writes `output`: an .npz of per-step arrays with the meaning of d3rlpy's MDPDataset
(ccvl_tf/data/gym_collection.py: observations, actions, rewards, terminals, timeouts, and
num_actions), which train_offline.py --dataset trains on.
"""
from __future__ import annotations

import os
from typing import Callable

from ccvl_tf.data import gym_collection
from ccvl_tf.envs import factory
from ccvl_tf.evaluation import rollouts
from ccvl_tf.experiments.offline.default_dataset import CollectConfig
from ccvl_tf.runtime import paths


def run(cfg: CollectConfig, log: Callable[[str], None] = print) -> dict:
  """Collects and writes cfg.output (module docstring); returns a summary: game, steps,
  episodes (finished in the collection), mean_return (theirs; None without one), output.

  Raises:
    ValueError: a game that is not a Gymnasium environment factory makes, an --output that
      exists already, a policy that does not fit the environment.
  """
  if not cfg.gymnasium:
    raise ValueError(f"--game={cfg.game} is not a Gymnasium environment ('gymnasium:<EnvId>')")
  if cfg.policy != "random" and not paths.isdir(cfg.policy):
    raise ValueError(f"--policy must be 'random' or a SavedModel directory; {cfg.policy} does "
                     f"not exist")
  if os.path.lexists(cfg.output):
    raise ValueError(f"--output {cfg.output} exists; refusing to write over it (remove it, or "
                     f"give another path)")
  env = factory.make_env(cfg.game, cfg.seed, cfg.max_episode_steps).env
  try:
    policy = None
    if cfg.policy != "random":
      spec = env.observation_spec()
      policy, meta = rollouts.load_saved_policy(
          cfg.policy, num_actions=env.num_actions, observation_shape=spec.shape,
          observation_dtype=spec.dtype, game=env.game, action_set=env.action_set)
      if meta.get("game_note"):
        log(f"Note: {meta['game_note']}.")
    log(f"collecting {cfg.steps} steps of {env.game} ({env.num_actions} actions) with policy "
        f"{cfg.policy}" + (f" (epsilon {cfg.epsilon:g})" if policy is not None else "")
        + f" into {cfg.output}")
    last = {}

    def progress(p):
      last.update(p)
      mean = "-" if p["mean_return"] is None else f"{p['mean_return']:.1f}"
      log(f"step {p['step']}/{p['num_steps']}  episodes {p['episodes']}  mean return {mean}")

    data = gym_collection.collect_steps(env, cfg.steps, policy=policy, epsilon=cfg.epsilon,
                                        seed=cfg.seed, progress=progress,
                                        progress_every=cfg.progress_every)
  finally:
    env.close()
  os.makedirs(os.path.dirname(os.path.abspath(cfg.output)), exist_ok=True)
  gym_collection.save_npz(cfg.output, data)
  summary = dict(game=env.game, steps=cfg.steps, episodes=last.get("episodes", 0),
                 mean_return=last.get("mean_return"), output=cfg.output)
  log(f"wrote {cfg.output}: {cfg.steps} steps, {summary['episodes']} finished episodes")
  return summary
