"""A dataset of a Gymnasium environment: `collect` (ccvl_tf.collect, the per-step arrays in
memory) and `run`, the body of binaries/collect_dataset.py for --game=gymnasium:<EnvId>, which
plays the same steps and writes them.

`run(CollectConfig(...))` plays `steps` agent steps of a uniformly random policy, or of an
exported policy (--policy=DIR, checked against the environment's actions, observations and
game first) with `epsilon` random actions, in the environment of `game` seeded `seed`, and
writes `output`: an .npz of per-step arrays with the meaning of d3rlpy's MDPDataset
(ccvl_tf/data/gym_collection.py: observations, actions, rewards, terminals, timeouts, and
num_actions), which train_offline.py --dataset trains on.
"""
from __future__ import annotations

import os
from typing import Callable, Dict, Optional

from ccvl_tf.data import gym_collection
from ccvl_tf.envs import factory
from ccvl_tf.evaluation import rollouts
from ccvl_tf.experiments.offline.default_dataset import CollectConfig
from ccvl_tf.runtime import paths


def load_policy(policy, env, log: Optional[Callable[[str], None]] = print):
  """What `gym_collection.collect_steps` plays in `env` (a factory environment) for `policy`:
  None for None or 'random'; for a SavedModel directory (policies.export_policy / PolicySaver),
  the export loaded and checked against the environment first (its action count, observation
  shape and dtype, and the game its ccvl_policy.json records: rollouts.load_saved_policy; a
  note on what could not be checked goes to `log`); any other object as it is (a TF-Agents
  policy, or a SavedModel loaded with tf.saved_model.load).

  Raises:
    ValueError: a directory that does not exist, or an export that does not fit `env`.
  """
  if policy is None or (isinstance(policy, str) and policy == "random"):
    return None
  if not isinstance(policy, (str, os.PathLike)):
    return policy
  path = os.fspath(policy)
  if not paths.isdir(path):
    raise ValueError(f"policy must be 'random' or a SavedModel directory; {path} does not "
                     f"exist")
  spec = env.observation_spec()
  loaded, meta = rollouts.load_saved_policy(
      path, num_actions=env.num_actions, observation_shape=spec.shape,
      observation_dtype=spec.dtype, game=env.game, action_set=env.action_set)
  if meta.get("game_note") and log is not None:
    log(f"Note: {meta['game_note']}.")
  return loaded


def collect(game: str, num_steps: int, *, seed: int = 0, policy=None, epsilon: float = 0.0,
            max_episode_steps: Optional[int] = None,
            progress: Optional[Callable[[dict], None]] = None,
            progress_every: int = 1000) -> Dict[str, object]:
  """The per-step arrays (ccvl_tf/data/gym_collection.py) of `num_steps` agent steps in the
  Gymnasium environment of `game` ('gymnasium:<EnvId>', ccvl_tf.envs.factory.make_env) made
  with `seed` and `max_episode_steps` (None: its registered limit), played by `policy`
  (`load_policy`: None or 'random', a SavedModel directory, or a policy object) with
  `epsilon` random actions, the random actions seeded with `seed` too. The environment is
  closed at the end. What collect_dataset.py --game=gymnasium:<EnvId> writes, in memory.

  Raises:
    ValueError: `game` is not a Gymnasium environment's name (or is not one factory makes); a
      seed, step count, epsilon or policy that does not fit, naming it.
  """
  if not factory.is_gymnasium(game):
    raise ValueError(f"game {game!r} is not a Gymnasium environment; expected "
                     f"'{factory.GYMNASIUM_PREFIX}<EnvId>', e.g. "
                     f"'{factory.GYMNASIUM_PREFIX}CartPole-v1'")
  env = factory.make_env(game, seed, max_episode_steps).env
  try:
    return gym_collection.collect_steps(env, num_steps, policy=load_policy(policy, env),
                                        epsilon=epsilon, seed=seed, progress=progress,
                                        progress_every=progress_every)
  finally:
    env.close()


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
    policy = load_policy(cfg.policy, env, log)
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
