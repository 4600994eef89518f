"""An online learner's train step under a tf.distribute strategy (the runner's learner step).

The step of one guarded learner is ccvl_tf/experiments/distributed.py's `make_train_step`.
"""
from __future__ import annotations

from typing import Callable, Dict

import ccvl_tf  # noqa: F401

import tensorflow as tf

from ccvl_tf.experiments.distributed import make_train_step  # noqa: F401  (re-exported)


def make_learner_step(strategy, agent) -> Callable[[Dict], Dict]:
  """batch -> metrics: one step of an online learner's guarded learners (CCVLBoundsAgent: both
  bounds, Q_u metrics prefixed 'upper/'; experiments/online/runner.py's learner step).

  Default strategy: the agents' own guarded step (`CCVLBoundsAgent.train_on_batch`).
  Otherwise (e.g. MirroredStrategy; the agent must have been built under its scope)
  `make_train_step` per guarded learner: the batch is split across replicas, the
  gradients averaged, the NaN guard and Adam run in cross-replica context.
  """
  if strategy is tf.distribute.get_strategy():
    return agent.train_on_batch
  steps = {prefix: make_train_step(strategy, learner)
           for prefix, learner in agent.guarded_learners().items()}

  def step(batch):
    metrics = {}
    for prefix, learner_step in steps.items():
      metrics.update({prefix + k: v for k, v in learner_step(batch).items()})
    return metrics
  return step
