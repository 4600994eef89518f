"""The learner interface every agent here implements: one shape of 'learner'.

`Learner` is what the offline loop (`ccvl_tf.runtime.training.train`), the agent registry
(`ccvl_tf.experiments.agent_registry`) and the comparison use; `OnlineLearner` adds what online
fine-tuning (`ccvl_tf.experiments.online.runner`) uses: the exploration policy the actors run, the
weights they pull, the learning-rate setter, the offline-checkpoint restore and the guarded
learners a tf.distribute step trains.

Who implements what (checked by tests/test_learner.py):
  * `ccvl_tf.agents.q_agent_base.GuardedLearner` subclasses -- CCVLAgent, UpperCCVLAgent (lower / upper
    bound Q_l, Q_u(s, a, delta)), CQLAgent, REMAgent, AEVLAgent: both protocols;
  * `ccvl_tf.agents.ccvl_bounds_agent.CCVLBoundsAgent` (Q_l and Q_u side by side): both protocols;
  * `ccvl_tf.agents.dqn_agent.DQNLearner` (TF-Agents' DqnAgent): `Learner` only (no contract
    `q_network`, so the online evaluation cannot act with it).

Both are `typing.Protocol`s (structural: nothing inherits from them) and `runtime_checkable`
(`isinstance(x, Learner)` checks that every member is present, not its signature).
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Protocol, Sequence, runtime_checkable

import tensorflow as tf


@runtime_checkable
class Learner(Protocol):
  """A learner trained on docs/CONTRACTS.md transition batches.

  Members:
    train_step_counter: int64 tf.Variable, the number of completed (applied) train steps.
    variables: every tf.Variable of the learner (tf.Module's).
    policy: the learner's greedy / safe TF-Agents policy (CCVL: greedy in Q_l at policy_delta).
    train_on_batch(batch): one guarded train step; returns scalar metrics with at least 'loss';
      raises FloatingPointError (ccvl_tf.agents.q_agent_base.NonFiniteLossError) on a NaN/inf loss or
      gradient without changing any variable.
    make_checkpoint(**extra): a tf.train.Checkpoint of everything a restart needs (networks,
      target networks, Adam, train step; CCVL: the n(s)^-1 statistics), plus `extra`.
  """

  @property
  def train_step_counter(self) -> tf.Variable:
    ...

  @property
  def variables(self) -> Sequence[tf.Variable]:
    ...

  @property
  def policy(self):
    ...

  def train_on_batch(self, batch: Mapping[str, object]) -> Dict[str, tf.Tensor]:
    ...

  def make_checkpoint(self, **extra) -> tf.train.Checkpoint:
    ...


@runtime_checkable
class OnlineLearner(Learner, Protocol):
  """A learner online fine-tuning can run (paper Sec. "Online Fine-Tuning on Atari").

  Members:
    time_step_spec, action_spec: the TF-Agents specs it was built for.
    q_network: contract Q-model {'observation', 'delta'} -> Q [B, K, A] of the (lower) bound.
    exploration_policy: what actors collect with, epsilon-greedy (CCVLBoundsAgent: Eq. upper
      policy; one-bound learners: their greedy policy, i.e. TF-Agents' `collect_policy`).
    bounds_policy: Eq. upper policy without epsilon (argmax Q_u over the safe set
      {a : Q_l >= beta max Q_l}), or None for a learner without an upper bound.
    policy_variables(): name -> online tf.Variables the actors pull ('q' for one network;
      'lower' and 'upper' for the two bounds).
    set_learning_rate(lr): Adam's learning rate of every network it trains.
    restore_offline(path): restores an offline checkpoint into it; returns what was restored
      (for the log); raises AssertionError / ValueError / tf.errors.OpError when it does not fit.
    guarded_learners(): metric prefix -> the GuardedLearners it steps on each batch, in order
      ({'': self}; CCVLBoundsAgent: {'': Q_l, 'upper/': Q_u}).
  """

  @property
  def time_step_spec(self):
    ...

  @property
  def action_spec(self):
    ...

  @property
  def q_network(self):
    ...

  @property
  def exploration_policy(self):
    ...

  @property
  def bounds_policy(self) -> Optional[object]:
    ...

  def policy_variables(self) -> Dict[str, List[tf.Variable]]:
    ...

  def set_learning_rate(self, lr: float) -> None:
    ...

  def restore_offline(self, path: str) -> str:
    ...

  def guarded_learners(self) -> Dict[str, object]:
    ...
