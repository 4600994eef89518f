"""A CCVL train step under a tf.distribute strategy (MirroredStrategy on several GPUs).

More in docs/online.md "Module notes", `ccvl_tf/experiments/online/distributed.py`.
"""
from __future__ import annotations

from typing import Callable, Dict

import ccvl_tf  # noqa: F401

import tensorflow as tf

from agents import ccvl_agent


def make_train_step(strategy: tf.distribute.Strategy, agent) -> Callable[[Dict], Dict]:
  """Returns step(batch) -> metrics for a CCVLAgent whose variables were created under
  `strategy.scope()`. The batch size must be divisible by strategy.num_replicas_in_sync.

  Raises:
    ValueError: `agent` is not a CCVLAgent (or UpperCCVLAgent).
    (from step) agents.q_agent_base.NonFiniteLossError on a NaN/inf loss or gradient (no
      variable changed), as train_on_batch does.
  """
  if not isinstance(agent, ccvl_agent.CCVLAgent):
    raise ValueError(f"a tf.distribute strategy other than the default trains CCVL learners "
                     f"only (CCVLAgent, UpperCCVLAgent), not {type(agent).__name__}; use the "
                     f"default strategy")
  n = strategy.num_replicas_in_sync

  def replica_fn(batch, seed):
    ctx = tf.distribute.get_replica_context()
    size = tf.shape(batch["observation"])[0] // n
    start = ctx.replica_id_in_sync_group * size
    part = {k: v[start:start + size] for k, v in batch.items()}  # this replica's slice
    metrics, grads = agent.loss_and_grads(part, seed)
    phi = metrics.pop("phi")
    metrics.pop("raw_inverse_count", None)  # recomputed by the update from the gathered phi
    return metrics, grads, phi

  @tf.function(reduce_retracing=True)
  def step(batch):
    seed = agent.step_seed()
    metrics, grads, phi = strategy.run(replica_fn, args=(batch, seed))
    grads = [strategy.reduce(tf.distribute.ReduceOp.SUM, g, axis=None) / n for g in grads]
    metrics = {k: strategy.reduce(tf.distribute.ReduceOp.MEAN, v, axis=None)
               for k, v in metrics.items()}
    phi = tf.concat(strategy.experimental_local_results(phi), 0)   # [B, D]
    return agent.apply_update(metrics, grads, after_adam=lambda: agent.update_counts(phi))

  def run(batch):
    batch = agent.prepare_batch(batch)
    b = int(batch["observation"].shape[0])
    if b % n:
      raise ValueError(f"batch size {b} is not divisible by the {n} replicas of {strategy}")
    metrics = step(batch)
    agent.check_finite(metrics)
    return metrics
  return run


def make_learner_step(strategy, agent) -> Callable[[Dict], Dict]:
  """batch -> metrics: one step of an online learner's guarded learners (CCVLBoundsAgent: both
  bounds, Q_u metrics prefixed 'upper/'; experiments/online/runner.py's learner step).

  Default strategy: the agents' own guarded step (`CCVLBoundsAgent.train_on_batch`).
  Otherwise (e.g. MirroredStrategy; the agent must have been built under its scope)
  `make_train_step` per bound: the batch is split across replicas, the
  gradients averaged, the NaN guard and Adam run in cross-replica context.
  """
  if strategy is tf.distribute.get_strategy():
    return agent.train_on_batch
  steps = {prefix: make_train_step(strategy, learner)  # ValueError for CQL
           for prefix, learner in agent.guarded_learners().items()}

  def step(batch):
    metrics = {}
    for prefix, learner_step in steps.items():
      metrics.update({prefix + k: v for k, v in learner_step(batch).items()})
    return metrics
  return step
