"""The GPU check of binaries/gpu_check.py: the step time of every learner of the agent registry
on the GPU (and the CPU beside it), and the first training steps on the GPU against the CPU's.

The comparison (`compare_devices` -> `lockstep`): one learner is built on each device; before
each step the device learner gets every variable of the CPU learner (networks, targets, Adam,
counts, the step counter that seeds the stateless step randomness), then both take the step on
the same batch. Each step is judged by `compare_runs` (the steps merged by `merge_steps`):
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
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import keras
import numpy as np
import tensorflow as tf
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts

from ccvl_tf.algorithm import networks
from ccvl_tf.bench import train_step
from ccvl_tf.experiments import agent_registry
from ccvl_tf.runtime.config_flags import setting

LOSS_RTOL = 1e-3
WEIGHT_RTOL = 0.25


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


def copy_variables(src, dst) -> None:
  """dst's variables <- src's (the same learner built twice: same count, shapes, dtypes)."""
  a, b = list(src.variables), list(dst.variables)
  if len(a) != len(b) or any(x.shape != y.shape or x.dtype != y.dtype for x, y in zip(a, b)):
    raise ValueError(f"the two learners' variables differ in layout ({len(a)} vs {len(b)})")
  for x, y in zip(a, b):
    y.assign(x.numpy())


@dataclasses.dataclass
class Run:
  """One learner's training on one device: where its trainable variables live (the devices,
  ', '-joined), its losses, and its float variables (name, trainable, value at the start, value
  at the end)."""
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
  placed = ", ".join(sorted({v.device for v in final if v.trainable})) or device
  return Run(placed, np.asarray(losses, np.float64), variables)


def placed_on(run: Run, device: str) -> bool:
  """Whether every trainable variable of `run` is on a GPU when `device` names one: soft
  placement would train a learner asked onto a GPU on the CPU without a word."""
  return "GPU" not in device.upper() or all("GPU" in d.upper() for d in run.device.split(", "))


@dataclasses.dataclass
class Comparison:
  """compare_runs' verdict and the numbers behind it."""
  ok: bool
  max_loss_rel: float           # max over steps of |loss_b - loss_a| / |loss_a|
  max_loss_step: int            # the step of that maximum (0-based)
  first_bad_step: Optional[int]  # the first step beyond loss_rtol, None if none
  worst_variable: str           # the trainable variable of the largest ratio (else the first)
  worst_weight_ratio: float     # ||w_b - w_a|| / ||w_a - w_a(0)|| of that variable
  num_variables: int            # trainable variables judged
  worst_state: str              # the other float variable of the largest ratio (reported)
  worst_state_ratio: float
  loss_rtol: float
  weight_rtol: float

  def line(self) -> str:
    first = "" if self.first_bad_step is None else f", first beyond at step {self.first_bad_step}"
    return (f"loss rel diff max {self.max_loss_rel:.2e} at step {self.max_loss_step} "
            f"(tolerance {self.loss_rtol:g}{first}); weight diff / movement max "
            f"{self.worst_weight_ratio:.2e} in {self.worst_variable} of {self.num_variables} "
            f"(tolerance {self.weight_rtol:g}); other state {self.worst_state_ratio:.2e} in "
            f"{self.worst_state} (not judged)")


def compare_runs(a: Run, b: Run, loss_rtol: float = LOSS_RTOL,
                 weight_rtol: float = WEIGHT_RTOL) -> Comparison:
  """Run b against the reference run a (module doc: the criteria)."""
  if a.losses.shape != b.losses.shape or len(a.variables) != len(b.variables):
    raise ValueError(f"the runs differ in length: {a.losses.shape[0]} vs {b.losses.shape[0]} "
                     f"steps, {len(a.variables)} vs {len(b.variables)} variables")
  # A loss of exactly 0 in the reference would make every difference infinite: floor it.
  rel = np.abs(b.losses - a.losses) / np.maximum(np.abs(a.losses), 1e-12)  # [steps]
  bad = np.flatnonzero(~(rel <= loss_rtol))  # NaN counts as beyond
  worst = {True: ("(none)", 0.0), False: ("(none)", 0.0)}  # trainable -> (name, ratio)
  for (name, trainable, a0, a1), (_, _, b0, b1) in zip(a.variables, b.variables):
    # The two runs' changes (b's from its own start, the same as a's unless a test perturbs it).
    moved_a = a1.astype(np.float64) - a0
    diff = float(np.linalg.norm(b1.astype(np.float64) - b0 - moved_a))
    moved = float(np.linalg.norm(moved_a))
    # A NaN or inf weight, or any change of a weight the reference did not move: inf.
    ratio = (0.0 if diff == 0.0 else
             diff / moved if moved > 0.0 and np.isfinite(diff) else float("inf"))
    if worst[trainable][0] == "(none)" or ratio > worst[trainable][1]:
      worst[trainable] = (name, ratio)
  steps = int(rel.shape[0])
  max_step = int(np.nanargmax(rel)) if steps and not np.all(np.isnan(rel)) else 0
  return Comparison(
      ok=bool(bad.size == 0 and worst[True][1] <= weight_rtol),
      max_loss_rel=float(rel[max_step]) if steps else 0.0, max_loss_step=max_step,
      first_bad_step=int(bad[0]) if bad.size else None, worst_variable=worst[True][0],
      worst_weight_ratio=worst[True][1], num_variables=sum(v[1] for v in a.variables),
      worst_state=worst[False][0], worst_state_ratio=worst[False][1], loss_rtol=loss_rtol,
      weight_rtol=weight_rtol)


def merge_steps(steps: Sequence[Comparison]) -> Comparison:
  """The comparisons of single steps (`lockstep`) as one: the largest loss difference and
  ratios over the steps, and the first step that is not ok."""
  if not steps:
    raise ValueError("no steps to merge")
  by_loss = max(range(len(steps)),
                key=lambda t: np.nan_to_num(steps[t].max_loss_rel, nan=np.inf))
  by_weight = max(range(len(steps)), key=lambda t: steps[t].worst_weight_ratio)
  by_state = max(range(len(steps)), key=lambda t: steps[t].worst_state_ratio)
  first = steps[0]
  return Comparison(
      ok=all(c.ok for c in steps), max_loss_rel=steps[by_loss].max_loss_rel,
      max_loss_step=by_loss, first_bad_step=next((t for t, c in enumerate(steps) if not c.ok),
                                                 None),
      worst_variable=steps[by_weight].worst_variable,
      worst_weight_ratio=steps[by_weight].worst_weight_ratio, num_variables=first.num_variables,
      worst_state=steps[by_state].worst_state, worst_state_ratio=steps[by_state].worst_state_ratio,
      loss_rtol=first.loss_rtol, weight_rtol=first.weight_rtol)


def lockstep(reference, checked, batches: Sequence[Mapping[str, object]], reference_device: str,
             device: str, loss_rtol: float = LOSS_RTOL, weight_rtol: float = WEIGHT_RTOL,
             batches_on_device: Optional[Sequence[Mapping[str, object]]] = None,
             perturb: Optional[Callable[[object], None]] = None) -> Tuple[Comparison, Run]:
  """Both learners take each step from the same state: before step t, `checked` gets every
  variable of `reference` (networks, Adam, counts, the step counter that seeds the step), then
  each trains on batch t on its device. Step t's comparison (`compare_runs` of the one step):
  its loss, and each variable's update against the reference's update. So one step's
  difference is judged, not how training amplifies it over many steps. Returns the merged
  comparison (`merge_steps`; first_bad_step: the first step not ok, by loss or weights) and the
  last step's device Run. `batches_on_device` (default `batches`) and `perturb(checked)`
  (after each copy) let a test feed the device other batches or other weights."""
  other = batches if batches_on_device is None else batches_on_device
  steps, run = [], None
  for batch, batch_on_device in zip(batches, other):
    copy_variables(reference, checked)
    if perturb is not None:
      perturb(checked)
    ref = train_run(reference, [batch], reference_device)
    run = train_run(checked, [batch_on_device], device)
    steps.append(compare_runs(ref, run, loss_rtol, weight_rtol))
  return merge_steps(steps), run


def compare_devices(name: str, batches: Sequence[Mapping[str, object]], time_step_spec,
                    action_spec, settings: agent_registry.AgentSettings, device: str,
                    reference_device: str = "/CPU:0", loss_rtol: float = LOSS_RTOL,
                    weight_rtol: float = WEIGHT_RTOL) -> Tuple[Comparison, Run]:
  """Learner `name` built on reference_device and on `device` and stepped through `batches`
  in lockstep; (the merged comparison, the device's last Run)."""
  reference = build_learner(name, time_step_spec, action_spec, settings, reference_device)
  checked = build_learner(name, time_step_spec, action_spec, settings, device)
  return lockstep(reference, checked, batches, reference_device, device, loss_rtol,
                  weight_rtol)


def perturbation(rel: float, seed: int = 0) -> Callable[[object], None]:
  """perturb(learner): every trainable float variable times (1 + rel x u), u uniform in
  [-1, 1] per entry: a stand-in for a device whose arithmetic rounds differently (rel 1e-6 is
  about 8 float32 ulps)."""
  rng = np.random.default_rng(seed)

  def perturb(learner) -> None:
    for v in learner.variables:
      if v.trainable and v.dtype.is_floating:
        noise = rng.uniform(-1.0, 1.0, v.shape).astype(v.dtype.as_numpy_dtype)
        v.assign(v.numpy() * (1 + rel * noise))
  return perturb


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
      placed = placed_on(run, device)
      ok = comparison.ok and placed
      result["comparisons"][name] = dict(dataclasses.asdict(comparison), ok=ok,
                                         device_placed=run.device)
      log(f"  {name:10s} {'ok    ' if ok else 'FAILED'} {comparison.line()}; variables on "
          f"{run.device or device}" + ("" if placed else f", not on {device}"))
  finally:
    tf.config.experimental.enable_tensor_float_32_execution(tf32)
  result["ok"] = all(c["ok"] for c in result["comparisons"].values())
  return result
