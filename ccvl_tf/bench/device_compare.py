"""Two learners stepped side by side on two devices, and how far apart they end: the
comparison machinery of the GPU check (ccvl_tf/bench/gpu_check.py has the check, its criteria
and why; BUILD.md, "The GPU check", the measurements behind the tolerances).

`lockstep` gives the checked learner every variable of the reference before each step and
judges each step by `compare_runs` (loss within loss_rtol relative; each trainable variable's
change within weight_rtol of the reference's change, Frobenius norms; other float state
reported), merged over the steps by `merge_steps`. `perturbation` is the tests' stand-in for a
device that rounds differently.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

LOSS_RTOL = 1e-3
WEIGHT_RTOL = 0.25


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
