"""Plain (delta-free) Q-networks of the baselines: CQL, REM, AEVL, BC, and their view as a
contract Q-model {'observation', 'delta'} -> Q [B, K, A] (docs/CONTRACTS.md).

They share CCVL's torsos, initializer and QNetworkConfig (ccvl_tf/algorithm/networks.py), so a
baseline and CCVL trained on the same data have the same architecture up to the head.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence, Tuple

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import keras
from keras import ops

from ccvl_tf.algorithm.networks import (
    QNetworkConfig, _dopamine_initializer, _float32, _torso, validate_observation_spec)


@dataclasses.dataclass
class QEnsembleNetwork:
  """E independently initialized members, each a torso and H linear heads (no delta input).

    q_model({'observation': [B, ...]})          -> Q [B, E, H, A]
    q_and_phi_model({'observation': [B, ...]})  -> {'q': [B, E, H, A], 'phi': [B, E, D]}
    phi_model({'observation': [B, ...]})        -> phi [B, E, D] (each member's torso output)

  CQL: E = H = 1. REM: E = 1, H = 200 heads on one torso. AEVL: E members, H = 1.
  Not a contract model (no delta input); `contract_q_model` presents it as one.
  """
  q_model: keras.Model
  phi_model: keras.Model
  q_and_phi_model: keras.Model
  config: QNetworkConfig
  observation_shape: Tuple[int, ...]
  observation_dtype: str
  num_actions: int
  num_members: int
  num_heads: int
  phi_dim: int

  @property
  def trainable_variables(self):
    return self.q_and_phi_model.trainable_variables

  @property
  def variables(self):
    return self.q_and_phi_model.variables


def build_q_ensemble(observation_shape: Sequence[int], observation_dtype, num_actions: int,
                     config: QNetworkConfig = QNetworkConfig(), num_members: int = 1,
                     num_heads: int = 1, name: str = "q") -> QEnsembleNetwork:
  """Builds E = `num_members` Q-networks of H = `num_heads` heads each (see QEnsembleNetwork).

  Each member is the torso of `config` (Nature / MLP / MinAtar, delta_entry must be
  'features'; `n_cos`, `hidden_units` are unused) followed by one Dense(H * A) layer: the
  DQN architecture for H = 1, batch_rl's multi-head network for H > 1. Members have their own
  layers (`{name}_m{e}_...`), so Keras draws independent initial weights for each.
  """
  config.validate()
  if config.delta_entry != "features":
    raise ValueError(f"plain Q-networks need delta_entry='features', got {config.delta_entry!r}")
  for what, value in (("num_actions", num_actions), ("num_members", num_members),
                      ("num_heads", num_heads)):
    if isinstance(value, bool) or int(value) != value or value < 1:
      raise ValueError(f"{what} must be an integer >= 1, got {value!r}")
  a, e_count, h = int(num_actions), int(num_members), int(num_heads)
  shape, dtype = validate_observation_spec(observation_shape, observation_dtype, config.torso)
  observation = keras.Input(shape=shape, dtype=dtype, name="observation")
  qs, phis = [], []
  for e in range(e_count):
    member = f"{name}_m{e}" if e_count > 1 else name
    # A fresh initializer per layer (the factory is called once per layer): a Keras 3
    # initializer instance draws its seed once, so reusing one instance would give same-shaped
    # layers of all members the same weights.
    init = _dopamine_initializer
    torso_out, _ = _torso(observation, config, member, init)          # [B, D]
    out = keras.layers.Dense(h * a, kernel_initializer=init(), name=f"{member}_q")(torso_out)
    qs.append(keras.layers.Reshape((1, h, a), name=f"{member}_heads")(out))  # [B, H*A] -> [B, 1, H, A]
    phis.append(ops.expand_dims(torso_out, 1))                        # [B, 1, D]
  q = qs[0] if e_count == 1 else keras.layers.Concatenate(axis=1, name=f"{name}_members")(qs)
  phi = phis[0] if e_count == 1 else ops.concatenate(phis, axis=1)     # [B, E, D]
  inputs = {"observation": observation}
  q, phi = _float32(q), _float32(phi)
  return QEnsembleNetwork(
      q_model=keras.Model(inputs, q, name=name),
      phi_model=keras.Model(inputs, phi, name=f"{name}_phi"),
      q_and_phi_model=keras.Model(inputs, {"q": q, "phi": phi}, name=f"{name}_q_and_phi"),
      config=config, observation_shape=shape, observation_dtype=dtype, num_actions=a,
      num_members=e_count, num_heads=h, phi_dim=int(phi.shape[-1]))


CONTRACT_MODES = ("mean", "member")


def contract_q_model(net: QEnsembleNetwork, mode: str = "mean", name: str = None) -> keras.Model:
  """Presents a QEnsembleNetwork as a contract Q-model {'observation', 'delta' [B, K]} -> [B, K, A].

  Heads are always averaged (REM acts with the mean of its heads, as batch_rl). Then:
    * mode='mean': Q(s, a, delta) = mean over members, the same for every delta (the deltas
      are ignored; K copies). Lets FixedDeltaPolicy act greedily for CQL / REM / DQN-style nets.
    * mode='member': delta selects a member, e = min(floor(delta * E), E - 1). With the belief
      grid `belief.delta_grid(E)` = (e + 0.5) / E, grid entry e *is* member e, so
      `ConfidenceAdaptivePolicy(num_grid_deltas=E)` keeps its belief over the E members (AEVL;
      PolicyInfo.delta = (e + 0.5) / E names the member acted with).
  Shares the network's variables (no copy).
  """
  if mode not in CONTRACT_MODES:
    raise ValueError(f"mode must be one of {CONTRACT_MODES}, got {mode!r}")
  observation = keras.Input(shape=net.observation_shape, dtype=net.observation_dtype,
                            name="observation")
  delta = keras.Input(shape=(None,), dtype="float32", name="delta")    # [B, K]
  q = ops.mean(net.q_model({"observation": observation}), axis=2)     # [B, E, H, A] -> [B, E, A]
  if mode == "mean":
    q = ops.mean(q, axis=1, keepdims=True)                              # [B, 1, A]
    out = q + ops.expand_dims(ops.zeros_like(delta), -1)                # [B, 1, A] + [B, K, 1]
  else:
    e_count = net.num_members
    index = ops.clip(ops.floor(delta * e_count), 0, e_count - 1)        # [B, K]
    one_hot = ops.one_hot(ops.cast(index, "int32"), e_count)            # [B, K, E]
    out = ops.einsum("bke,bea->bka", one_hot, q)                        # [B, K, A]
  return keras.Model({"observation": observation, "delta": delta}, out,
                     name=name or f"{net.q_model.name}_contract_{mode}")


def copy_ensemble_weights(source: QEnsembleNetwork, target: QEnsembleNetwork) -> None:
  """target <- source, variable by variable (same architecture; target networks)."""
  src, dst = source.variables, target.variables
  if len(src) != len(dst):
    raise ValueError(f"networks differ: {len(src)} vs {len(dst)} variables")
  for s, d in zip(src, dst):
    d.assign(s)
