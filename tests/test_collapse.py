"""CCVL learns where CQL learns (docs/ladder.md).

Two failures of CCVL's network at CQL's settings were found on Atari and are guarded here:

* The head must not starve the torso. With CQL's loss (the ladder's rung 1: one delta, a
  constant weight) and CQL's Adam settings (lr 1e-3, epsilon 3.125e-4), a head with a hidden
  ReLU layer after the delta product passed ~5x less gradient to the torso than CQL's linear
  head, most of it below Adam's epsilon; on the demo's data that network ended with one greedy
  action at every state (1.1 against CQL's 26.9). Measured on 200 steps of the testdata's
  Breakout frames, the torso's dense layer moved (relative weight change) 0.40x as far as
  CQL's with that hidden layer and the cosine head (0.79x with the monotone head), and 0.66x /
  1.08x without it (the default): the test asks for at least half CQL's pace.
* The default objective must rank actions. On a small task whose best action differs by state
  and whose rarely taken actions have noisy rewards, CQL's greedy action is the best one at
  every state; CCVL as `make demo` trains it (CCVLConfig's defaults under the demo preset)
  must act as CQL does. The earlier default (Eq. update's bonus with n(s): the same
  downward shift for every action of a state) followed the noise: it agreed with CQL at 11 of
  16 states.
"""
import ccvl_tf  # noqa: F401

import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts

from ccvl_tf.agents import ccvl_agent
from ccvl_tf.agents import cql_agent
from ccvl_tf.algorithm import networks
from ccvl_tf.algorithm.readings import bound
from ccvl_tf.data import frame_store
from ccvl_tf.data import pipeline
from ccvl_tf.experiments.offline import presets

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTDATA = os.path.join(ROOT, "testdata", "dqn_replay", "Breakout", "1", "replay_logs")
# CQL's demo settings (the preset's), shared by both learners of each test.
CQL_SETTINGS = dict(presets.resolve("demo", "cql", {}), adam_epsilon=3.125e-4)
# The ladder's rung 1: CQL's loss in CCVL's network (tests/test_ladder.py checks the loss).
RUNG_ONE = dict(reading=bound.Bound(train_delta=0.5, delta_weight="constant",
                                    count_weight="off"), num_deltas=1, num_pairs=1)
TORSO_STEPS = 200
MIN_TORSO_PACE = 0.5


@pytest.fixture(scope="module")
def breakout_batches():
  store = frame_store.FrameStore.from_replay(TESTDATA, "all", num_actions=4)
  ds = pipeline.transition_dataset(store, 32, seed=0)
  return [b for _, b in zip(range(TORSO_STEPS), ds)]


def _breakout_specs():
  return (ts.time_step_spec(tensor_spec.TensorSpec([84, 84, 4], tf.uint8)),
          tensor_spec.BoundedTensorSpec([], tf.int64, 0, 3))


def _torso_moved(agent, batches) -> float:
  """|W_T - W_0| / |W_0| of the torso's dense kernel after training on `batches`."""
  kernel = [v for v in agent.online_network.trainable_variables
            if v.path.endswith("torso_dense/kernel")]
  assert len(kernel) == 1, [v.path for v in agent.online_network.trainable_variables]
  w0 = np.array(kernel[0])
  for b in batches:
    agent.train_on_batch(b)
  return float(np.linalg.norm(np.array(kernel[0]) - w0) / np.linalg.norm(w0))


@pytest.fixture(scope="module")
def cql_torso_moved(breakout_batches):
  keras.utils.set_random_seed(0)
  agent = cql_agent.CQLAgent(*_breakout_specs(), cql_agent.CQLConfig(**CQL_SETTINGS))
  return _torso_moved(agent, breakout_batches)


@pytest.mark.slow
@pytest.mark.parametrize("head", ["cosine", "monotone"])
def test_the_default_head_lets_the_torso_learn_at_cqls_pace(head, breakout_batches,
                                                             cql_torso_moved):
  keras.utils.set_random_seed(0)
  config = ccvl_agent.CCVLConfig(**CQL_SETTINGS, **RUNG_ONE, delta_head=head)
  agent = ccvl_agent.CCVLAgent(*_breakout_specs(), config, networks.QNetworkConfig(),
                               dataset_size=2489.0)
  pace = _torso_moved(agent, breakout_batches) / cql_torso_moved
  assert pace >= MIN_TORSO_PACE, (
      f"the {head} head's torso moved {pace:.2f}x as far as CQL's in {TORSO_STEPS} steps")


# ---- the default objective ranks actions as CQL does --------------------------------------------
NUM_STATES, NUM_ACTIONS, NUM_TRANSITIONS = 16, 4, 1000
BANDIT_STEPS = 1500


def _noisy_bandit():
  """One-step episodes on one-hot states: the best action s mod 4 is taken with probability
  0.82 and pays 0.3 on average, the others pay 0; every reward carries N(0, 1) noise (clipped
  to [-1, 1]), so an action seen a few times at a state can look best."""
  rng = np.random.default_rng(0)
  states = rng.integers(0, NUM_STATES, NUM_TRANSITIONS)
  best = states % NUM_ACTIONS
  other = (best + rng.integers(1, NUM_ACTIONS, NUM_TRANSITIONS)) % NUM_ACTIONS
  actions = np.where(rng.random(NUM_TRANSITIONS) < 0.82, best, other)
  rewards = np.clip(np.where(actions == best, 0.3, 0.0)
                    + rng.normal(0.0, 1.0, NUM_TRANSITIONS), -1, 1)
  return np.eye(NUM_STATES, dtype=np.float32)[states], actions, rewards.astype(np.float32)


def _greedy_after_training(agent, obs, actions, rewards) -> np.ndarray:
  rng = np.random.default_rng(1)
  for _ in range(BANDIT_STEPS):
    i = rng.integers(0, len(obs), 32)
    agent.train_on_batch({"observation": obs[i], "next_observation": obs[i],
                          "action": actions[i], "reward": rewards[i],
                          "terminal": np.ones(32, np.float32)})
  q = agent.q_network({"observation": tf.eye(NUM_STATES),
                       "delta": tf.fill([NUM_STATES, 1], 0.5)}).numpy()[:, 0]   # [S, A]
  return q.argmax(-1)


@pytest.mark.slow
def test_the_demo_ccvl_acts_as_cql_where_rare_actions_are_noisy():
  obs, actions, rewards = _noisy_bandit()
  specs = (ts.time_step_spec(tensor_spec.TensorSpec([NUM_STATES], tf.float32)),
           tensor_spec.BoundedTensorSpec([], tf.int64, 0, NUM_ACTIONS - 1))
  net = networks.QNetworkConfig(torso="mlp", mlp_units=(64,))  # the other fields: defaults
  keras.utils.set_random_seed(0)
  cql = cql_agent.CQLAgent(*specs, cql_agent.CQLConfig(**presets.resolve("demo", "cql", {})),
                           net)
  cql_greedy = _greedy_after_training(cql, obs, actions, rewards)
  # CQL learns the state-dependent best action (the task is learnable).
  assert np.array_equal(cql_greedy, np.arange(NUM_STATES) % NUM_ACTIONS), cql_greedy
  keras.utils.set_random_seed(0)
  config = ccvl_agent.CCVLConfig().with_values(presets.resolve("demo", "ccvl", {}))
  ccvl = ccvl_agent.CCVLAgent(*specs, config, net, dataset_size=float(NUM_TRANSITIONS))
  greedy = _greedy_after_training(ccvl, obs, actions, rewards)
  agreement = float(np.mean(greedy == cql_greedy))
  mode_share = np.bincount(greedy, minlength=NUM_ACTIONS).max() / NUM_STATES
  assert agreement >= 0.9, (agreement, greedy, cql_greedy)
  assert mode_share < 0.9, greedy
