"""A Gymnasium environment's game name, 'gymnasium:<EnvId>', read without importing gymnasium,
TF-Agents or TensorFlow (light modules check it: a benchmark's and an ablation's settings).
The environment itself: ccvl_tf/envs/gymnasium_env.py; every game name: ccvl_tf/envs/factory.py.
"""
from __future__ import annotations

PREFIX = "gymnasium:"


def is_gymnasium(game: str) -> bool:
  """Whether `game` names a Gymnasium environment ('gymnasium:<EnvId>', any case of the
  prefix)."""
  return str(game).strip().lower().startswith(PREFIX)


def gymnasium_id(game: str) -> str:
  """The Gymnasium id of 'gymnasium:<EnvId>' ('gymnasium:CartPole-v1' -> 'CartPole-v1')."""
  return str(game).strip()[len(PREFIX):].strip()


def refuse_gymnasium(game: str, flag: str, needs: str) -> None:
  """ValueError naming `flag` when `game` names a Gymnasium environment, which the caller does
  not take: `needs` says what it takes instead. Nothing for any other name."""
  if is_gymnasium(game):
    raise ValueError(f"{flag}={str(game).strip()}: {needs}; a Gymnasium environment "
                     f"('{PREFIX}<EnvId>') is taken by evaluate.py, collect_dataset.py, "
                     f"train_offline.py --dataset and finetune_online.py (a run on own data)")
