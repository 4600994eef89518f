"""The GPU check of binaries/gpu_check.py: the step time of every learner of the agent registry
on the GPU (and the CPU beside it), and the first training steps on the GPU against the CPU's.

The comparison (`compare_devices`): one learner is built on each device, the second gets the
first's variables (the same weights at step 0, whatever each device's initializers draw), and
both train on the same list of batches; the step randomness is stateless, seeded by
(config.seed, train step), so it is the same on both. Then `compare_runs`:
  * losses: max over steps of |loss_b - loss_a| / |loss_a| <= loss_rtol (1e-3 by default);
  * weights: for every float variable, ||w_b - w_a|| <= tol x ||w_a - w_a(0)|| (Frobenius
    norms): the two devices' values differ by at most a fraction of what training moved them;
    tol = weight_rtol (5e-2) for the trainable variables (the networks), state_rtol (0.5) for
    the other float state (Adam's moments, CCVL's count statistics).

Why these tolerances (BUILD.md, "The GPU check", has the measurements): a GPU runs the same float32 math as
the CPU with other kernels, which add, fuse and order reductions differently; each product
then differs in its last bits (~1e-7 relative) and the differences grow over the steps. On the
CPU, two such kernel choices (one vs two intra-op threads, oneDNN on vs off) moved the loss
sequences of 100 steps by at most ~2e-5 relative, the networks by at most ~5e-3 of their
movement and Adam's moments by ~6e-2 of theirs (a ReLU that flips on a rounding difference
changes a gradient entry by a finite amount; the moments, averages of recent gradients, show it
most): the tolerances leave 10x or more room. A real fault is larger: a repeated or skipped
batch changes that step's loss by far more than 1e-3, a learning rate 5% off moves the
networks 5% differently; tests/test_gpu_check.py shows such runs failing.
TensorFloat-32 is turned off for the comparison: with it (TensorFlow's default on Ampere and
later GPUs) float32 products keep 10 mantissa bits, ~1e-3 relative each, which is a property of
TF32 and not of the installed stack; the step times are measured with TensorFlow's default.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import keras
import numpy as np
import tensorflow as tf

from ccvl_tf.algorithm import networks
from ccvl_tf.bench import train_step
from ccvl_tf.experiments import agent_registry
from ccvl_tf.runtime.config_flags import setting

LOSS_RTOL = 1e-3
WEIGHT_RTOL = 5e-2
STATE_RTOL = 0.5


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
  state_rtol: float = setting(STATE_RTOL, "The same for the other float variables (Adam's "
                              "moments, count statistics).", above=0.0)
  device: str = setting("", "The device checked against the CPU: empty = the first GPU "
                        "TensorFlow sees; '/CPU:0' runs the whole check on the CPU against "
                        "itself (a self-test of the check where there is no GPU).")
  output: str = setting("", "Also write the results to this JSON file.", output="file")
  seed: int = setting(0, "Seed of the learners and the batches.", lower_bound=0)

  def validate(self) -> None:
    offered = learner_names()
    bad = [a for a in self.agents if a not in agent_registry.AGENT_REGISTRY]
    if bad or not self.agents:
      raise ValueError(f"--agents: unknown {bad}; valid: {', '.join(offered)}")


def specs(obs_shape: Sequence[int], obs_dtype, num_actions: int):
  """(time_step_spec, action_spec) of observations `obs_shape` / `obs_dtype` and actions
  0..num_actions-1."""
  from tf_agents.specs import tensor_spec  # pylint: disable=g-import-not-at-top
  from tf_agents.trajectories import time_step as ts  # pylint: disable=g-import-not-at-top
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


def copy_variables(src, dst) -> None:
  """dst's variables <- src's (the same learner built twice: same count, shapes, dtypes)."""
  a, b = list(src.variables), list(dst.variables)
  if len(a) != len(b) or any(x.shape != y.shape or x.dtype != y.dtype for x, y in zip(a, b)):
    raise ValueError(f"the two learners' variables differ in layout ({len(a)} vs {len(b)})")
  for x, y in zip(a, b):
    y.assign(x.numpy())


@dataclasses.dataclass
class Run:
  """One learner's training on one device: where its variables live, its losses, and its
  float variables (name, trainable, value at the start, value at the end)."""
  device: str
  losses: np.ndarray
  variables: List[Tuple[str, bool, np.ndarray, np.ndarray]]


def train_run(learner, batches: Sequence[Mapping[str, object]], device: str) -> Run:
  """Trains `learner` on `batches` (one step each) under `device`; its Run."""
  initial = {v.ref(): v.numpy() for v in learner.variables if v.dtype.is_floating}
  losses = []
  with tf.device(device):
    for batch in batches:
      losses.append(float(learner.train_on_batch(batch)["loss"]))
  final = [v for v in learner.variables if v.dtype.is_floating]
  # A variable made during training (TF-Agents' Adam slots) starts at zero.
  variables = [(v.name, bool(v.trainable),
                initial.get(v.ref(), np.zeros(v.shape, v.dtype.as_numpy_dtype)), v.numpy())
               for v in final]
  placed = final[0].device if final else device
  return Run(placed, np.asarray(losses, np.float64), variables)


@dataclasses.dataclass
class Comparison:
  """compare_runs' verdict and the numbers behind it."""
  ok: bool
  max_loss_rel: float           # max over steps of |loss_b - loss_a| / |loss_a|
  max_loss_step: int            # the step of that maximum (0-based)
  first_bad_step: Optional[int]  # the first step beyond loss_rtol, None if none
  worst_variable: str           # the variable furthest beyond (else nearest to) its tolerance
  num_variables: int            # float variables compared
  worst_weight_ratio: float     # ||w_b - w_a|| / ||w_a - w_a(0)|| of that variable
  worst_tolerance: float        # its tolerance (weight_rtol or state_rtol)
  loss_rtol: float

  def line(self) -> str:
    first = "" if self.first_bad_step is None else f", first beyond at step {self.first_bad_step}"
    return (f"loss rel diff max {self.max_loss_rel:.2e} at step {self.max_loss_step} "
            f"(tolerance {self.loss_rtol:g}{first}); weight diff / movement max "
            f"{self.worst_weight_ratio:.2e} in {self.worst_variable} of {self.num_variables} "
            f"variables (tolerance {self.worst_tolerance:g})")


def compare_runs(a: Run, b: Run, loss_rtol: float = LOSS_RTOL,
                 weight_rtol: float = WEIGHT_RTOL, state_rtol: float = STATE_RTOL) -> Comparison:
  """Run b against the reference run a (module doc: the criteria)."""
  if a.losses.shape != b.losses.shape or len(a.variables) != len(b.variables):
    raise ValueError(f"the runs differ in length: {a.losses.shape[0]} vs {b.losses.shape[0]} "
                     f"steps, {len(a.variables)} vs {len(b.variables)} variables")
  # A loss of exactly 0 in the reference would make every difference infinite: floor it.
  rel = np.abs(b.losses - a.losses) / np.maximum(np.abs(a.losses), 1e-12)  # [steps]
  bad = np.flatnonzero(~(rel <= loss_rtol))  # NaN counts as beyond
  worst = (a.variables[0][0] if a.variables else "(none)", 0.0,
           weight_rtol if not a.variables or a.variables[0][1] else state_rtol)
  for (name, trainable, a0, a1), (_, _, _, b1) in zip(a.variables, b.variables):
    a1 = a1.astype(np.float64)
    diff = float(np.linalg.norm(b1.astype(np.float64) - a1))
    moved = float(np.linalg.norm(a1 - a0))
    ratio = 0.0 if diff == 0.0 else (diff / moved if moved > 0.0 else float("inf"))
    tol = weight_rtol if trainable else state_rtol
    if not ratio / tol <= worst[1] / worst[2]:  # NaN and inf are worse than anything
      worst = (name, ratio, tol)
  steps = int(rel.shape[0])
  max_step = int(np.nanargmax(rel)) if steps and not np.all(np.isnan(rel)) else 0
  return Comparison(
      ok=bool(bad.size == 0 and worst[1] <= worst[2]),
      max_loss_rel=float(rel[max_step]) if steps else 0.0, max_loss_step=max_step,
      first_bad_step=int(bad[0]) if bad.size else None, worst_variable=worst[0],
      num_variables=len(a.variables), worst_weight_ratio=worst[1], worst_tolerance=worst[2],
      loss_rtol=loss_rtol)


def compare_devices(name: str, batches: Sequence[Mapping[str, object]], time_step_spec,
                    action_spec, settings: agent_registry.AgentSettings, device: str,
                    reference_device: str = "/CPU:0", loss_rtol: float = LOSS_RTOL,
                    weight_rtol: float = WEIGHT_RTOL, state_rtol: float = STATE_RTOL,
                    batches_on_device: Optional[Sequence[Mapping[str, object]]] = None
                    ) -> Tuple[Comparison, Run, Run]:
  """Learner `name` trained on `batches` on reference_device and on `device` from the same
  weights; (comparison, reference run, device run). `batches_on_device` (default `batches`)
  lets a test feed the second run other batches."""
  reference = build_learner(name, time_step_spec, action_spec, settings, reference_device)
  checked = build_learner(name, time_step_spec, action_spec, settings, device)
  copy_variables(reference, checked)
  run_a = train_run(reference, batches, reference_device)
  run_b = train_run(checked, batches if batches_on_device is None else batches_on_device,
                    device)
  return compare_runs(run_a, run_b, loss_rtol, weight_rtol, state_rtol), run_a, run_b


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
    log(f"first {cfg.steps} training steps on {device} against /CPU:0 (same weights, same "
        f"batches; TensorFloat-32 off):")
    for name in cfg.agents:
      comparison, ref, run = compare_devices(
          name, batches, time_step_spec, action_spec, settings, device,
          loss_rtol=cfg.loss_rtol, weight_rtol=cfg.weight_rtol, state_rtol=cfg.state_rtol)
      # Soft placement would run a learner asked onto a GPU on the CPU without a word.
      placed = "GPU" not in device.upper() or "GPU" in run.device.upper()
      ok = comparison.ok and placed
      result["comparisons"][name] = dict(
          dataclasses.asdict(comparison), ok=ok, device_placed=run.device,
          cpu_placed=ref.device, final_loss_cpu=float(ref.losses[-1]),
          final_loss_device=float(run.losses[-1]))
      log(f"  {name:10s} {'ok    ' if ok else 'FAILED'} {comparison.line()}; variables on "
          f"{run.device or device}" + ("" if placed else f", not on {device}"))
  finally:
    tf.config.experimental.enable_tensor_float_32_execution(tf32)
  result["ok"] = all(c["ok"] for c in result["comparisons"].values())
  return result
