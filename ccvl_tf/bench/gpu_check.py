"""The GPU check of binaries/gpu_check.py: the step time of every learner of the agent registry
on the GPU (and the CPU beside it), and the first training steps on the GPU against the CPU's.

The comparison (`compare_devices` -> ccvl_tf/bench/device_compare.py `lockstep`): one learner is
built on each device; before each step the device learner gets every variable of the CPU learner
(networks, targets, Adam, counts, the step counter that seeds the stateless step randomness),
then both take the step on the same batch. Each step is judged by `compare_runs` (the steps
merged by `merge_steps`):
  * loss: |loss_b - loss_a| / |loss_a| <= loss_rtol (1e-3 by default);
  * weights: for every trainable variable (the networks), ||w_b - w_a|| <= weight_rtol x
    ||w_a - w_a(0)|| (Frobenius norms; with different starts, the changes w - w(0) are
    compared): the device's update differs from the CPU's by at most a fraction (0.25) of it.
    The other float state (Adam's moments, CCVL's count statistics) is reported the same way
    but not judged: it feeds the losses, which are.

Why lockstep and these tolerances (BUILD.md, "The GPU check", has the measurements): a GPU runs
the same float32 math with other kernels, which sum and fuse in another order; each result
differs in its last bits. Free-running training amplifies that (a ReLU that flips on a rounding
difference changes a gradient entry by a finite amount): on the CPU alone, two kernel choices
drifted 100 free steps apart by up to 2.6e-3 in the loss (DQN) and 35% of the networks'
movement (BC). One step from the same state differs by far less (with weights perturbed by
~8 float32 ulps as a stand-in: below 1e-6 in the loss, a few 1e-2 of the update), and a
fault by far more: a repeated batch changes that step's loss beyond 1e-3. TensorFloat-32 is off
for the comparison: with it (TensorFlow's default on Ampere and later GPUs) float32 products
keep 10 mantissa bits, ~1e-3 relative each, a property of TF32 and not of the installed stack;
the step times are measured with TensorFlow's default.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Dict, Mapping, Sequence, Tuple

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import keras
import tensorflow as tf
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts

from ccvl_tf.algorithm import networks
from ccvl_tf.bench import device_compare
from ccvl_tf.bench import train_step
from ccvl_tf.experiments import agent_registry
from ccvl_tf.runtime import config_flags
from ccvl_tf.runtime.config_flags import setting

LOSS_RTOL = device_compare.LOSS_RTOL
WEIGHT_RTOL = device_compare.WEIGHT_RTOL


def learner_names() -> Tuple[str, ...]:
  """One offline agent name per learner the registry trains (its `train_key`): fixed_ccvl
  trains CCVL's learner and is left out."""
  first = {}
  for name in agent_registry.AGENTS:
    first.setdefault(agent_registry.AGENT_REGISTRY[name].train_key, name)
  return tuple(first.values())


def _parse_list(text) -> tuple:
  if isinstance(text, str):
    return tuple(t.strip() for t in text.split(",") if t.strip())
  return tuple(text)


@dataclasses.dataclass(frozen=True)
class GpuCheckConfig:
  """Settings of binaries/gpu_check.py."""
  agents: Sequence[str] = setting(learner_names(), "Learners to time and compare (agent "
                                  "registry names).", kind="csv", parse=_parse_list)
  steps: int = setting(100, "Training steps compared between the device and the CPU.",
                       lower_bound=1)
  batch_size: int = setting(32, "Transitions per batch (uint8 84x84x4 frames, Nature torso).",
                            lower_bound=1)
  num_actions: int = setting(6, "Actions of the synthetic batches.", lower_bound=2)
  iters: int = setting(20, "Train steps per timing round.", lower_bound=1)
  rounds: int = setting(3, "Timing rounds (the median is reported).", lower_bound=1)
  loss_rtol: float = setting(LOSS_RTOL, "Largest relative difference of a step's loss "
                             "between the device and the CPU.", above=0.0)
  weight_rtol: float = setting(WEIGHT_RTOL, "Largest difference of a trainable variable "
                               "between the device and the CPU (Frobenius norm), as a fraction "
                               "of how far training moved it.", above=0.0)
  device: str = setting("", "The device checked against the CPU: empty = the first GPU "
                        "TensorFlow sees; '/CPU:0' runs the whole check on the CPU against "
                        "itself (a self-test of the check where there is no GPU).")
  output: str = setting("", "Also write the results to this JSON file.", output="file")
  seed: int = setting(0, "Seed of the learners and the batches.", lower_bound=0)

  def validate(self) -> None:
    bad = [a for a in self.agents if a not in agent_registry.AGENT_REGISTRY]
    if bad or not self.agents:
      raise ValueError(f"--agents: unknown {bad}; valid: {', '.join(learner_names())}")
    config_flags.check(self, prefix="--")  # the declared bounds: --loss_rtol > 0, ...
    check_device(self.device)


def check_device(device: str) -> None:
  """ValueError naming --device unless it is empty (the first GPU, if any) or names a CPU or
  GPU that TensorFlow sees here: a device spec that does not parse, or a GPU on a machine
  without one (the timings would be the CPU's, labelled as the device's), is refused before
  anything runs."""
  if not device:
    return
  try:
    spec = tf.DeviceSpec.from_string(device)
  except (ValueError, TypeError) as e:
    raise ValueError(f"--device={device}: not a device name ({e}); expected /GPU:<index> or "
                     f"/CPU:0") from None
  kind = (spec.device_type or "").upper()
  if kind not in ("CPU", "GPU") or spec.job or spec.replica or spec.task:
    raise ValueError(f"--device={device}: expected /GPU:<index> or /CPU:0 (a local CPU or GPU)")
  seen = [d.name.split("device:")[-1] for d in tf.config.list_logical_devices(kind)]
  wanted = f"{kind}:{spec.device_index or 0}"
  if wanted not in seen:
    raise ValueError(f"--device={device}: TensorFlow sees no {wanted} on this machine (it sees "
                     f"{', '.join(seen) or f'no {kind}'}); leave --device out to check the first "
                     f"GPU, or give --device=/CPU:0 for the check's self-test")


def specs(obs_shape: Sequence[int], obs_dtype, num_actions: int):
  """(time_step_spec, action_spec) of observations `obs_shape` / `obs_dtype` and actions
  0..num_actions-1."""
  obs = tf.TensorSpec(tuple(obs_shape), obs_dtype, name="observation")
  action = tensor_spec.BoundedTensorSpec((), tf.int64, 0, num_actions - 1, name="action")
  return ts.time_step_spec(obs), action


def build_learner(name: str, time_step_spec, action_spec,
                  settings: agent_registry.AgentSettings, device: str):
  """The registry's learner `name`, its variables created on `device`."""
  with tf.device(device):
    keras.utils.set_random_seed(settings.seed)
    return agent_registry.get_agent_spec(name, offline=False).build(
        time_step_spec, action_spec, settings)

def compare_devices(name: str, batches: Sequence[Mapping[str, object]], time_step_spec,
                    action_spec, settings: agent_registry.AgentSettings, device: str,
                    reference_device: str = "/CPU:0", loss_rtol: float = LOSS_RTOL,
                    weight_rtol: float = WEIGHT_RTOL
                    ) -> Tuple[device_compare.Comparison, device_compare.Run]:
  """Learner `name` built on reference_device and on `device` and stepped through `batches`
  in lockstep; (the merged comparison, the device's last Run)."""
  reference = build_learner(name, time_step_spec, action_spec, settings, reference_device)
  checked = build_learner(name, time_step_spec, action_spec, settings, device)
  return device_compare.lockstep(reference, checked, batches, reference_device, device,
                                 loss_rtol, weight_rtol)


def step_time(name: str, batch: Mapping[str, object], time_step_spec, action_spec,
              settings: agent_registry.AgentSettings, device: str, iters: int,
              rounds: int) -> Dict[str, object]:
  """train_on_batch of learner `name` on `device`, timed by the step benchmark's protocol
  (train_step.time_step_ms: warm-up, rounds, median), the batch fed from host memory as the
  input pipeline feeds it."""
  learner = build_learner(name, time_step_spec, action_spec, settings, device)

  def step() -> tf.Tensor:
    with tf.device(device):
      return learner.train_on_batch(batch)["loss"]
  return train_step.time_step_ms(step, iters=iters, rounds=rounds, warmup=2)


def nature_setup(cfg: GpuCheckConfig):
  """(time_step_spec, action_spec, settings, batches) of the check: the Nature torso on uint8
  84x84x4 frames, every learner with its defaults, |D| = 1e6 for CCVL's n(s)^-1, and
  cfg.steps synthetic batches (train_step.synthetic_batch, seeds seed..seed+steps-1)."""
  shape = networks.NATURE_OBSERVATION_SHAPE
  time_step_spec, action_spec = specs(shape, tf.uint8, cfg.num_actions)
  settings = agent_registry.make_settings(network_config=networks.QNetworkConfig(),
                                          dataset_size=1e6, seed=cfg.seed)
  batches = [train_step.synthetic_batch(cfg.batch_size, shape, cfg.num_actions, cfg.seed + i)
             for i in range(cfg.steps)]
  return time_step_spec, action_spec, settings, batches


def run_checks(cfg: GpuCheckConfig, device: str,
               log: Callable[[str], None] = print) -> Dict[str, object]:
  """Step times on `device` and the CPU, then each learner's comparison (TF32 off); the
  result dict {'step_ms': {name: {device, cpu}}, 'comparisons': {name: {...}}, 'ok'}."""
  time_step_spec, action_spec, settings, batches = nature_setup(cfg)
  result = {"step_ms": {}, "comparisons": {}}
  log(f"step time (ms, median of {cfg.rounds} rounds of {cfg.iters}; batch {cfg.batch_size}, "
      f"Nature torso, {cfg.num_actions} actions, TensorFlow's default precision):")
  log(f"  {'learner':10s} {device:>12s} {'/CPU:0':>12s} {'CPU/device':>10s}")
  for name in cfg.agents:
    on_device = step_time(name, batches[0], time_step_spec, action_spec, settings, device,
                          cfg.iters, cfg.rounds)
    on_cpu = step_time(name, batches[0], time_step_spec, action_spec, settings, "/CPU:0",
                       cfg.iters, cfg.rounds)
    result["step_ms"][name] = {"device": on_device, "cpu": on_cpu}
    log(f"  {name:10s} {on_device['median_ms']:12.2f} {on_cpu['median_ms']:12.2f} "
        f"{on_cpu['median_ms'] / on_device['median_ms']:10.2f}")
  tf32 = tf.config.experimental.tensor_float_32_execution_enabled()
  tf.config.experimental.enable_tensor_float_32_execution(False)
  try:
    log(f"first {cfg.steps} training steps on {device} against /CPU:0 in lockstep (each step "
        f"from the CPU's state, same batch; TensorFloat-32 off):")
    for name in cfg.agents:
      comparison, run = compare_devices(
          name, batches, time_step_spec, action_spec, settings, device,
          loss_rtol=cfg.loss_rtol, weight_rtol=cfg.weight_rtol)
      placed = device_compare.placed_on(run, device)
      ok = comparison.ok and placed
      result["comparisons"][name] = dict(dataclasses.asdict(comparison), ok=ok,
                                         device_placed=run.device)
      log(f"  {name:10s} {'ok    ' if ok else 'FAILED'} {comparison.line()}; variables on "
          f"{run.device or device}" + ("" if placed else f", not on {device}"))
  finally:
    tf.config.experimental.enable_tensor_float_32_execution(tf32)
  result["ok"] = all(c["ok"] for c in result["comparisons"].values())
  return result
