"""A learner's guarded train step under a tf.distribute strategy (MirroredStrategy over several
GPUs, or logical CPU devices in the tests), shared by offline training (--distribute) and online
fine-tuning (--strategy).

More in docs/online.md "Module notes", `ccvl_tf/experiments/distributed.py`.
"""
from __future__ import annotations

from typing import Callable, Dict

import ccvl_tf  # noqa: F401

import tensorflow as tf
from tf_agents.utils import common

from ccvl_tf.agents import q_agent_base


def make_train_step(strategy: tf.distribute.Strategy, agent) -> Callable[[Dict], Dict]:
  """Returns step(batch) -> metrics for a GuardedLearner (CCVL, CQL, REM, AEVL, BC) whose
  variables were created under `strategy.scope()`: each replica takes its equal slice of the
  batch (the batch size must be divisible by strategy.num_replicas_in_sync) and computes the
  loss and gradients (`agent.step_loss_and_grads`: `loss_and_grads`, XLA-compiled with
  jit_compile); in cross-replica context the gradients are
  averaged, the scalar metrics averaged, the per-example entries (CCVL's phi(s) [B, D] and raw
  n(s)^-1 [B]) concatenated in batch order, then the agent's guarded update runs
  (`agent.apply_update`: the NaN guard, Adam, `agent.update_hook`'s callback, step, target copy).

  Raises:
    ValueError: `agent` is not a GuardedLearner, or uses CCVL's count_gram='exact' (its
      refresh from the dataset runs eagerly outside the strategy).
    (from step) ccvl_tf.agents.q_agent_base.NonFiniteLossError on a NaN/inf loss or gradient (no
      variable changed), as train_on_batch does.
  """
  if not isinstance(agent, q_agent_base.GuardedLearner):
    raise ValueError(f"a tf.distribute strategy other than the default trains the learners of "
                     f"ccvl_tf/agents/q_agent_base.GuardedLearner only (CCVL, CQL, REM, AEVL, BC), not "
                     f"{type(agent).__name__}; use the default strategy")
  if getattr(agent, "exact_gram", False):
    raise ValueError("CCVL's count_gram='exact' is not supported under a tf.distribute "
                     "strategy (its Phi^T Phi refresh runs outside the strategy); use "
                     "count_gram='running' or the default strategy")
  n = strategy.num_replicas_in_sync

  def replica_fn(batch, seed):
    ctx = tf.distribute.get_replica_context()
    size = tf.shape(batch["observation"])[0] // n
    start = ctx.replica_id_in_sync_group * size
    part = {k: v[start:start + size] for k, v in batch.items()}  # this replica's slice
    metrics, grads = agent.step_loss_and_grads(part, seed)   # XLA with --jit_compile
    scalars = {k: v for k, v in metrics.items() if v.shape.rank == 0}
    rows = {k: v for k, v in metrics.items() if v.shape.rank != 0}   # [size, ...] each
    return scalars, grads, rows

  @common.function
  def step(batch):
    seed = agent.step_seed()
    scalars, grads, rows = strategy.run(replica_fn, args=(batch, seed))
    grads = [strategy.reduce(tf.distribute.ReduceOp.SUM, g, axis=None) / n for g in grads]
    metrics = {k: strategy.reduce(tf.distribute.ReduceOp.MEAN, v, axis=None)
               for k, v in scalars.items()}
    metrics.update({k: tf.concat(strategy.experimental_local_results(v), 0)   # [B, ...]
                    for k, v in rows.items()})
    return agent.apply_update(metrics, grads, after_adam=agent.update_hook(metrics))

  def run(batch):
    batch = agent.prepare_batch(batch)
    b = int(batch["observation"].shape[0])
    if b % n:
      raise ValueError(f"batch size {b} is not divisible by the {n} replicas of "
                       f"{type(strategy).__name__}")
    metrics = step(batch)
    agent.check_finite(metrics)
    return metrics
  return run


class StrategyLearner:
  """`agent` trained under `strategy`: `train_on_batch` is `make_train_step`'s step; every other
  attribute (train_step_counter, make_checkpoint, the policies, ...) is the agent's, so the
  training loop (ccvl_tf/runtime/training.py) takes it in the agent's place."""

  def __init__(self, strategy: tf.distribute.Strategy, agent):
    self._agent = agent
    self.strategy = strategy
    self.train_on_batch = make_train_step(strategy, agent)

  @property
  def agent(self):
    return self._agent

  def __getattr__(self, name):
    return getattr(self._agent, name)
