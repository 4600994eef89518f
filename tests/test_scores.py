"""Tests for ccvl_tf/envs/scores.py: the reference scores and the one normalized score
(Atari's built-in references, MinAtar's from minatar_scores.json)."""
import ccvl_tf  # noqa: F401

import numpy as np
import pytest

from ccvl_tf.envs import scores


# ----------------------------------------------------------------------------- normalization
# (random, Nature DQN) for the paper's 16 games with both scores, typed from Mnih et al. 2015,
# Extended Data Table 2 ("Random" and "DQN" columns); YarsRevenge (not a Nature-DQN game) has
# only the Atari-57 random score 3092.9.
REFERENCE = {
    "Asterix": (210.0, 6012.0), "Breakout": (1.7, 401.2), "Pong": (-20.7, 18.9),
    "Seaquest": (68.4, 5286.0), "Qbert": (163.9, 10596.0), "SpaceInvaders": (148.0, 1976.0),
    "Zaxxon": (32.5, 4977.0), "RoadRunner": (11.5, 18257.0), "MsPacman": (307.3, 2311.0),
    "BeamRider": (363.9, 6846.0), "Jamesbond": (29.0, 576.7), "Enduro": (0.0, 301.8),
    "WizardOfWor": (563.5, 3393.0), "IceHockey": (-11.2, -1.6), "DoubleDunk": (-18.6, -18.1),
    "DemonAttack": (152.1, 9711.0),
}


def test_normalized_score_by_hand():
  # Breakout: random 1.7, DQN 401.2 -> 1.7 is 0, 401.2 is 100, 201.45 is 50.
  np.testing.assert_allclose(scores.normalized_score("Breakout", [1.7, 401.2, 201.45]),
                             [0.0, 100.0, 50.0])
  # Pong: random -20.7, DQN 18.9 -> -0.9 is 100 * 19.8 / 39.6 = 50.
  assert scores.normalized_score("Pong", -0.9) == pytest.approx(50.0)
  # DoubleDunk: random -18.6, DQN -18.1 -> -13.4 is 100 * 5.2 / 0.5 = 1040.
  assert scores.normalized_score("DoubleDunk", -13.4) == pytest.approx(1040.0)
  assert scores.normalized_score("space_invaders", 148.0) == pytest.approx(0.0)
  # Every reference entry: the literal random score maps to 0, the literal DQN score to 100,
  # and random + 1.5 (DQN - random) to 150.
  assert len(REFERENCE) == 16
  for game, (random, dqn) in REFERENCE.items():
    np.testing.assert_allclose(
        scores.normalized_score(game, [random, dqn, random + 1.5 * (dqn - random)]),
        [0.0, 100.0, 150.0], atol=1e-9, err_msg=game)
    assert (scores.RANDOM_SCORES[game], scores.DQN_SCORES[game]) == (random, dqn), game
  assert scores.RANDOM_SCORES["YarsRevenge"] == 3092.9


def test_reference_tables_cover_the_papers_games_except_yars_revenge():
  assert len(scores.ATARI_GAMES) == 17
  assert set(scores.RANDOM_SCORES) == set(scores.ATARI_GAMES)
  assert set(scores.DQN_SCORES) == set(scores.ATARI_GAMES) - {"YarsRevenge"}
  with pytest.raises(ValueError, match="Nature-DQN.*YarsRevenge"):
    scores.normalized_score("YarsRevenge", 1000.0)
  with pytest.raises(ValueError, match="random and Nature-DQN"):
    scores.normalized_score("NotAGame", 1.0)


def test_minatar_references_normalize_the_same_way():
  # {"Breakout": dqn 10, random 0.5}: 10 -> 100, 0.5 -> 0, 5.25 -> 50 (case / '_' ignored).
  refs = {"Breakout": {"dqn": 10.0, "random": 0.5}}
  assert scores.normalized_score("breakout", 10.0, refs) == 100.0
  assert scores.normalized_score("Breakout", 0.5, refs) == 0.0
  assert scores.normalized_score("Breakout", 5.25, refs) == pytest.approx(50.0)
  with pytest.raises(ValueError, match="not above the random"):
    scores.normalized_score("Asterix", 1.0, {"Asterix": {"dqn": 0.5, "random": 0.57}})
  with pytest.raises(ValueError, match=r"no reference scores for game 'Freeway' \(have: "
                                       r"Breakout\)"):
    scores.normalized_score("Freeway", 1.0, refs)
  # MinAtar references are not the Atari tables: Breakout's Atari normalization differs.
  assert scores.normalized_score("Breakout", 10.0) != scores.normalized_score("Breakout", 10.0,
                                                                              refs)


def test_normalizer_and_has_reference():
  assert scores.has_reference("Pong") and not scores.has_reference("YarsRevenge")
  assert scores.normalizer("YarsRevenge") is None
  assert scores.normalizer("Freeway", {"Breakout": {"dqn": 10.0, "random": 0.5}}) is None
  np.testing.assert_allclose(scores.normalizer("Pong")([-20.7, 18.9]), [0.0, 100.0])


def test_paper_names():
  assert scores.PAPER_METHODS == ("REM", "CQL", "AEVL", "Fixed-CCVL", "CCVL")
  assert scores.PAPER_DATASETS == ("1%", "5%", "Initial 10%")
