"""How a run computes, beside its device (tf_setup.py): the networks' precision (keras mixed
precision), XLA compilation of the loss-and-gradient step, and the tf.distribute strategy that
splits each batch over the visible devices. The defaults (float32, no XLA, one device) train
bit for bit what a run without these settings trains.

More in docs/agent.md "Device, precision, XLA and replicas".
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Iterator, Optional, Sequence

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import keras
import tensorflow as tf

from ccvl_tf.experiments import distributed

# --mixed_precision -> the keras dtype policy the networks are built under.
PRECISION_POLICIES = {"off": "float32", "float16": "mixed_float16",
                      "bfloat16": "mixed_bfloat16"}
STRATEGIES = ("none", "mirrored")


@dataclasses.dataclass(frozen=True)
class Compute:
  """mixed_precision: a key of PRECISION_POLICIES; jit_compile: XLA-compile the loss and
  gradients (GuardedLearner.set_jit_compile); distribute: 'none' (one device) or 'mirrored'
  (tf.distribute.MirroredStrategy over `devices`)."""
  mixed_precision: str = "off"
  jit_compile: bool = False
  distribute: str = "none"

  def __post_init__(self):
    if self.mixed_precision not in PRECISION_POLICIES:
      raise ValueError(f"--mixed_precision must be one of {', '.join(PRECISION_POLICIES)}, got "
                       f"{self.mixed_precision!r}")
    if self.distribute not in STRATEGIES:
      raise ValueError(f"--distribute must be one of {', '.join(STRATEGIES)}, got "
                       f"{self.distribute!r}")

  @property
  def is_default(self) -> bool:
    return self == Compute()

  def strategy(self, devices: Optional[Sequence[str]] = None
               ) -> Optional[tf.distribute.Strategy]:
    """None for 'none'; for 'mirrored' a MirroredStrategy over `devices` (default
    `replica_devices()`)."""
    if self.distribute == "none":
      return None
    return tf.distribute.MirroredStrategy(list(devices or replica_devices()))

  def describe(self, strategy: Optional[tf.distribute.Strategy] = None) -> str:
    """'compute: float32, XLA off, one device' or e.g. 'compute: mixed_float16 (loss scaling),
    XLA on, MirroredStrategy over 2 replicas (/gpu:0, /gpu:1)'."""
    precision = PRECISION_POLICIES[self.mixed_precision]
    if self.mixed_precision == "float16":
      precision += " (dynamic loss scaling)"
    where = "one device"
    if strategy is not None:
      where = (f"{type(strategy).__name__} over {strategy.num_replicas_in_sync} replica(s) ("
               + ", ".join(strategy.extended.worker_devices) + ")")
    return (f"compute: {precision}, XLA {'on' if self.jit_compile else 'off'}, {where} "
            f"(--mixed_precision, --jit_compile, --distribute).")

  @contextlib.contextmanager
  def building(self, strategy: Optional[tf.distribute.Strategy] = None) -> Iterator[None]:
    """Where a learner is built: under the precision policy and the strategy's scope."""
    with precision_policy(self.mixed_precision):
      if strategy is None:
        yield
      else:
        with strategy.scope():
          yield

  def prepare(self, agent):
    """`agent` (built in `building`) with XLA set as asked; ValueError naming --jit_compile for
    a learner outside ccvl_tf/agents/q_agent_base.GuardedLearner when it is on, and naming
    --mixed_precision when the precision read back from the built networks
    (`network_precisions`) is not the one asked for (DQN's tf_keras QNetwork: float32)."""
    if self.mixed_precision != "off":
      want = PRECISION_POLICIES[self.mixed_precision].removeprefix("mixed_")
      got = network_precisions(agent)
      if got != {want}:
        shown = ", ".join(sorted(got)) or "no layer with weights found"
        raise ValueError(
            f"--mixed_precision={self.mixed_precision} does not reach the networks of "
            f"{type(agent).__name__}: their layers compute in {shown} (keras mixed precision "
            f"reaches Keras 3 layers only; TF-Agents' QNetwork is legacy tf_keras); leave "
            f"--mixed_precision off for this learner")
    if self.jit_compile:
      if not hasattr(agent, "set_jit_compile"):
        raise ValueError(f"--jit_compile compiles the step of the learners of "
                         f"ccvl_tf/agents/q_agent_base.GuardedLearner (CCVL, CQL, REM, AEVL, BC), not "
                         f"{type(agent).__name__}")
      agent.set_jit_compile(True)
    return agent

  def trainer(self, agent, strategy: Optional[tf.distribute.Strategy] = None):
    """What the training loop steps: `agent`, or under a strategy a
    distributed.StrategyLearner (each batch split over its replicas)."""
    return agent if strategy is None else distributed.StrategyLearner(strategy, agent)


def network_precisions(agent) -> set:
  """The compute dtypes ('float32', 'bfloat16', ...) of the layers with weights of every
  network `agent` (a tf.Module learner) holds, Keras 3 and legacy tf_keras alike, read from
  the built layers: what a run computes in, not what it was asked for."""
  layer_types = (keras.layers.Layer, tf.keras.layers.Layer)
  out = set()
  for top in agent._flatten(predicate=lambda x: isinstance(x, layer_types)):  # pylint: disable=protected-access
    for layer in top._flatten_layers(include_self=True):  # pylint: disable=protected-access
      leaf = not list(layer._flatten_layers(include_self=False, recursive=False))  # pylint: disable=protected-access
      if leaf and layer.weights:
        out.add(str(tf.dtypes.as_dtype(layer.compute_dtype).name))
  return out


def replica_devices() -> list:
  """The devices MirroredStrategy replicates over: every visible GPU, else every logical CPU
  device (one on a plain CPU machine; several where they were split with
  tf.config.set_logical_device_configuration)."""
  gpus = tf.config.list_logical_devices("GPU")
  return [d.name for d in (gpus or tf.config.list_logical_devices("CPU"))]


@contextlib.contextmanager
def precision_policy(mixed_precision: str) -> Iterator[None]:
  """Keras's global dtype policy set to PRECISION_POLICIES[mixed_precision] for the layers
  built inside (a layer keeps the policy it was built under), restored after."""
  before = keras.mixed_precision.global_policy()
  keras.mixed_precision.set_global_policy(PRECISION_POLICIES[mixed_precision])
  try:
    yield
  finally:
    keras.mixed_precision.set_global_policy(before)
