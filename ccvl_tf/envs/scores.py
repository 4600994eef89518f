"""Reference scores and the one normalized score.

normalized score = 100 * (score - random) / (DQN - random): 0 is a uniformly random policy, 100
the DQN reference. The references per suite:
  * Atari: the Atari-57 random scores and Nature DQN (Mnih et al. 2015), the tables below (the
    paper's protocol, following Agarwal et al. 2021);
  * MinAtar: the random policy and the online DQN run that generated the data, from the dataset
    root's minatar_scores.json (`ccvl_tf.data.minatar_datasets.load_scores`), passed to
    `normalized_score` as `references`;
  * gridworld: not a (random, DQN) pair but the optimal policy's expected discounted return,
    computed from the world's model: `ccvl_tf.envs.gridworld_env.normalized_return`.
Also the paper's method and dataset names (PAPER_METHODS, PAPER_DATASETS), in its table order.

Here in envs/ because each environment's scoring (factory.make_env's `normalize`) is built from
these references; the reports in ccvl_tf/evaluation read them from here. Plain numpy, no other
module of ccvl_tf.
"""
from __future__ import annotations

from typing import Callable, Dict, Iterable, Mapping, Optional

import numpy as np

# The 17 games of the paper (Tables 3-5, in the paper's row order; Kumar et al. 2022, DR3).
ATARI_GAMES = (
    "Asterix", "Breakout", "Pong", "Seaquest", "Qbert", "SpaceInvaders", "Zaxxon", "YarsRevenge",
    "RoadRunner", "MsPacman", "BeamRider", "Jamesbond", "Enduro", "WizardOfWor", "IceHockey",
    "DoubleDunk", "DemonAttack",
)

# Uniformly random policy. Source: google-research/reincarnating_rl, file
# reincarnating_rl/atari_scores.py (`RANDOM_SCORES`), the standard Atari-57 random scores also in
# DeepMind's dqn_zoo atari_data.py; for the 49 Nature-DQN games these are the "Random" column of
# Mnih et al. 2015, Extended Data Table 2.
RANDOM_SCORES: Dict[str, float] = {
    "Asterix": 210.0, "Breakout": 1.7, "Pong": -20.7, "Seaquest": 68.4, "Qbert": 163.9,
    "SpaceInvaders": 148.0, "Zaxxon": 32.5, "YarsRevenge": 3092.9, "RoadRunner": 11.5,
    "MsPacman": 307.3, "BeamRider": 363.9, "Jamesbond": 29.0, "Enduro": 0.0,
    "WizardOfWor": 563.5, "IceHockey": -11.2, "DoubleDunk": -18.6, "DemonAttack": 152.1,
}

# Nature DQN (Mnih et al. 2015, "Human-level control through deep reinforcement learning",
# Extended Data Table 2, DQN column). Source file: seungjaeryanlee/rldb,
# rldb/db/paper__dqn2015/algo__dqn2015/entries.py (transcription of that table); the values for
# the Atari-100k games among them match the `DQN_SCORES` dict circulating with rliable's
# precipice colab. YarsRevenge is NOT one of the 49 Nature-DQN games, so it has no Nature-DQN
# score: it is left out here (normalized_score raises for it) rather than filled with a number
# from another agent. See docs/policies.md.
DQN_SCORES: Dict[str, float] = {
    "Asterix": 6012.0, "Breakout": 401.2, "Pong": 18.9, "Seaquest": 5286.0, "Qbert": 10596.0,
    "SpaceInvaders": 1976.0, "Zaxxon": 4977.0, "RoadRunner": 18257.0, "MsPacman": 2311.0,
    "BeamRider": 6846.0, "Jamesbond": 576.7, "Enduro": 301.8, "WizardOfWor": 3393.0,
    "IceHockey": -1.6, "DoubleDunk": -18.1, "DemonAttack": 9711.0,
}

# The paper's methods (Table 2 columns) and dataset kinds (its rows), in table order.
PAPER_METHODS = ("REM", "CQL", "AEVL", "Fixed-CCVL", "CCVL")
PAPER_DATASETS = ("1%", "5%", "Initial 10%")
# Table column order: behaviour cloning (the anchor every offline table here reports) first.
TABLE_METHODS = ("BC",) + PAPER_METHODS

# {game: {"random": score, "dqn": score}}, as minatar_datasets.load_scores returns.
References = Mapping[str, Mapping[str, float]]


def canonical_game(game: str, names: Iterable[str]) -> str:
  """The name among `names` that `game` spells ('space_invaders' / 'spaceinvaders' ->
  'SpaceInvaders': case, '_' and '-' ignored); `game` itself when none matches."""
  key = game.replace("_", "").replace("-", "").lower()
  for name in names:
    if name.lower() == key:
      return name
  return game


def _atari_pair(game: str):
  """(canonical name, random, Nature DQN) of an Atari game; ValueError naming what is missing."""
  name = canonical_game(game, set(RANDOM_SCORES) | set(DQN_SCORES))
  if name not in RANDOM_SCORES or name not in DQN_SCORES:
    missing = [w for w, table in (("random", RANDOM_SCORES), ("Nature-DQN", DQN_SCORES))
               if name not in table]
    raise ValueError(
        f"no {' and '.join(missing)} reference score for game {game!r}; normalized scores are "
        f"available for: {', '.join(sorted(set(RANDOM_SCORES) & set(DQN_SCORES)))}")
  return name, RANDOM_SCORES[name], DQN_SCORES[name]


def normalized_score(game: str, score, references: Optional[References] = None):
  """100 * (score - random) / (DQN - random) (0 = random policy, 100 = the DQN reference).

  Args:
    game: game name (CamelCase or snake_case).
    score: raw game score(s) (undiscounted, unclipped episode return), scalar or array.
    references: {game: {"random": r, "dqn": d}} (MinAtar: minatar_datasets.load_scores);
      None: the Atari tables RANDOM_SCORES and DQN_SCORES.

  Returns:
    float64 of the shape of `score`.

  Raises:
    ValueError: for a game without both reference scores (e.g. Atari YarsRevenge: no Nature
      DQN), or whose DQN reference is not above the random one (such a normalization would
      flip or explode).
  """
  if references is None:
    name, random, dqn = _atari_pair(game)
  else:
    name = canonical_game(game, references)
    if name not in references:
      raise ValueError(f"no reference scores for game {game!r} (have: "
                       f"{', '.join(sorted(references)) or 'none'})")
    random, dqn = references[name]["random"], references[name]["dqn"]
  if not dqn - random > 0:
    raise ValueError(f"the DQN reference score of {name} ({dqn}) is not above the random "
                     f"policy's ({random}); normalized scores would be meaningless")
  return 100.0 * (np.asarray(score, np.float64) - random) / (dqn - random)


def has_reference(game: str, references: Optional[References] = None) -> bool:
  """Whether normalized_score(game, ., references) is defined (both reference scores known,
  DQN above random)."""
  try:
    normalized_score(game, 0.0, references)
  except ValueError:
    return False
  return True


def normalizer(game: str, references: Optional[References] = None
               ) -> Optional[Callable[[np.ndarray], np.ndarray]]:
  """score -> normalized_score(game, score, references), or None when the game has no usable
  reference scores there (then only raw scores can be reported)."""
  if not has_reference(game, references):
    return None
  return lambda score: normalized_score(game, score, references)
