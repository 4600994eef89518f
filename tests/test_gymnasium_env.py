"""Gymnasium environments by name ('gymnasium:<EnvId>', ccvl_tf/envs/gymnasium_env.py) through
ccvl_tf.envs.factory, scored by ccvl_tf.evaluation.rollouts, collected as d3rlpy-style arrays
(ccvl_tf/data/gym_collection.py), and refused where a workflow cannot take them. Real
gymnasium environments, in-process, checked step for step against gymnasium itself."""
import dataclasses

import ccvl_tf  # noqa: F401

import gymnasium
from gymnasium import spaces
import numpy as np
import pytest
import tensorflow as tf
from tf_agents.policies import fixed_policy
from tf_agents.policies import random_tf_policy
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts

from ccvl_tf.data import gym_collection
from ccvl_tf.data import transitions
from ccvl_tf.envs import factory
from ccvl_tf.envs import gymnasium_env
from ccvl_tf.evaluation import rollouts
from ccvl_tf.experiments.compare import config as compare_config
from ccvl_tf.experiments.offline import default_dataset
from ccvl_tf.experiments.offline import gym_dataset
from ccvl_tf.experiments.offline import config as offline_config
from ccvl_tf.experiments.online import config as online_config

CARTPOLE = "gymnasium:CartPole-v1"


def _episode(env, actions):
  """TimeSteps of one episode from a reset, acting `actions` in turn (cycled) until LAST."""
  steps = [env.reset()]
  i = 0
  while not steps[-1].is_last():
    steps.append(env.step(np.int32(actions[i % len(actions)])))
    i += 1
  return steps


def test_cartpole_specs_and_scoring():
  ev = factory.make_env(CARTPOLE, seed=0)
  assert isinstance(ev.env, gymnasium_env.GymnasiumEnvironment)
  assert ev.game == CARTPOLE and ev.env.game == CARTPOLE
  obs, act = ev.env.observation_spec(), ev.env.action_spec()
  assert obs.shape == (4,) and obs.dtype == np.float32
  assert act.shape == () and act.dtype == np.int32 and (act.minimum, act.maximum) == (0, 1)
  assert ev.env.num_actions == 2 and ev.env.action_set == [0, 1]
  assert ev.normalize is None and ev.score_name == "return"
  assert factory.is_gymnasium(" Gymnasium:CartPole-v1") and not factory.is_gymnasium("Pong")
  assert factory.gymnasium_id(CARTPOLE) == "CartPole-v1"
  factory.check_game(CARTPOLE)


def test_a_terminated_episode_ends_with_discount_zero_as_gymnasium_says():
  env = factory.make_env(CARTPOLE, seed=4).env
  raw = gymnasium.make("CartPole-v1")
  raw_obs, _ = raw.reset(seed=4)
  steps = _episode(env, [1])  # always right: the pole falls within a few dozen steps
  assert steps[0].step_type == ts.StepType.FIRST
  assert all(s.step_type == ts.StepType.MID for s in steps[1:-1]) and len(steps) > 3
  assert steps[-1].step_type == ts.StepType.LAST and float(steps[-1].discount) == 0.0
  np.testing.assert_array_equal(steps[0].observation, raw_obs)
  for s in steps[1:]:
    raw_obs, reward, terminated, truncated, _ = raw.step(1)
    np.testing.assert_array_equal(s.observation, raw_obs)
    assert float(s.reward) == reward and s.is_last() == (terminated or truncated)
  assert terminated and not truncated
  assert env.episode_raw_return == len(steps) - 1  # CartPole: +1 per step
  assert not env.get_info()["truncated"]


def test_a_truncated_episode_ends_with_discount_one_and_its_raw_return():
  ev = factory.make_env(CARTPOLE, seed=0, max_episode_steps=5)
  steps = _episode(ev.env, [0, 1])  # alternating: balanced for far more than 5 steps
  assert [int(s.step_type) for s in steps] == [0, 1, 1, 1, 1, 2]
  assert float(steps[-1].discount) == 1.0 and steps[-1].is_last()
  assert [float(s.reward) for s in steps[1:]] == [1.0] * 5
  assert ev.raw_score_fn(ev.env) == 5.0 and ev.env.get_info()["truncated"]
  assert ev.env.step(np.int32(0)).is_first()  # the step after LAST starts the next episode


def _two_episodes(seed):
  env = factory.make_env(CARTPOLE, seed=seed).env
  return np.concatenate([[s.observation for s in _episode(env, [1, 1, 0])] for _ in range(2)])


def test_a_seed_gives_one_sequence_of_episodes():
  a, b, c = _two_episodes(7), _two_episodes(7), _two_episodes(8)
  np.testing.assert_array_equal(a, b)
  assert a.shape != c.shape or not np.array_equal(a, c)
  # The first reset is reset(seed=seed), the next continues the environment's RNG.
  raw = gymnasium.make("CartPole-v1")
  first, _ = raw.reset(seed=7)
  second, _ = raw.reset()
  np.testing.assert_array_equal(a[0], first)
  episode_len = len(_episode(factory.make_env(CARTPOLE, seed=7).env, [1, 1, 0]))
  np.testing.assert_array_equal(a[episode_len], second)


def test_discrete_observations_are_one_hot():
  env = factory.make_env("gymnasium:FrozenLake-v1", seed=0).env
  spec = env.observation_spec()
  assert spec.shape == (16,) and spec.dtype == np.float32
  first = env.reset().observation
  assert first.sum() == 1.0 and first[0] == 1.0  # FrozenLake starts in state 0


class _DictObservations(gymnasium.Env):
  observation_space = spaces.Dict({"x": spaces.Box(-1.0, 1.0, (2,), np.float32)})
  action_space = spaces.Discrete(2)


class _ShiftedActions(gymnasium.Env):
  """Discrete(3, start=-1) actions; the observation is the last action taken."""
  observation_space = spaces.Box(-5.0, 5.0, (1,), np.float32)
  action_space = spaces.Discrete(3, start=-1)

  def reset(self, *, seed=None, options=None):
    super().reset(seed=seed)
    return np.zeros(1, np.float32), {}

  def step(self, action):
    return np.array([action], np.float32), 0.0, False, False, {}


@pytest.fixture
def test_envs():
  ids = {"CcvlTestDictObs-v0": _DictObservations, "CcvlTestShifted-v0": _ShiftedActions}
  for env_id, cls in ids.items():
    gymnasium.register(id=env_id, entry_point=cls)
  yield
  for env_id in ids:
    del gymnasium.envs.registry[env_id]


@pytest.mark.parametrize("game,message", [
    ("gymnasium:CartPole-v9", "unknown game 'gymnasium:CartPole-v9': gymnasium registers no "
                              "environment 'CartPole-v9'; did you mean gymnasium:CartPole-v1"),
    ("gymnasium:Pendulum-v1", "gymnasium:Pendulum-v1: its action space Box(-2.0, 2.0, (1,), "
                              "float32) is not Discrete (expected Discrete(n)"),
    ("gymnasium:Blackjack-v1", "gymnasium:Blackjack-v1: its observation space Tuple("),
    ("gymnasium:CcvlTestDictObs-v0", "gymnasium:CcvlTestDictObs-v0: its observation space "
                                     "Dict('x': Box("),
])
def test_check_game_refuses_in_one_line(test_envs, game, message):
  del test_envs
  for check in (factory.check_game, factory.make_env):
    with pytest.raises(ValueError) as e:
      check(game)
    assert str(e.value).startswith(message), str(e.value)
    assert "\n" not in str(e.value)


def test_actions_of_a_discrete_space_not_starting_at_zero(test_envs):
  del test_envs
  env = factory.make_env("gymnasium:CcvlTestShifted-v0").env
  assert env.num_actions == 3 and env.action_set == [-1, 0, 1]
  env.reset()
  assert [float(env.step(np.int32(a)).observation[0]) for a in (0, 2, 1)] == [-1.0, 1.0, 0.0]
  with pytest.raises(ValueError, match=r"action 3 outside \[0, 3\)"):
    env.step(np.int32(3))


def _random_policy(env):
  tss = ts.time_step_spec(tensor_spec.from_spec(env.observation_spec()))
  return random_tf_policy.RandomTFPolicy(tss, tensor_spec.from_spec(env.action_spec()))


def test_run_episodes_scores_the_raw_return():
  ev = factory.make_env(CARTPOLE, seed=1, max_episode_steps=30)
  tf.random.set_seed(0)
  records = rollouts.run_episodes(_random_policy(ev.env), ev.env, 4, seed=1,
                                  raw_score_fn=ev.raw_score_fn)
  assert len(records) == 4
  for r in records:
    assert 1 <= r.length <= 30
    assert r.raw_score == r.return_ == float(r.length)  # +1 per step, unclipped


def _replayed(data, seed, max_episode_steps=None):
  """Observations and (terminated, truncated) of gymnasium itself acting data's actions: the
  first reset seeded, the next ones continuing its RNG."""
  kw = {} if max_episode_steps is None else {"max_episode_steps": max_episode_steps}
  raw = gymnasium.make("CartPole-v1", **kw)
  obs, _ = raw.reset(seed=seed)
  observations, ends = [], []
  for a in data["actions"]:
    observations.append(obs)
    obs, _, terminated, truncated, _ = raw.step(int(a))
    ends.append((terminated, truncated))
    if terminated or truncated:
      obs, _ = raw.reset()
  return np.array(observations), np.array(ends)


def test_collection_arrays_match_the_environment():
  data = gym_dataset.collect(CARTPOLE, 150, seed=3)
  assert data["num_actions"] == 2
  assert data["observations"].shape == (150, 4) and data["observations"].dtype == np.float32
  for key, dtype in (("actions", np.int32), ("rewards", np.float32), ("terminals", bool),
                     ("timeouts", bool)):
    assert data[key].shape == (150,) and data[key].dtype == dtype, key
  observations, ends = _replayed(data, 3)
  np.testing.assert_array_equal(data["observations"], observations)
  np.testing.assert_array_equal(data["terminals"], ends[:, 0])
  assert data["terminals"].sum() >= 3 and not (data["terminals"] & data["timeouts"]).any()
  assert np.all(data["rewards"] == 1.0)
  # The last step: the end of an episode, a timeout where the collection cut one short.
  assert data["timeouts"][-1] != data["terminals"][-1]
  assert data["timeouts"][:-1].sum() == 0  # CartPole's 500-step limit is never reached here
  again = gym_dataset.collect(CARTPOLE, 150, seed=3)
  other = gym_dataset.collect(CARTPOLE, 150, seed=4)
  for key in gym_collection.ARRAYS:
    np.testing.assert_array_equal(data[key], again[key])
  assert not np.array_equal(data["observations"], other["observations"])


def test_collection_marks_truncations_and_the_cut_as_timeouts():
  data = gym_dataset.collect(CARTPOLE, 23, seed=0, max_episode_steps=4)
  observations, ends = _replayed(data, 0, max_episode_steps=4)
  np.testing.assert_array_equal(data["observations"], observations)
  np.testing.assert_array_equal(data["terminals"], ends[:, 0])
  np.testing.assert_array_equal(data["timeouts"][:-1], ends[:-1, 1] & ~ends[:-1, 0])
  assert data["timeouts"].sum() >= 3
  assert data["timeouts"][-1]  # 23 = 5 x 4 + 3: cut inside an episode


def test_collection_with_a_policy_and_epsilon():
  env = factory.make_env(CARTPOLE).env
  tss = ts.time_step_spec(tensor_spec.from_spec(env.observation_spec()))
  right = fixed_policy.FixedPolicy(np.int32(1), tss, tensor_spec.from_spec(env.action_spec()))
  greedy = gym_dataset.collect(CARTPOLE, 40, seed=2, policy=right)
  assert np.all(greedy["actions"] == 1) and greedy["terminals"].any()
  mixed = gym_dataset.collect(CARTPOLE, 40, seed=2, policy=right, epsilon=0.5)
  again = gym_dataset.collect(CARTPOLE, 40, seed=2, policy=right, epsilon=0.5)
  assert 0 < np.sum(mixed["actions"] == 0) < 40
  np.testing.assert_array_equal(mixed["actions"], again["actions"])


def test_collect_takes_a_policy_by_its_savedmodel_directory_as_the_binary_does(tmp_path):
  from ccvl_tf.algorithm import policy_export
  env = factory.make_env(CARTPOLE).env
  tss = ts.time_step_spec(tensor_spec.from_spec(env.observation_spec()))
  right = fixed_policy.FixedPolicy(np.int32(1), tss, tensor_spec.from_spec(env.action_spec()))
  export = policy_export.export_policy(right, str(tmp_path / "right"), game=CARTPOLE,
                                       action_set=env.action_set)
  by_dir = ccvl_tf.collect(CARTPOLE, 40, seed=2, policy=export, epsilon=0.5)
  by_object = ccvl_tf.collect(CARTPOLE, 40, seed=2, policy=right, epsilon=0.5)
  np.testing.assert_array_equal(by_dir["actions"], by_object["actions"])
  assert 0 < np.sum(by_dir["actions"] == 0) < 40  # epsilon's random actions among the policy's 1
  with pytest.raises(ValueError, match=r"3 actions|num_actions|action"):
    ccvl_tf.collect("gymnasium:Acrobot-v1", 10, policy=export)  # 3 actions, the export's 2
  missing = str(tmp_path / "nope")
  with pytest.raises(ValueError, match=rf"^policy must be 'random' or a SavedModel directory; "
                                       rf"{missing} does not exist$"):
    ccvl_tf.collect(CARTPOLE, 10, policy=missing)
  assert np.array_equal(ccvl_tf.collect(CARTPOLE, 10, seed=1, policy="random")["actions"],
                        ccvl_tf.collect(CARTPOLE, 10, seed=1)["actions"])
  for seed in (-1, 1.5, "0", True):  # refused where every route makes its environment
    with pytest.raises(ValueError, match=rf"^seed must be an integer >= 0, got {seed!r}$"):
      ccvl_tf.collect(CARTPOLE, 10, seed=seed)


def test_collect_dataset_config_writes_the_npz(tmp_path):
  out = tmp_path / "sub" / "cartpole.npz"
  cfg = default_dataset.CollectConfig(game=CARTPOLE, steps=60, output=str(out), seed=5,
                                      progress_every=30)
  lines = []
  summary = gym_dataset.run(cfg, log=lines.append)
  saved = np.load(out)
  assert sorted(saved.files) == sorted(gym_collection.ARRAYS + ("num_actions",))
  expected = gym_dataset.collect(CARTPOLE, 60, seed=5)
  for key in gym_collection.ARRAYS:
    np.testing.assert_array_equal(saved[key], expected[key])
  assert int(saved["num_actions"]) == 2
  # The reader of own data takes it: one transition per step but each timed-out episode's last.
  data = transitions.Transitions.from_npz(out)
  assert data.num_actions == 2 and data.observation_shape == (4,)
  assert data.num_transitions == 60 - int(expected["timeouts"].sum())
  assert data.num_episodes == int((expected["terminals"] | expected["timeouts"]).sum())
  assert summary["episodes"] == int(expected["terminals"].sum())
  assert lines[-1].startswith(f"wrote {out}: 60 steps")
  with pytest.raises(ValueError, match="exists; refusing to write over it"):
    gym_dataset.run(cfg, log=lines.append)


@pytest.mark.parametrize("game,given,message", [
    (CARTPOLE, ["output_dir"], "--output_dir is a setting of an Atari game"),
    (CARTPOLE, ["num_envs"], "--num_envs is a setting of an Atari game"),
    (CARTPOLE, [], "--game=gymnasium:CartPole-v1 writes one .npz: give --output=PATH.npz"),
    ("Breakout", ["output"], "--output is a setting of a Gymnasium environment"),
    ("Breakout", [], "--game=Breakout writes Dopamine replay checkpoints: give --output_dir"),
])
def test_collect_dataset_refuses_the_other_games_settings(game, given, message):
  cfg = default_dataset.CollectConfig(game=game, steps=10)
  with pytest.raises(ValueError) as e:
    cfg.check_game_flags(given)
  assert str(e.value).startswith(message), str(e.value)
  dataclasses.replace(cfg, output="x.npz", output_dir="d").check_game_flags([])


def test_workflows_that_cannot_take_a_gymnasium_game_refuse_it_naming_the_flag(tmp_path):
  cases = [
      (lambda: offline_config.OfflineConfig(game=CARTPOLE, root_dir=str(tmp_path / "r"))
       .validate(), "--game=gymnasium:CartPole-v1: without --dataset, train_offline.py trains on "
                    "an Atari game's DQN Replay data"),
      # Online fine-tuning takes one for a run on own data only (tests/test_finetune_own_data.py):
      # without that run's network, the server's tables for it are refused.
      (lambda: online_config.make_server_tables(online_config.OnlineConfig(game=CARTPOLE)),
       "--game=gymnasium:CartPole-v1: online fine-tuning in a Gymnasium environment starts "
       "from a run of ccvl_tf.fit on own data"),
      (lambda: compare_config.CompareConfig(suite="minatar", games=[CARTPOLE]).validate(),
       "--games=gymnasium:CartPole-v1: --suite=minatar trains on the suite's own datasets"),
  ]
  for call, message in cases:
    with pytest.raises(ValueError) as e:
      call()
    assert str(e.value).startswith(message), str(e.value)
