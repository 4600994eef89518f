"""A run of `ccvl_tf.fit` on own data as the start of online fine-tuning in a Gymnasium
environment (finetune_online.py --offline_dir=<that run> --game=gymnasium:<EnvId>; in Python
`ccvl_tf.finetune`): the environment checked against the data the run trained on, and what the
online learner takes from the run's record instead of a game's defaults.

The record is the run's summary.json, verified by offline_record.py (every field present, and
|D|, the learner's config and the network as its checkpoints' fingerprint.json records them).
From it, into `OnlineConfig.own_data` (so that the learner, its actors and the Reverb tables
build one network, `network_config`):
  * 'network': the Q-network the run built (its torso followed the observations: the MLP of
    vector observations, at the run's widths), never a game's default;
  * 'reward_clip': the reward handling of the run (null: the rewards as the data and the
    environment give them; Atari's and MinAtar's environments clip theirs to [-1, 1], own data
    is not clipped unless its run says so).
And, read by start.resolve_config as for every run: the learner's network, loss and update
settings (start.OFFLINE_SETTINGS, here with the learning rate, `LEARNER_SETTINGS`), |D|
('num_transitions'), alpha ('config' 'alpha') and the belief temperature.

Refused in one line each: a method fine-tuning does not start from (`offline_agent`), a --game
that is not a Gymnasium environment (`check_environment`: a Gymnasium environment with an Atari,
MinAtar or gridworld run is refused by start.resolve_config), an environment whose observations
or action count are not the data's.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable, Mapping

from ccvl_tf.algorithm import networks
from ccvl_tf.envs import factory
from ccvl_tf.experiments.fit import own_data as fit_own_data

# The method of a run on own data (summary.json 'method') -> the offline agent fine-tuning
# starts from (OnlineConfig.offline_agent: --agent ccvl and ccvl_lower start from CCVL, cql
# from CQL). The other methods (rem, aevl, aevl_td, dqn, bc) have no fine-tuning learner.
OFFLINE_AGENT = {"ccvl": "ccvl", "fixed_ccvl": "ccvl", "cql": "cql"}
# OnlineConfig.own_data's keys (`from_summary`).
KEYS = ("network", "reward_clip")
# The learner settings taken from the run's 'config' beside start.OFFLINE_SETTINGS: the
# learning rate, which own data's defaults set (experiments/fit/settings.py VECTOR_DEFAULTS) and
# which Q_u, started as a copy of Q_l with an optimizer of its own, would otherwise not get.
LEARNER_SETTINGS = ("learning_rate",)


def offline_agent(summary: Mapping[str, object], offline_dir: str, path: str) -> str:
  """The offline agent of the run's method ('ccvl' or 'cql'); ValueError naming the file and
  the methods fine-tuning starts from otherwise."""
  method = str(summary["method"]).lower()
  if method not in OFFLINE_AGENT:
    raise ValueError(f"--offline_dir {offline_dir} holds a {method} run of ccvl_tf.fit ({path} "
                     f"'method'): online fine-tuning starts from a "
                     f"{', '.join(sorted(OFFLINE_AGENT))} run")
  return OFFLINE_AGENT[method]


def check_environment(game: str, summary: Mapping[str, object], offline_dir: str,
                      path: str) -> None:
  """ValueError (one line, naming --game, the run and the record) unless `game` is a Gymnasium
  environment whose observations (shape, dtype) and action count are those of the data the
  run trained on (its 'data_spec'). The record's own 'env' (where fit scored its policies) is
  not required: any environment of the data's spec may fine-tune it."""
  recorded = summary.get("env")
  if not factory.is_gymnasium(game):
    where = ("records no environment ('env' null)" if recorded is None
             else f"records 'env' {recorded!r}")
    raise ValueError(
        f"--game={game}: --offline_dir {offline_dir} is a run of ccvl_tf.fit on own data "
        f"({summary['data']!r}), which fine-tunes in a Gymnasium environment whose "
        f"observations and actions are the data's; its {path} {where}: give "
        f"--game=gymnasium:<EnvId>")
  spec = summary["data_spec"]
  problems = fit_own_data.spec_problems(
      fit_own_data.env_spec(game),
      (tuple(spec["observation_shape"]), spec["observation_dtype"], spec["num_actions"]))
  if problems:
    raise ValueError(f"--game={game} does not match the data --offline_dir {offline_dir} "
                     f"trained on ({summary['data']!r}, {path} 'data_spec'): "
                     + "; ".join(problems))


def network_config(network: Mapping[str, object], where: str = "") -> networks.QNetworkConfig:
  """The QNetworkConfig of a recorded network (its fields by name, JSON lists as tuples),
  validated; ValueError naming `where` otherwise."""
  try:
    cfg = networks.QNetworkConfig(**{k: tuple(v) if isinstance(v, list) else v
                                     for k, v in dict(network).items()})
    cfg.validate()
  except (TypeError, ValueError) as e:
    raise ValueError(f"{where or 'the network'} is not a network this version builds "
                     f"({network!r}): {e}") from None
  return cfg


def check_own_data(own_data: Mapping[str, object]) -> None:
  """ValueError unless `own_data` is empty (a gridworld, MinAtar or Atari run) or holds
  exactly KEYS: a valid network and a reward clip that is None or a number > 0 (what an
  actor reads back from online_config.json)."""
  if not own_data:
    return
  if set(own_data) != set(KEYS):
    raise ValueError(f"own_data must hold {', '.join(KEYS)}, got {sorted(own_data)}")
  network_config(own_data["network"], "own_data 'network'")
  clip = own_data["reward_clip"]
  if clip is not None and not (isinstance(clip, (int, float)) and not isinstance(clip, bool)
                               and math.isfinite(clip) and clip > 0):
    raise ValueError(f"own_data 'reward_clip' must be None or a number > 0, got {clip!r}")


def resolve(cfg, summary: Mapping[str, object], path: str,
            log: Callable[[str], None] = print):
  """`cfg` (an OnlineConfig) with `own_data` from the verified record of a run on own data,
  after `check_environment`; logs what the run is and what fine-tuning takes from it."""
  check_environment(cfg.game, summary, cfg.offline_dir, path)
  network = network_config(summary["network"], f"{path} 'network'")
  own = {"network": dict(summary["network"]), "reward_clip": summary["reward_clip"]}
  spec = summary["data_spec"]
  recorded = summary.get("env")
  log(f"Offline run: ccvl_tf.fit {summary['method']} on own data ({summary['data']}: "
      f"{summary['num_transitions']:,} transitions, observations {spec['observation_shape']} "
      f"{spec['observation_dtype']}, {spec['num_actions']} actions), fine-tuned in {cfg.game}"
      + ("" if recorded in (None, cfg.game) else f" (the run scored its policies in {recorded})")
      + f"; its network: torso {network.torso}"
      + (f" {list(network.mlp_units)}" if network.torso == "mlp" else "")
      + "; rewards " + ("as the data and the environment give them (not clipped)"
                        if own["reward_clip"] is None
                        else f"clipped to [-{own['reward_clip']:g}, {own['reward_clip']:g}]")
      + ".")
  return dataclasses.replace(cfg, own_data=own)
