"""The learner interface (ccvl_tf/agents/learner.py): every registered agent is a `Learner`; the
GuardedLearners and CCVLBoundsAgent are `OnlineLearner`s; online fine-tuning builds its learners
through the registry; the public pieces of the guarded step compose to `train_on_batch`."""
import ccvl_tf  # noqa: F401

import keras
import numpy as np
import pytest
import tensorflow as tf
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts

from ccvl_tf.agents import ccvl_bounds_agent
from ccvl_tf.agents import cql_agent
from ccvl_tf.agents import learner
from ccvl_tf.algorithm import networks
from ccvl_tf.experiments import agent_registry
from ccvl_tf.experiments.online import config as online_config
from ccvl_tf.experiments.online import distributed

TINY = networks.QNetworkConfig(torso="mlp", mlp_units=(8,), n_cos=4, hidden_units=8)
ONLINE_MEMBERS = ("exploration_policy", "bounds_policy", "policy_variables",
                  "set_learning_rate", "restore_offline", "guarded_learners", "q_network",
                  "time_step_spec", "action_spec")


def _specs():
  obs = tensor_spec.BoundedTensorSpec((4,), tf.float32, 0.0, 1.0)
  return ts.time_step_spec(obs), tensor_spec.BoundedTensorSpec((), tf.int32, 0, 2)


def _batch(seed=0, b=8):
  rng = np.random.default_rng(seed)
  eye = np.eye(4, dtype=np.float32)
  return {"observation": eye[rng.integers(0, 4, b)], "action": rng.integers(0, 3, b),
          "reward": rng.random(b).astype(np.float32),
          "next_observation": eye[rng.integers(0, 4, b)],
          "terminal": (rng.random(b) < 0.2).astype(np.float32)}


def _build(name):
  keras.utils.set_random_seed(0)
  settings = agent_registry.make_settings(network_config=TINY, dataset_size=100.0, num_deltas=2,
                                          num_pairs=2, num_heads=2, num_members=2)
  return agent_registry.get_agent_spec(name, offline=False).build(*_specs(), settings)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(agent_registry.AGENT_REGISTRY))
def test_every_registered_agent_is_a_learner(name):
  agent = _build(name)
  assert isinstance(agent, learner.Learner)
  metrics = agent.train_on_batch(_batch())
  assert np.isfinite(float(metrics["loss"]))
  assert int(agent.train_step_counter.numpy()) == 1
  assert agent.variables and all(isinstance(v, tf.Variable) for v in agent.variables)
  assert isinstance(agent.make_checkpoint(), tf.train.Checkpoint)
  if name == "dqn":  # TF-Agents' QNetwork is no contract Q-model: not an online learner
    assert not isinstance(agent, learner.OnlineLearner)
    return
  assert isinstance(agent, learner.OnlineLearner)
  missing = [m for m in ONLINE_MEMBERS if not hasattr(agent, m)]
  assert not missing
  assert set(agent.guarded_learners()) == ({"", "upper/"} if name == "ccvl_bounds" else {""})
  assert (agent.bounds_policy is not None) == (name == "ccvl_bounds")
  for variables in agent.policy_variables().values():
    assert all(isinstance(v, tf.Variable) for v in variables)
  agent.set_learning_rate(1e-4)
  for part in agent.guarded_learners().values():
    assert float(part.optimizer.learning_rate.numpy()) == pytest.approx(1e-4)


def test_only_the_offline_agents_are_offline_choices():
  assert "ccvl_bounds" in agent_registry.AGENT_REGISTRY
  assert "ccvl_bounds" not in agent_registry.AGENTS
  with pytest.raises(ValueError, match="--agent must be one of .*dqn, bc, got 'ccvl_bounds'"):
    agent_registry.get_agent_spec("ccvl_bounds")


def test_the_step_pieces_compose_to_train_on_batch():
  """prepare_batch -> loss_and_grads at step_seed -> apply_update (with the counts update) is
  the step train_on_batch takes: same loss and the same weights after it."""
  a, b = _build("ccvl"), _build("ccvl")
  batch = _batch(1)
  expected = a.train_on_batch(batch)
  prepared = b.prepare_batch(batch)
  metrics, grads = b.loss_and_grads(prepared, b.step_seed())
  phi, raw = metrics.pop("phi"), metrics.pop("raw_inverse_count")
  out = b.apply_update(metrics, grads, after_adam=lambda: b.update_counts(phi, raw))
  b.check_finite(out)
  np.testing.assert_allclose(float(out["loss"]), float(expected["loss"]), rtol=1e-6)
  for va, vb in zip(a.online_variables, b.online_variables):
    np.testing.assert_allclose(va.numpy(), vb.numpy(), rtol=1e-6, atol=1e-7)
  # compiled_train_step is train_on_batch's graph (no finite check).
  np.testing.assert_allclose(float(a.compiled_train_step(a.prepare_batch(_batch(2)))["loss"]),
                             float(b.train_on_batch(_batch(2))["loss"]), rtol=1e-6)


def test_online_builds_its_learners_through_the_registry():
  tss, act = online_config.specs("gridworld")
  bounds = ccvl_bounds_agent.BoundsConfig(explore_epsilon=0.2)
  ccvl = online_config.build_agent("gridworld", tss, act, bounds, agent="ccvl")
  cql = online_config.build_agent("gridworld", tss, act, bounds, agent="cql")
  assert isinstance(ccvl, ccvl_bounds_agent.CCVLBoundsAgent)
  assert isinstance(cql, cql_agent.CQLAgent)
  assert isinstance(ccvl, learner.OnlineLearner) and isinstance(cql, learner.OnlineLearner)
  # The gridworld network of the fine-tune (n_cos 16), CCVL's config, CQL's from the same one.
  assert ccvl.lower.online_network.config.n_cos == 16
  assert (ccvl.config.num_deltas, ccvl.config.td_loss, ccvl.config.learning_rate) == \
      (4, "squared", 3e-3)
  assert (cql.config.td_loss, cql.config.learning_rate, cql.config.alpha) == (
      "squared", 3e-3, 0.2)
  # CQL explores with its greedy policy, epsilon-greedy at explore_epsilon.
  assert cql.exploration_policy is cql.collect_policy
  assert cql.collect_policy._epsilon == 0.2  # pylint: disable=protected-access
  assert ccvl.exploration_policy._epsilon == 0.2  # pylint: disable=protected-access
  assert set(cql.policy_variables()) == {"q"}
  assert set(ccvl.policy_variables()) == {"lower", "upper"}
  # Under a strategy other than the default every guarded learner has a distributed step
  # (CQL too); a learner without the guarded step's pieces is refused.
  assert callable(distributed.make_learner_step(tf.distribute.OneDeviceStrategy("/cpu:0"), cql))
  with pytest.raises(ValueError, match="GuardedLearner only .* not object"):
    distributed.make_train_step(tf.distribute.OneDeviceStrategy("/cpu:0"), object())
