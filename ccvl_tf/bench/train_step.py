"""Train-step cost of CCVL vs TF-Agents' own DqnAgent on the Nature-DQN torso, same process.

The agents train on the same fixed synthetic batch (uint8 84x84x4 frames, batch 32, 6 actions)
that lives in memory, so only the train step is timed (no input pipeline; `end_to_end` below
times the real input pipeline too). Each step is a compiled tf.function; after warm-up
(tracing), each CCVL variant is timed right after a DqnAgent and a DqnAgent + DR3 timing of the
same length (paired), in several rounds, so load from other processes on the shared CPU hits
all three about equally. Reported: median ms over rounds, the fastest round's ms (`*_min`), and
the medians of the paired ratios ccvl_ms / dqn_ms and ccvl_ms / dqn_dr3_ms.

Baselines: TF-Agents `DqnAgent` (no DR3) and `DqnDR3Agent` (ccvl_tf/bench/dqn_dr3.py:
DqnAgent's loss + DR3 with the same single torso pass over [s; s'] as CCVL, c = 0.03), the
like-for-like comparison for CCVL's defaults.

Variants (profiling where CCVL's time goes): the defaults; without DR3; without counts (a
constant n(s)^-1 instead of the D x D linear estimate); XLA jit_compile; the cosine and the
quantized delta heads; both of Algorithm 1's pair samplings at delta itself (reading 'ablation',
delta_1 = delta_2 = delta: the M pairs are one pair, the wide-span family); the IQN placement of
delta (delta_entry='conv', 3136x512 per delta); and a few (N, M).
"""
from __future__ import annotations

import dataclasses
import os
import statistics
import time
from typing import Callable, Dict, List, Optional, Sequence

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np
import tensorflow as tf
from tf_agents.agents.dqn import dqn_agent
from tf_agents.networks import q_network
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts
from tf_agents.trajectories import trajectory as trajectory_lib
from tf_agents.utils import common

from ccvl_tf.agents import ccvl_agent
from ccvl_tf.algorithm import networks
from ccvl_tf.algorithm import readings
from ccvl_tf.bench import dqn_dr3

NATURE_CONV = ((32, (8, 8), 4), (64, (4, 4), 2), (64, (3, 3), 1))


def _specs(obs_shape, num_actions):
  obs_spec = tf.TensorSpec(obs_shape, tf.uint8, name="observation")
  action_spec = tensor_spec.BoundedTensorSpec((), tf.int64, 0, num_actions - 1, name="action")
  return ts.time_step_spec(obs_spec), action_spec


def synthetic_batch(batch_size: int, obs_shape, num_actions: int, seed: int = 0):
  """A fixed random transition batch as a contract dict of tf constants."""
  rng = np.random.default_rng(seed)
  return {
      "observation": tf.constant(rng.integers(0, 256, (batch_size, *obs_shape), np.uint8)),
      "action": tf.constant(rng.integers(0, num_actions, batch_size), tf.int64),
      "reward": tf.constant(rng.choice([-1.0, 0.0, 1.0], batch_size).astype(np.float32)),
      "next_observation": tf.constant(
          rng.integers(0, 256, (batch_size, *obs_shape), np.uint8)),
      "terminal": tf.constant((rng.random(batch_size) < 0.05).astype(np.float32)),
  }


def batch_to_trajectory(batch) -> trajectory_lib.Trajectory:
  """The same transitions as a TF-Agents Trajectory [B, 2, ...] (what DqnAgent trains on)."""
  obs = tf.stack([batch["observation"], batch["next_observation"]], 1)  # [B, 2, H, W, C]
  b = tf.shape(batch["action"])[0]
  action = tf.stack([batch["action"], tf.zeros_like(batch["action"])], 1)  # [B, 2]
  reward = tf.stack([batch["reward"], tf.zeros_like(batch["reward"])], 1)  # [B, 2]
  # discount of step 0 is the transition's: 0 at a true episode end.
  discount = tf.stack([1.0 - batch["terminal"], tf.ones_like(batch["terminal"])], 1)  # [B, 2]
  mid = tf.fill([b, 2], ts.StepType.MID)
  return trajectory_lib.Trajectory(step_type=mid, observation=obs, action=action,
                                   policy_info=(), next_step_type=mid, reward=reward,
                                   discount=discount)


def make_dqn_step(batch, obs_shape, num_actions: int,
                  dr3_coef: Optional[float] = None) -> Callable[[], tf.Tensor]:
  """TF-Agents DqnAgent with a QNetwork on the Nature torso; returns a compiled step().

  dr3_coef: None for the stock DqnAgent (tf_keras Adam); a number (0 allowed) for DqnDR3Agent:
  DR3 with one torso pass, one target pass and the fused Adam step CCVL's learners use.
  """
  time_step_spec, action_spec = _specs(obs_shape, num_actions)
  net_cls = q_network.QNetwork if dr3_coef is None else dqn_dr3.EncoderQNetwork
  net = net_cls(
      time_step_spec.observation, action_spec,
      preprocessing_layers=tf.keras.layers.Lambda(lambda x: tf.cast(x, tf.float32) / 255.0),
      conv_layer_params=NATURE_CONV, fc_layer_params=(512,))
  if dr3_coef is None:
    optimizer = tf.keras.optimizers.Adam(learning_rate=5e-5, epsilon=3.125e-4)
  else:  # the optimizer step CCVL uses (fused Adam), so only the loss differs
    net.create_variables()
    optimizer = dqn_dr3.FusedAdam(net.trainable_variables, learning_rate=5e-5,
                                  epsilon=3.125e-4)
  kwargs = dict(
      q_network=net, optimizer=optimizer, td_errors_loss_fn=common.element_wise_huber_loss,
      gamma=0.99, target_update_period=2000, train_step_counter=tf.Variable(0, dtype=tf.int64))
  if dr3_coef is None:
    agent = dqn_agent.DqnAgent(time_step_spec, action_spec, **kwargs)
  else:
    agent = dqn_dr3.DqnDR3Agent(time_step_spec, action_spec, dr3_coef=dr3_coef, **kwargs)
  agent.initialize()
  experience = batch_to_trajectory(batch)
  train = common.function(agent.train)
  return lambda: train(experience).loss


def make_ccvl_step(batch, obs_shape, num_actions: int,
                   config: ccvl_agent.CCVLConfig = ccvl_agent.CCVLConfig(),
                   network_config: networks.QNetworkConfig = networks.QNetworkConfig(),
                   exact_counts: bool = False) -> Callable[[], tf.Tensor]:
  """CCVLAgent with the given configs; returns a compiled step() (train_on_batch's graph)."""
  time_step_spec, action_spec = _specs(obs_shape, num_actions)
  kwargs = {}
  if exact_counts:  # a constant n(s)^-1: removes the linear-count cost from the step
    kwargs["inverse_count_fn"] = lambda obs: tf.fill([tf.shape(obs)[0]], 0.01)
  else:
    kwargs["dataset_size"] = 1e6
  agent = ccvl_agent.CCVLAgent(time_step_spec, action_spec, config=config,
                               network_config=network_config, **kwargs)
  prepared = agent.prepare_batch(batch)
  fn = agent.compiled_train_step
  return lambda: fn(prepared)["loss"]


@dataclasses.dataclass
class Variant:
  name: str
  config: ccvl_agent.CCVLConfig = ccvl_agent.CCVLConfig()
  network_config: networks.QNetworkConfig = networks.QNetworkConfig()
  exact_counts: bool = False


def default_variants(quick: bool = False) -> List[Variant]:
  base = ccvl_agent.CCVLConfig()
  r = dataclasses.replace
  variants = [Variant("ccvl_default", base), Variant("ccvl_no_dr3", r(base, dr3_coef=0.0))]
  if quick:
    return variants
  return variants + [
      Variant("ccvl_no_dr3_no_counts", r(base, dr3_coef=0.0), exact_counts=True),
      Variant("ccvl_hidden_512", base, networks.QNetworkConfig(hidden_units=512)),
      Variant("ccvl_hidden_512_no_dr3", r(base, dr3_coef=0.0),
              networks.QNetworkConfig(hidden_units=512)),
      Variant("ccvl_bound", r(base, reading=readings.bound.Bound())),
      Variant("ccvl_count_refresh_every_step", r(base, count_refresh_period=1)),
      Variant("ccvl_jit", r(base, jit_compile=True)),
      Variant("ccvl_cosine_head", r(base, delta_head="cosine")),
      Variant("ccvl_quantized_head", r(base, delta_head="quantized")),
      Variant("ccvl_pairs_at_delta", r(base, reading=readings.ablation.Ablation(
          pair_delta_1="delta", pair_delta_2="delta"))),
      Variant("ccvl_delta_entry_conv", r(base, delta_head="cosine"),
              networks.QNetworkConfig(delta_entry="conv")),
      Variant("ccvl_N8_M4", r(base, num_deltas=8, num_pairs=4)),
      Variant("ccvl_N4_M4", r(base, num_deltas=4, num_pairs=4)),
      Variant("ccvl_N16_M2", r(base, num_deltas=16, num_pairs=2)),
      Variant("ccvl_N1_M1_no_dr3", r(base, num_deltas=1, num_pairs=1, dr3_coef=0.0)),
  ]


def _time_once(step: Callable[[], tf.Tensor], iters: int) -> float:
  """Milliseconds per step over `iters` steps (forcing the result at the end)."""
  t0 = time.perf_counter()
  for _ in range(iters):
    out = step()
  float(out)  # wait for the last step
  return (time.perf_counter() - t0) * 1000.0 / iters


def time_step_ms(step: Callable[[], tf.Tensor], iters: int, rounds: int,
                 warmup: int = 3) -> Dict[str, object]:
  """One step function timed as `run` times each: `warmup` untimed steps (tracing), then
  `rounds` rounds of `iters` steps; {'median_ms', 'min_ms' (fastest round), 'rounds_ms'}."""
  for _ in range(warmup):
    float(step())
  per_round = [_time_once(step, iters) for _ in range(rounds)]
  return {"median_ms": statistics.median(per_round), "min_ms": min(per_round),
          "rounds_ms": [round(x, 3) for x in per_round]}


BASELINES = ("dqn", "dqn_dr3")


# Over 80 lines: one measurement protocol (warm-up, paired rounds, medians) and the result
# dict that records its setup.
def run(quick: bool = False, batch_size: int = 32, num_actions: int = 6,
        obs_shape: Sequence[int] = networks.NATURE_OBSERVATION_SHAPE,
        iters: Optional[int] = None, rounds: Optional[int] = None, warmup: int = 3,
        variants: Optional[List[Variant]] = None) -> Dict:
  """Measures train_step_ms for DqnAgent, DqnAgent + DR3 and the CCVL variants; returns a dict.

  Keys: 'train_step_ms' {'dqn', 'dqn_dr3', 'ccvl', 'ccvl_no_dr3'} (ccvl = defaults),
  'ratio_ccvl_over_dqn', 'ratio_ccvl_over_dqn_dr3', 'variants' {name: {'train_step_ms',
  'ratio_over_dqn', 'ratio_over_dqn_dr3', 'rounds_ms', ...}}, and the setup.
  """
  iters = iters or (2 if quick else 10)
  rounds = rounds or (1 if quick else 5)  # x (number of variants) paired measurements
  if quick:
    batch_size, warmup = min(batch_size, 4), 1
  variants = variants or default_variants(quick)
  obs_shape = tuple(obs_shape)
  tf.random.set_seed(0)
  batch = synthetic_batch(batch_size, obs_shape, num_actions)
  default_cfg = ccvl_agent.CCVLConfig()
  steps = {"dqn": make_dqn_step(batch, obs_shape, num_actions),
           "dqn_dr3": make_dqn_step(batch, obs_shape, num_actions,
                                    dr3_coef=default_cfg.dr3_coef)}
  for v in variants:
    steps[v.name] = make_ccvl_step(batch, obs_shape, num_actions, v.config, v.network_config,
                                   v.exact_counts)
  for step in steps.values():  # trace + warm up
    for _ in range(warmup):
      float(step())
  # Paired timing: both baselines are timed right before each CCVL variant (same load).
  per_round: Dict[str, List[float]] = {k: [] for k in steps}
  ratios = {base: {k: [] for k in steps if k not in BASELINES} for base in BASELINES}
  dr3_over_dqn: List[float] = []
  for _ in range(rounds):
    for name, step in steps.items():
      if name in BASELINES:
        continue
      base_ms = {base: _time_once(steps[base], iters) for base in BASELINES}
      ms = _time_once(step, iters)
      for base in BASELINES:
        per_round[base].append(base_ms[base])
        ratios[base][name].append(ms / base_ms[base])
      dr3_over_dqn.append(base_ms["dqn_dr3"] / base_ms["dqn"])
      per_round[name].append(ms)
  med = {k: statistics.median(v) for k, v in per_round.items()}
  best = {k: min(v) for k, v in per_round.items()}
  default_name = variants[0].name
  no_dr3 = next((v.name for v in variants if v.name == "ccvl_no_dr3"), None)
  result = {
      "train_step_ms": {"dqn": med["dqn"], "dqn_dr3": med["dqn_dr3"],
                        "ccvl": med[default_name],
                        **({"ccvl_no_dr3": med[no_dr3]} if no_dr3 else {})},
      "train_step_ms_min": {"dqn": best["dqn"], "dqn_dr3": best["dqn_dr3"],
                            "ccvl": best[default_name]},
      "ratio_ccvl_over_dqn": statistics.median(ratios["dqn"][default_name]),
      "ratio_ccvl_over_dqn_dr3": statistics.median(ratios["dqn_dr3"][default_name]),
      "ratio_dqn_dr3_over_dqn": statistics.median(dr3_over_dqn),
      "ratio_of_min_ms": best[default_name] / best["dqn"],
      "goal_ratio": 1.3,
      "goal_ratio_dqn_dr3": 1.15,
      "setup": {
          "batch_size": batch_size, "num_actions": num_actions, "obs_shape": list(obs_shape),
          "iters_per_round": iters, "rounds": rounds, "quick": quick,
          "timing": "median over rounds of paired (DQN, DQN+DR3, CCVL) timings; *_min: "
                    "fastest round",
          "ccvl_default_config": dataclasses.asdict(variants[0].config),
          "ccvl_default_network": dataclasses.asdict(variants[0].network_config),
          "dqn": "tf_agents DqnAgent, QNetwork conv (32,8,4),(64,4,2),(64,3,1), fc 512, "
                 "Huber, Adam lr 5e-5 eps 3.125e-4 (Keras 2 via tf_keras)",
          "dqn_dr3": "DqnDR3Agent (ccvl_tf/bench/dqn_dr3.py): DqnAgent's loss + 0.03 DR3, "
                     "one encoder pass over [s; s'], one target pass, fused Adam (the "
                     "optimizer step of CCVL's learners)",
          "cpu_count": os.cpu_count(),
          "tensorflow": tf.__version__,
      },
      "variants": {
          name: {"train_step_ms": med[name], "train_step_ms_min": best[name],
                 "ratio_over_dqn": statistics.median(ratios["dqn"][name]),
                 "ratio_over_dqn_dr3": statistics.median(ratios["dqn_dr3"][name]),
                 "ratio_of_min_ms": best[name] / best["dqn"],
                 "rounds_ms": [round(x, 3) for x in per_round[name]],
                 "paired_ratios": [round(x, 3) for x in ratios["dqn"][name]]}
          for name in ratios["dqn"]
      },
      "dqn_rounds_ms": [round(x, 3) for x in per_round["dqn"]],
      "dqn_dr3_rounds_ms": [round(x, 3) for x in per_round["dqn_dr3"]],
  }
  return result
