"""The one environment factory: a game name -> an unbatched TF-Agents PyEnvironment and how to
score its episodes, for evaluation and for training alike.

Game names (`make_env`):
  'gridworld'        the paper's lava gridworld (tabular/gridworld.py) at its evaluation slip 0.15.
                     Score: the episode's discounted return; normalized: 100 x score / the
                     optimal policy's expected discounted return (gridworld_env.normalized_return).
  'minatar/<Game>'   a MinAtar game (envs/minatar.py; also 'MinAtar/Breakout-v1',
                     'minatar:breakout'). Score: the raw game score; normalized against the
                     random policy and the data's DQN when `references` are given
                     (ccvl_tf.data.minatar_datasets.load_scores), else not normalized.
  '<Game>'           an Atari game through ale_py (envs/atari.py), e.g. 'Pong',
                     'space_invaders'. Score: the raw (unclipped) game score; normalized against
                     random and Nature DQN (ccvl_tf.envs.scores) when the game has both.
  'gymnasium:<EnvId>' any registered Gymnasium environment with a Discrete action space
                     (envs/gymnasium_env.py), e.g. 'gymnasium:CartPole-v1',
                     'gymnasium:Acrobot-v1'; the id exactly as gymnasium registers it.
                     Score: the raw undiscounted return; not normalized.
A MinAtar game needs its prefix: 'Breakout' is the Atari game, 'minatar/Breakout' MinAtar's.
"""
from __future__ import annotations

import dataclasses
import functools
import re
from typing import Callable, Optional

import numpy as np

from ccvl_tf.envs import atari
from ccvl_tf.envs import gridworld_env
from ccvl_tf.envs import gymnasium_env
from ccvl_tf.envs import gymnasium_name
from ccvl_tf.envs import minatar
from ccvl_tf.envs import scores

GRIDWORLD = "gridworld"
_MINATAR_PREFIX = re.compile(r"^minatar[/:]", re.IGNORECASE)
GYMNASIUM_PREFIX = gymnasium_name.PREFIX
# The Gymnasium name's helpers (envs/gymnasium_name.py), here with every other game name's.
is_gymnasium = gymnasium_name.is_gymnasium
gymnasium_id = gymnasium_name.gymnasium_id
refuse_gymnasium = gymnasium_name.refuse_gymnasium


@dataclasses.dataclass
class GameEnv:
  """An environment and how to score and normalize its episodes."""
  env: object                                          # unbatched TF-Agents PyEnvironment
  game: str                                            # canonical name ('Pong', 'minatar/Breakout')
  raw_score_fn: Callable[[object], float]              # env -> score of the episode just ended
  normalize: Optional[Callable[[np.ndarray], np.ndarray]]  # None: no reference scores
  score_name: str                                      # what the score is (plots, summary)


def is_minatar(game: str) -> bool:
  """Whether `game` names a MinAtar game ('minatar/<Game>')."""
  return bool(_MINATAR_PREFIX.match(str(game).strip()))


def valid_games() -> str:
  """The valid game names, as a sentence for error messages."""
  return (f"valid games: '{GRIDWORLD}'; MinAtar 'minatar/<Game>' with <Game> one of "
          f"{', '.join(minatar.valid_game_names())}; a Gymnasium environment with a Discrete "
          f"action space as '{GYMNASIUM_PREFIX}<EnvId>' (e.g. '{GYMNASIUM_PREFIX}CartPole-v1'); "
          f"or an Atari game, one of {', '.join(atari.valid_game_names())}")


def _registered_gymnasium_id(game: str) -> str:
  """The Gymnasium id of `game` ('gymnasium:<EnvId>'); ValueError naming `game`, with the
  close registered names, when gymnasium does not register it (nothing made)."""
  env_id = gymnasium_id(game)
  if not gymnasium_env.is_registered(env_id):
    close = [GYMNASIUM_PREFIX + c for c in gymnasium_env.close_ids(env_id)]
    hint = (f"did you mean {', '.join(close)}?" if close else
            "gymnasium.pprint_registry() lists the registered ids (the id is case-sensitive, "
            "with its version, e.g. CartPole-v1)")
    raise ValueError(f"unknown game {game!r}: gymnasium registers no environment "
                     f"{env_id!r}; {hint}")
  return env_id


def check_game(game) -> None:
  """ValueError listing the valid names unless `game` names one (without making it; a
  Gymnasium environment is made once, and closed, to read its spaces)."""
  game = str(game).strip()
  if game.lower() == GRIDWORLD:
    return
  if is_gymnasium(game):
    gymnasium_env.check_env_id(_registered_gymnasium_id(game))
    return
  try:
    if is_minatar(game):
      minatar.canonical_game_name(game)
    else:
      atari.check_game(game)
  except ValueError:
    raise ValueError(f"unknown game {game!r}; {valid_games()}") from None


def make_env(game: str, seed: int = 0, max_episode_steps: Optional[int] = None, *,
             references: Optional[scores.References] = None) -> GameEnv:
  """The environment of `game` (see the module docstring) with its scoring.

  Args:
    game: 'gridworld', 'minatar/<Game>', 'gymnasium:<EnvId>' or an Atari game name.
    seed: the environment's seed (Gymnasium: the first reset's seed, later episodes continue
      the environment's RNG).
    max_episode_steps: cap on agent steps per episode (truncation); None: the environment's own
      (gridworld 100, MinAtar 10,000, Atari 27,000, Gymnasium the registered TimeLimit).
    references: MinAtar reference scores {Game: {"random": r, "dqn": d}}
      (minatar_datasets.load_scores); without them MinAtar scores are not normalized. Not used
      for the gridworld and Atari, whose references are built in, nor for Gymnasium, which has
      none.

  Raises:
    ValueError: for an unknown game, listing the valid names; a seed that is not an integer
      >= 0 (what Gymnasium, ALE and numpy take), naming it.
  """
  try:
    seed_ok = not isinstance(seed, bool) and int(seed) == seed and seed >= 0
  except (TypeError, ValueError):
    seed_ok = False
  if not seed_ok:
    raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
  game = str(game).strip()
  if game.lower() == GRIDWORLD:
    world = (gridworld_env.eval_world() if max_episode_steps is None
             else gridworld_env.eval_world(horizon=int(max_episode_steps)))
    return GameEnv(gridworld_env.GridWorldEnvironment(world, seed=seed), GRIDWORLD,
                   lambda e: e.get_info()["episode_discounted_return"],
                   functools.partial(gridworld_env.normalized_return, world=world),
                   "discounted return")
  kwargs = {} if max_episode_steps is None else {"max_episode_steps": int(max_episode_steps)}
  if is_gymnasium(game):
    env = gymnasium_env.GymnasiumEnvironment(_registered_gymnasium_id(game), seed=seed, **kwargs)
    return GameEnv(env, env.game, _episode_raw_return, None, "return")
  if is_minatar(game):
    try:
      name = minatar.canonical_game_name(game)
    except ValueError:
      raise ValueError(f"unknown MinAtar game {game!r}; {valid_games()}") from None
    return GameEnv(minatar.MinAtarEnvironment(name, seed=seed, **kwargs), f"minatar/{name}",
                   _episode_raw_return,
                   None if references is None else scores.normalizer(name, references),
                   "game score")
  try:
    atari.check_game(game)
  except ValueError:
    raise ValueError(f"unknown game {game!r}; {valid_games()}") from None
  env = atari.AtariEnvironment(game, seed=seed, **kwargs)
  return GameEnv(env, env.game, _episode_raw_return, scores.normalizer(env.game), "game score")


def _episode_raw_return(env) -> float:
  """The raw (unclipped) score of the episode just ended (MinAtar, Atari and Gymnasium
  environments)."""
  return env.episode_raw_return
