"""A CCVL train step under a tf.distribute strategy (MirroredStrategy on several GPUs).

`CCVLAgent.train_on_batch` applies Adam inside a `tf.cond` (the NaN guard). Under
MirroredStrategy that is a synchronization point inside control flow in replica context, which
TensorFlow rejects ("`merge_call` called while defining a new graph ..."). This step splits the
work the way TF-Agents' `Learner` / Keras do, keeping the guard:

  replica context  (strategy.run)    each replica takes its slice of the batch, computes the
                                     loss and gradients (`agent._loss_and_grads`) and phi(s);
  cross-replica    (the tf.function) gradients are averaged over replicas (= gradient of the
                                     full-batch mean loss for equal slices), metrics averaged,
                                     phi concatenated; then the same guarded update as
                                     CCVLAgent._train_batch: Adam, counts, step, target copy.

Equal slices make it the same optimization step as the single-device step on the whole batch
(tested on two logical CPUs: tests/test_online.py::test_mirrored_step_equals_single_device_step).
It works for `agents.ccvl_agent.CCVLAgent` and its subclass `UpperCCVLAgent`, whose private
members it uses (keep it in sync with CCVLAgent._train_batch).
"""
from __future__ import annotations

from typing import Callable, Dict

import ccvl_tf  # noqa: F401

import tensorflow as tf


def make_train_step(strategy: tf.distribute.Strategy, agent) -> Callable[[Dict], Dict]:
  """Returns step(batch) -> metrics for a CCVLAgent whose variables were created under
  `strategy.scope()`. The batch size must be divisible by strategy.num_replicas_in_sync.

  Raises (from step): agents.ccvl_agent.NonFiniteLossError on a NaN/inf loss or gradient (no
  variable changed), as train_on_batch does.
  """
  # pylint: disable=protected-access
  n = strategy.num_replicas_in_sync
  cfg = agent._config
  variables = agent._online.trainable_variables
  counter = agent.train_step_counter

  def replica_fn(batch, seed):
    ctx = tf.distribute.get_replica_context()
    size = tf.shape(batch["observation"])[0] // n
    start = ctx.replica_id_in_sync_group * size
    part = {k: v[start:start + size] for k, v in batch.items()}  # this replica's slice
    metrics, grads = agent._loss_and_grads(part, seed)
    phi = metrics.pop("phi")
    return metrics, grads, phi

  @tf.function(reduce_retracing=True)
  def step(batch):
    seed = agent._seed()
    metrics, grads, phi = strategy.run(replica_fn, args=(batch, seed))
    grads = [strategy.reduce(tf.distribute.ReduceOp.SUM, g, axis=None) / n for g in grads]
    metrics = {k: strategy.reduce(tf.distribute.ReduceOp.MEAN, v, axis=None)
               for k, v in metrics.items()}
    phi = tf.concat(strategy.experimental_local_results(phi), 0)   # [B, D]
    finite = tf.math.is_finite(metrics["loss"])
    for g in grads:
      finite = tf.logical_and(finite, tf.reduce_all(tf.math.is_finite(g)))

    def apply():
      agent._optimizer.apply_gradients(zip(grads, variables))
      if agent._counts is not None:
        agent._counts.update(phi)
        if cfg.count_refresh_period == 1:
          agent._counts.refresh()
        else:
          def refresh():
            agent._counts.refresh()
            return tf.constant(True)
          tf.cond(tf.equal(counter % cfg.count_refresh_period, 0), refresh,
                  lambda: tf.constant(False))
      new_step = counter.assign_add(1)

      def update_target():
        for s, t in zip(agent._online_vars, agent._target_vars):
          t.assign(s)
        return tf.constant(True)
      tf.cond(tf.equal(new_step % cfg.target_update_period, 0), update_target,
              lambda: tf.constant(False))
      return tf.constant(True)

    tf.cond(finite, apply, lambda: tf.constant(False))
    metrics["finite"] = finite
    metrics["step"] = tf.identity(counter) - tf.cast(finite, tf.int64)
    return metrics

  def run(batch):
    batch = agent._as_batch(batch)
    b = int(batch["observation"].shape[0])
    if b % n:
      raise ValueError(f"batch size {b} is not divisible by the {n} replicas of {strategy}")
    metrics = step(batch)
    agent._check_finite(metrics)
    return metrics
  # pylint: enable=protected-access
  return run
