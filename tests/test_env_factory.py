"""ccvl_tf/envs/factory.py: the one make_env (gridworld, MinAtar, Atari) and its scoring."""
import ccvl_tf  # noqa: F401

import numpy as np
import pytest

from ccvl_tf.envs import scores
from ccvl_tf.envs import atari
from ccvl_tf.envs import factory
from ccvl_tf.tabular import gridworld
from ccvl_tf.envs import gridworld_env
from ccvl_tf.envs import minatar
from ccvl_tf.tabular import evaluation as tabular_eval


def test_gridworld_at_evaluation_slip_with_its_own_or_a_given_horizon():
  ev = factory.make_env("GridWorld", seed=3)
  assert isinstance(ev.env, gridworld_env.GridWorldEnvironment) and ev.game == "gridworld"
  assert ev.env.world == gridworld.GridWorld(slip_prob=gridworld.EVAL_SLIP_PROB)
  assert ev.env.observation_spec().shape == (64,) and ev.score_name == "discounted return"
  opt = tabular_eval.optimal_return(ev.env.world)
  np.testing.assert_allclose(ev.normalize([opt, 0.5 * opt]), [100.0, 50.0])
  short = factory.make_env("gridworld", max_episode_steps=7)
  assert short.env.world.horizon == 7 and short.env.world.slip_prob == gridworld.EVAL_SLIP_PROB
  # The reference is the optimal return within the episode cap: 7 steps is the shortest route.
  assert short.normalize(1.0) > ev.normalize(1.0)
  ev.env.reset()
  ev.env.step(np.int32(1))
  assert ev.raw_score_fn(ev.env) == ev.env.get_info()["episode_discounted_return"]


def test_minatar_needs_its_prefix_and_its_references():
  ev = factory.make_env("minatar/breakout", seed=0, max_episode_steps=9)
  assert isinstance(ev.env, minatar.MinAtarEnvironment) and ev.game == "minatar/Breakout"
  assert ev.env.observation_spec().shape == (10, 10, 4) and ev.normalize is None
  assert ev.env._max_steps == 9  # pylint: disable=protected-access
  refs = {"Breakout": {"dqn": 10.5, "random": 0.5}}
  ev = factory.make_env("MinAtar/Breakout-v1", references=refs)
  assert ev.env._max_steps == minatar.MAX_EPISODE_STEPS  # pylint: disable=protected-access
  assert ev.normalize(5.5) == pytest.approx(50.0)
  assert factory.is_minatar("minatar:asterix") and not factory.is_minatar("Breakout")


def test_atari_game_scored_against_random_and_nature_dqn():
  ev = factory.make_env("space_invaders", seed=1)
  assert isinstance(ev.env, atari.AtariEnvironment) and ev.game == "SpaceInvaders"
  assert ev.env._max_steps == atari.MAX_EPISODE_STEPS  # pylint: disable=protected-access
  assert ev.normalize(148.0) == pytest.approx(0.0)
  assert ev.normalize(1976.0) == pytest.approx(scores.normalized_score("SpaceInvaders", 1976.0))
  assert factory.make_env("YarsRevenge").normalize is None  # no Nature-DQN score


def test_unknown_games_list_the_valid_names():
  with pytest.raises(ValueError, match=r"unknown game 'Breakot'; valid games: 'gridworld'; "
                                       r"MinAtar 'minatar/<Game>' with <Game> one of Asterix, "
                                       r"Breakout, Freeway, Seaquest, SpaceInvaders; a Gymnasium "
                                       r"environment with a Discrete action space as "
                                       r"'gymnasium:<EnvId>' \(e.g. 'gymnasium:CartPole-v1'\); "
                                       r"or an Atari game, one of .*Breakout"):
    factory.make_env("Breakot")
  with pytest.raises(ValueError, match="unknown MinAtar game 'minatar/Pong'; valid games"):
    factory.make_env("minatar/Pong")
