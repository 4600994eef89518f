"""`ccvl_tf.finetune`: one call that fine-tunes an offline run online, the call
binaries/finetune_online.py makes with its flags.

    import ccvl_tf
    ccvl_tf.fit("cartpole.npz", "ccvl", env="gymnasium:CartPole-v1", root_dir="runs/cartpole")
    summary = ccvl_tf.finetune("runs/cartpole", env="gymnasium:CartPole-v1",
                               root_dir="runs/cartpole_online", num_env_steps=20_000)
    summary["start_eval"], summary["last_eval"]   # the policies' scores before and after

The offline run is a run of ccvl_tf.fit on own data (fine-tuned in a Gymnasium environment of
its data's observations and actions), or a train_offline.py / compare.py run of the gridworld,
a MinAtar or an Atari game (fine-tuned in that game). The settings are OnlineConfig's
(experiments/online/config.py) and ExplorationConfig's (ccvl_tf/agents/ccvl_bounds_agent.py)
by name, the flags of finetune_online.py (`arguments` gives a flag-made OnlineConfig's
keywords back); the run is experiments/online/runner.py's (docs/online.md).
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Dict

from ccvl_tf.experiments.online import config as online_config
from ccvl_tf.experiments.online import runner

# OnlineConfig's fields that are not keyword settings of `finetune`: its own arguments
# (offline_dir, env -> game, root_dir, method -> agent) and what the run resolves from the
# offline record (offline_settings, own_data) or holds as ExplorationConfig's settings.
_ARGUMENTS = {"offline_dir": "offline_dir", "game": "env", "root_dir": "root_dir",
              "agent": "method"}
_RESOLVED = ("exploration_values", "offline_settings", "own_data")
RUN_SETTINGS = tuple(f.name for f in dataclasses.fields(online_config.OnlineConfig)
                     if f.name not in _ARGUMENTS and f.name not in _RESOLVED)


def config(offline_dir: str, *, env: str, root_dir: str, method: str = "ccvl",
           **settings) -> online_config.OnlineConfig:
  """The OnlineConfig of `finetune`'s arguments: the run's settings (RUN_SETTINGS) by name,
  ExplorationConfig's (beta, explore_epsilon, belief_temperature, ...) as its exploration
  values; a name neither declares is refused, naming the valid ones. Not validated here
  (runner.run validates it first)."""
  unknown = sorted(set(settings) - set(RUN_SETTINGS) - set(online_config.EXPLORATION_FIELDS))
  if unknown:
    raise ValueError(f"unknown setting{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
                     f"fine-tuning's settings are {', '.join(sorted(RUN_SETTINGS))} and the "
                     f"exploration's {', '.join(online_config.EXPLORATION_FIELDS)}")
  exploration = {k: v for k, v in settings.items() if k in online_config.EXPLORATION_FIELDS}
  run = {k: v for k, v in settings.items() if k in RUN_SETTINGS}
  return online_config.OnlineConfig(offline_dir=offline_dir, game=env, root_dir=root_dir,
                                    agent=method, exploration_values=exploration, **run)


def arguments(cfg: online_config.OnlineConfig) -> Dict[str, object]:
  """`finetune`'s keywords that give `cfg` back through `config` (a config made from flags:
  nothing resolved from the offline record yet)."""
  if cfg.offline_settings or cfg.own_data:
    raise ValueError("arguments() takes a config before the offline record is resolved "
                     "(offline_settings and own_data empty)")
  out = {name: getattr(cfg, field) for field, name in _ARGUMENTS.items()}
  out.update({name: getattr(cfg, name) for name in RUN_SETTINGS})
  out.update(cfg.exploration_values)
  return out


def finetune(offline_dir: str, *, env: str, root_dir: str, method: str = "ccvl",
             log: Callable[[str], None] = print, strategy=None,
             **settings) -> Dict[str, object]:
  """Fine-tunes the offline run in `offline_dir` online in `env`, writing under `root_dir`;
  resumes the run there when there is one (module docstring).

  Args:
    offline_dir: the offline run's directory: a ccvl_tf.fit run on own data
      (train_offline.py --dataset), or a train_offline.py / compare.py run.
    env: where it fine-tunes: 'gymnasium:<EnvId>' for a run on own data (its observations
      and action count those of the data), else the offline run's game ('gridworld',
      'minatar/Breakout', 'Breakout').
    root_dir: the fine-tuning run's directory (checkpoints, evaluations, TensorBoard,
      policies, summary.json).
    method: 'ccvl' (lower and upper bounds, Eq. upper policy exploration), 'ccvl_lower' (Q_l
      only) or 'cql' (the baseline); finetune_online.py's --agent.
    log: where progress lines go.
    strategy: a tf.distribute.Strategy for the learner (default: the default strategy).
    **settings: finetune_online.py's other flags by name (num_env_steps, batch_size,
      offline_fraction, schedule, eval_episodes, num_actors, ..., and the exploration's
      beta, explore_epsilon, belief_temperature, ...).

  Returns:
    The run's summary.json content: 'step', 'start_eval' and 'last_eval' (the policies'
    scores at the offline start and at the end), 'policy_dirs', 'config', 'throughput', ...
  """
  cfg = config(offline_dir, env=env, root_dir=root_dir, method=method, **settings)
  return runner.run(cfg, log=log, strategy=strategy)


__all__ = ["arguments", "config", "finetune"]
