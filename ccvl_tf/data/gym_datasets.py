"""Offline datasets of mixed quality on Gymnasium classic-control tasks, made the way the DQN
Replay Dataset was made: every transition an online DQN (ccvl_tf/data/gym_dqn.py) saw while it
learned, from uniformly random play to its final epsilon-greedy policy.

`build(output_dir, env_name, num_steps=..., seed=...)` writes
  <output_dir>/<EnvId>/seed_<k>/data.npz      np.savez_compressed: observations, actions,
                                              rewards, terminals, timeouts (d3rlpy MDPDataset
                                              meaning; ccvl_tf.Transitions.from_npz reads it)
  <output_dir>/<EnvId>/seed_<k>/summary.json  settings, versions, the DQN's learning curve,
                                              the reference scores (random and final greedy)
  <output_dir>/<EnvId>/seed_<k>/dqn_q_network.npz  the final Q-network's weights
summary.json is written last: a directory without it is an interrupted build, deleted and
built again. A finished build is returned as it is when asked again with the same settings,
and refused (naming the settings that differ) with others.

Normalized score of a policy on a task: 100 x (score - random) / (final greedy - random), so
0 = the uniformly random policy and 100 = the final greedy DQN that made the data.
More in docs/gym_datasets.md.
"""
from __future__ import annotations

import dataclasses
import json
import os
import platform
import shutil
import time
from typing import Callable, Dict, Optional, Sequence

import numpy as np

from ccvl_tf.data import gym_dqn
from ccvl_tf.envs import factory
from ccvl_tf.runtime import run_settings
from ccvl_tf.runtime import strict_json
from ccvl_tf.runtime.config_flags import setting

# The recipe: env steps (= logged transitions) of each task's DQN run, a length at which the
# rl-baselines3-zoo settings (gym_dqn.TASK_OVERRIDES) clearly learn in minutes on one CPU core
# (docs/gym_datasets.md: final greedy return vs random, measured).
TASKS: Dict[str, int] = {
    "CartPole-v1": 50_000,      # zoo n_timesteps 5e4
    "Acrobot-v1": 50_000,       # zoo n_timesteps 1e5; at about -90 (random -500) by 50k
    "LunarLander-v3": 100_000,  # zoo n_timesteps 1e5; needs Box2D (box2d==2.3.10)
}
EVAL_EPISODES = 100     # episodes scoring the final greedy DQN (epsilon 0, SB3 deterministic)
RANDOM_EPISODES = 100   # episodes scoring the uniformly random policy
DATA_FILENAME = "data.npz"
SUMMARY_FILENAME = "summary.json"
WEIGHTS_FILENAME = "dqn_q_network.npz"


@dataclasses.dataclass(frozen=True)
class BuildConfig:
  """Settings of binaries/make_gym_datasets.py (its flags, ccvl_tf/runtime/config_flags.py); the
  binary checks them and calls build_all."""
  envs: Sequence[str] = setting(tuple(TASKS), "Gymnasium tasks, each built with its recipe "
                                "length: " + ", ".join("{} {}".format(k, v)
                                                       for k, v in TASKS.items()),
                                kind="list", flag_default=list(TASKS))
  output_dir: str = setting("", "Root directory of the datasets: <output_dir>/<EnvId>/"
                            "seed_<seed>/data.npz and summary.json.", flag_default=None,
                            required=True, output="dir")
  seed: int = run_settings.borrow("seed")  # also the run directory's name
  progress_every: int = run_settings.borrow("progress_every", 10_000)
  # One thread: the data depend on the thread count, and this small network gains nothing
  # from more.
  tf_threads: int = run_settings.borrow("tf_threads", 1)


def run_dir(output_dir: str, env_name: str, seed: int) -> str:
  """``<output_dir>/<EnvId>/seed_<seed>``."""
  return os.path.join(output_dir, gym_dqn.env_id_of(env_name), "seed_{}".format(int(seed)))


def _versions() -> dict:
  import gymnasium  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tf_agents  # pylint: disable=g-import-not-at-top
  return dict(python=platform.python_version(), numpy=np.__version__,
              tensorflow=tf.__version__, tf_agents=tf_agents.__version__,
              gymnasium=gymnasium.__version__,
              tf_intra_op_threads=tf.config.threading.get_intra_op_parallelism_threads(),
              tf_inter_op_threads=tf.config.threading.get_inter_op_parallelism_threads())


def _cached(rdir: str, settings: dict, log: Callable[[str], None]) -> Optional[dict]:
  """The summary of a finished build with the same settings; ValueError naming the settings
  that differ; None (after deleting it) for an interrupted build."""
  path = os.path.join(rdir, SUMMARY_FILENAME)
  if os.path.exists(path):
    with open(path) as f:
      summary = json.load(f)
    old = summary.get("settings", {})
    if old != settings:
      diff = sorted(k for k in set(old) | set(settings) if old.get(k) != settings.get(k))
      raise ValueError("{} holds a dataset built with other settings ({}); use another "
                       "output_dir or delete that directory".format(rdir, "; ".join(
                           "{}: {} there, {} asked".format(k, json.dumps(old.get(k)),
                                                          json.dumps(settings.get(k)))
                           for k in diff)))
    log("[{}] cached: {}".format(settings["env_id"], rdir))
    summary["cached"] = True
    return summary
  if os.path.isdir(rdir):
    log("[{}] {} has no {} (interrupted build): deleting it and building again".format(
        settings["env_id"], rdir, SUMMARY_FILENAME))
    shutil.rmtree(rdir)
  return None


def data_summary(arrays: Dict[str, np.ndarray], unfinished_last_episode: bool) -> dict:
  """What the data hold: transitions, episodes (terminated, cut by the time limit, and the
  run's last one when it is unfinished), and the behaviour's returns over the finished
  episodes."""
  ends = np.flatnonzero((arrays["terminals"] > 0) | (arrays["timeouts"] > 0))
  starts = np.r_[0, ends[:-1] + 1]
  returns = [float(arrays["rewards"][s:e + 1].sum()) for s, e in zip(starts, ends)]
  finished = returns[:-1] if unfinished_last_episode else returns

  def stat(f):
    return float(f(finished)) if finished else None  # None: no episode finished

  return dict(transitions=int(arrays["actions"].shape[0]), episodes=int(ends.size),
              terminated_episodes=int((arrays["terminals"] > 0).sum()),
              timed_out_episodes=int((arrays["timeouts"] > 0).sum()) - int(
                  unfinished_last_episode),
              unfinished_last_episode=bool(unfinished_last_episode),
              behaviour_mean_return=stat(np.mean), behaviour_min_return=stat(np.min),
              behaviour_max_return=stat(np.max),
              action_counts=np.bincount(arrays["actions"]).tolist())


def _shown(x: Optional[float]) -> str:
  return "-" if x is None else "{:.1f}".format(x)


def build(output_dir: str, env_name: str, *, num_steps: Optional[int] = None, seed: int = 0,
          config: Optional[gym_dqn.GymDQNConfig] = None, eval_episodes: int = EVAL_EPISODES,
          random_episodes: int = RANDOM_EPISODES, log: Callable[[str], None] = print,
          progress_every: int = 10_000) -> dict:
  """Builds (or finds cached) the dataset of one task and seed; returns its summary (with
  ``cached`` True or False and ``data_path``).

  env_name: 'CartPole-v1' or 'gymnasium:CartPole-v1'. num_steps: None -> :data:`TASKS`
  (ValueError for a task without a default). config: None -> gym_dqn.config_for(env_name).
  """
  env_id = gym_dqn.env_id_of(env_name)
  if num_steps is None:
    if env_id not in TASKS:
      raise ValueError("{}: no default num_steps (the recipe's tasks: {}); pass "
                       "num_steps".format(env_id, ", ".join(TASKS)))
    num_steps = TASKS[env_id]
  config = gym_dqn.config_for(env_id) if config is None else config
  config.validate()
  for name, v in (("num_steps", num_steps), ("eval_episodes", eval_episodes),
                  ("random_episodes", random_episodes)):
    if int(v) != v or v < 1:
      raise ValueError("{} must be an integer >= 1, got {!r}".format(name, v))
  if int(seed) != seed or seed < 0:
    raise ValueError("seed must be an integer >= 0, got {!r}".format(seed))
  settings = dict(env_id=env_id, seed=int(seed), num_steps=int(num_steps),
                  eval_episodes=int(eval_episodes), random_episodes=int(random_episodes),
                  dqn_config=json.loads(json.dumps(dataclasses.asdict(config))))
  rdir = run_dir(output_dir, env_id, seed)
  cached = _cached(rdir, settings, log)
  if cached is not None:
    cached["data_path"] = os.path.join(rdir, DATA_FILENAME)
    return cached
  factory.check_game(factory.GYMNASIUM_PREFIX + env_id)  # made once: a missing dependency
  os.makedirs(rdir)                                        # fails before a directory exists
  log("[{}] seed {}: online DQN for {} steps -> {}".format(env_id, seed, num_steps, rdir))

  def _progress(p):
    ret = "-" if p["mean_return"] is None else "{:.1f}".format(p["mean_return"])
    log("[{}] step {}/{}  {:.0f} steps/s  ETA {:.0f}s  episodes {}  mean return (last 20) {}  "
        "epsilon {:.3f}".format(env_id, p["step"], p["num_steps"], p["steps_per_s"],
                                p["eta_s"], p["episodes"], ret, p["epsilon"]))

  run = gym_dqn.run_dqn(env_id, num_steps, config=config, seed=seed,
                        eval_episodes=eval_episodes, random_episodes=random_episodes,
                        progress=_progress, progress_every=progress_every)
  data_path = os.path.join(rdir, DATA_FILENAME)
  np.savez_compressed(data_path + ".tmp.npz", **run.arrays)
  os.replace(data_path + ".tmp.npz", data_path)
  np.savez(os.path.join(rdir, WEIGHTS_FILENAME),
           **{"{:02d}_{}".format(i, v.name.replace("/", "_").replace(":", "_")): v.numpy()
              for i, v in enumerate(run.q_network.trainable_variables)})
  s = run.summary
  summary = dict(
      settings=settings, versions=_versions(),
      data=data_summary(run.arrays, run.summary["unfinished_last_episode"]),
      data_bytes=os.path.getsize(data_path),
      reference_scores=dict(random=s["random_mean"], final_greedy=s["final_greedy_mean"]),
      normalization="normalized = 100 x (score - random) / (final_greedy - random): 0 = the "
                    "uniformly random policy, 100 = the final greedy DQN that made the data",
      **{k: v for k, v in s.items() if k not in ("env_id",)})
  path = os.path.join(rdir, SUMMARY_FILENAME)
  with open(path + ".tmp", "w") as f:
    strict_json.dump(summary, f, indent=1)
  os.replace(path + ".tmp", path)
  log("[{}] seed {} done in {:.0f}s ({:.0f} steps/s): final greedy {:.1f}, random {:.1f}, "
      "behaviour mean {} over {} finished episodes; {} ({:.2f} MB)".format(
          env_id, seed, s["wall_seconds"], s["steps_per_s"], s["final_greedy_mean"],
          s["random_mean"], _shown(summary["data"]["behaviour_mean_return"]),
          s["finished_episodes"], data_path, summary["data_bytes"] / 1e6))
  summary["cached"] = False
  summary["data_path"] = data_path
  return summary


def check_tasks(env_names: Sequence[str]) -> None:
  """ValueError (one line) unless `env_names` is a non-empty list of the recipe's tasks
  (:data:`TASKS`; 'CartPole-v1' or 'gymnasium:CartPole-v1')."""
  if not env_names:
    raise ValueError("no tasks given; the recipe's tasks: " + ", ".join(TASKS))
  unknown = [name for name in env_names if gym_dqn.env_id_of(name) not in TASKS]
  if unknown:
    raise ValueError("no recipe for {}; the recipe's tasks: {}".format(", ".join(unknown),
                                                                       ", ".join(TASKS)))


def build_all(output_dir: str, env_names: Sequence[str], *, seed: int = 0,
              log: Callable[[str], None] = print, **kwargs) -> Dict[str, dict]:
  """:func:`build` for each task of the recipe (:data:`TASKS`) in order, each with its recipe
  length. Before anything is built: ValueError naming a task outside the recipe
  (`check_tasks`), or one that cannot be made (a missing dependency such as Box2D)."""
  check_tasks(env_names)
  for name in env_names:
    factory.check_game(factory.GYMNASIUM_PREFIX + gym_dqn.env_id_of(name))
  out = {}
  for name in env_names:
    out[gym_dqn.env_id_of(name)] = build(output_dir, name, seed=seed, log=log, **kwargs)
  return out
