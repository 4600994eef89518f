"""The offline training loop: progress, TensorBoard summaries, checkpoints with exact resume.

Works with any learner that follows the small protocol the agents of `agents/` implement
(the Acme pattern: the learner owns what gets checkpointed, the loop does logging and counters):

  learner.train_on_batch(batch) -> dict of scalar metrics, with at least 'loss';
      raises FloatingPointError (e.g. agents.ccvl_agent.NonFiniteLossError) on a NaN/inf loss,
      without changing its variables;
  learner.make_checkpoint() -> tf.train.Checkpoint of everything a restart needs;
  learner.train_step_counter -> int64 tf.Variable (the number of completed train steps).

Exact resume: the batch used at train step i is batch number i of `make_dataset(start)` (the
pipelines of `ccvl_tf.data.pipeline` are a deterministic function of (seed, batch number)), and
the learners draw their own randomness statelessly from (seed, step). Restarting from the
checkpoint at step k and training to step n therefore gives the same variables as an
uninterrupted run to n (tested in tests/test_training.py).

Layout under `root_dir`:
  checkpoints/      tf.train.CheckpointManager (ckpt-<step>), the last `keep_checkpoints` kept
  summaries/train/  TensorBoard scalars of the learner's metrics (+ steps_per_sec)
  summaries/eval/   TensorBoard scalars of the evaluation results
  eval.csv          step, then one column per evaluation result
"""
from __future__ import annotations

import csv
import dataclasses
import math
import os
import time
from typing import Callable, Dict, Iterable, Optional

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np
import tensorflow as tf


class TrainingStopped(RuntimeError):
  """Training stopped on a non-finite loss; `step` is the failing train step and
  `checkpoint` the last good checkpoint (kept, never overwritten by the failing state)."""

  def __init__(self, step: int, checkpoint: Optional[str], cause: BaseException):
    self.step, self.checkpoint = step, checkpoint
    super().__init__(
        f"training stopped at train step {step}: {cause}. The last good checkpoint is "
        f"{checkpoint or '(none written yet)'}; it was kept. Lower the learning rate or alpha, "
        f"or inspect the data near this step, then resume from it.")


@dataclasses.dataclass
class LoopConfig:
  """Settings of `train`.

  Attributes:
    root_dir: where checkpoints, summaries and eval.csv go (see module docstring).
    num_steps: total train steps (the loop resumes and stops there).
    checkpoint_interval: save every this many steps (and at the end).
    log_interval: print a progress line every this many steps.
    summary_interval: write TensorBoard scalars every this many steps.
    eval_interval: evaluate every this many steps (0: only at the end; needs `evaluate`).
    keep_checkpoints: how many checkpoints to keep.
  """
  root_dir: str
  num_steps: int
  checkpoint_interval: int = 5000
  log_interval: int = 500
  summary_interval: int = 100
  eval_interval: int = 0
  keep_checkpoints: int = 3

  def validate(self):
    if int(self.num_steps) != self.num_steps or self.num_steps < 0:
      raise ValueError(f"num_steps must be an integer >= 0, got {self.num_steps!r}")
    for name in ("checkpoint_interval", "log_interval", "summary_interval", "keep_checkpoints"):
      v = getattr(self, name)
      if int(v) != v or v < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
    if int(self.eval_interval) != self.eval_interval or self.eval_interval < 0:
      raise ValueError(f"eval_interval must be an integer >= 0, got {self.eval_interval!r}")


def _scalars(metrics: Dict) -> Dict[str, float]:
  out = {}
  for k, v in metrics.items():
    arr = np.asarray(v)
    if arr.size == 1 and np.issubdtype(arr.dtype, np.number) and k not in ("step", "finite"):
      out[k] = float(arr.reshape(()))
  return out


def _format_eta(seconds: float) -> str:
  if not math.isfinite(seconds):
    return "?"
  seconds = int(seconds)
  return f"{seconds // 3600:d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _append_eval_csv(path: str, step: int, results: Dict[str, float]) -> None:
  new = not os.path.exists(path)
  with open(path, "a", newline="") as f:
    w = csv.writer(f)
    keys = sorted(results)
    if new:
      w.writerow(["step"] + keys)
    w.writerow([step] + [results[k] for k in keys])


def restore_or_initialize(learner, checkpoint_dir: str, keep: int = 3, log=print):
  """A CheckpointManager for the learner, restored from its latest checkpoint if there is one.

  Raises a ValueError naming the directory if the checkpoint does not fit the learner (e.g. a
  different network or game)."""
  ckpt = learner.make_checkpoint()
  manager = tf.train.CheckpointManager(ckpt, checkpoint_dir, max_to_keep=keep)
  if manager.latest_checkpoint:
    try:
      ckpt.restore(manager.latest_checkpoint).assert_existing_objects_matched()
    except (AssertionError, ValueError, tf.errors.OpError) as e:
      raise ValueError(
          f"checkpoint {manager.latest_checkpoint} does not match this learner (another game, "
          f"agent or network size?): {e}. Use a fresh --root_dir.") from e
    log(f"Resumed from {manager.latest_checkpoint} "
        f"(train step {int(learner.train_step_counter.numpy())}).")
  return manager


def train(learner, make_dataset: Callable[[int], Iterable[Dict]], cfg: LoopConfig, *,
          evaluate: Optional[Callable[[int], Dict[str, float]]] = None,
          log: Callable[[str], None] = print) -> Dict[str, object]:
  """Trains `learner` to `cfg.num_steps`, resuming from `root_dir/checkpoints` if present.

  Args:
    learner: see the module docstring.
    make_dataset: start_batch -> iterable of transition batches; batch i is used at step i.
    cfg: LoopConfig.
    evaluate: optional step -> dict of scalar results (e.g. mean return), run every
      `eval_interval` steps and at the end.
    log: where progress lines go.

  Returns:
    dict(step=final step, last_metrics=..., last_eval=..., checkpoint=path, resumed_from=step).

  Raises:
    TrainingStopped: on a non-finite loss (the last good checkpoint is kept).
  """
  cfg.validate()
  os.makedirs(cfg.root_dir, exist_ok=True)
  manager = restore_or_initialize(learner, os.path.join(cfg.root_dir, "checkpoints"),
                                  cfg.keep_checkpoints, log)
  counter = learner.train_step_counter
  start = int(counter.numpy())
  train_writer = tf.summary.create_file_writer(os.path.join(cfg.root_dir, "summaries", "train"))
  eval_writer = tf.summary.create_file_writer(os.path.join(cfg.root_dir, "summaries", "eval"))
  eval_csv = os.path.join(cfg.root_dir, "eval.csv")
  last_metrics: Dict[str, float] = {}
  last_eval: Dict[str, float] = {}

  def run_eval(step):
    nonlocal last_eval
    if evaluate is None:
      return
    t = time.time()
    last_eval = dict(evaluate(step))
    with eval_writer.as_default():
      for k, v in last_eval.items():
        tf.summary.scalar(k, v, step=step)
    _append_eval_csv(eval_csv, step, last_eval)
    log(f"[eval] step {step}: " + ", ".join(f"{k}={v:.4g}" for k, v in sorted(last_eval.items()))
        + f"  ({time.time() - t:.1f}s)")

  if start >= cfg.num_steps:
    log(f"Already trained {start} >= {cfg.num_steps} steps; nothing to do.")
    return dict(step=start, last_metrics={}, last_eval={}, checkpoint=manager.latest_checkpoint,
                resumed_from=start)
  log(f"Training from step {start} to {cfg.num_steps}.")
  iterator = iter(make_dataset(start))
  t0 = time.time()
  t_last, step_last = t0, start
  step = start
  while step < cfg.num_steps:
    try:
      batch = next(iterator)
    except StopIteration:
      raise ValueError(f"the dataset ran out of batches at train step {step} (it must be "
                       f"infinite or hold at least {cfg.num_steps - start} batches)") from None
    try:
      metrics = learner.train_on_batch(batch)
    except FloatingPointError as e:
      raise TrainingStopped(step, manager.latest_checkpoint, e) from e
    step = int(counter.numpy())
    if step % cfg.summary_interval == 0 or step % cfg.log_interval == 0 or step == cfg.num_steps:
      last_metrics = _scalars(metrics)
    if step % cfg.summary_interval == 0:
      with train_writer.as_default():
        for k, v in last_metrics.items():
          tf.summary.scalar(k, v, step=step)
        tf.summary.scalar("steps_per_sec", (step - start) / max(time.time() - t0, 1e-9),
                          step=step)
    if step % cfg.log_interval == 0 or step == cfg.num_steps:
      now = time.time()
      rate = (step - step_last) / max(now - t_last, 1e-9)
      eta = (cfg.num_steps - step) / rate if rate > 0 else float("inf")
      shown = ", ".join(f"{k}={v:.4g}" for k, v in sorted(last_metrics.items()))
      log(f"step {step}/{cfg.num_steps}  {rate:.1f} steps/s  ETA {_format_eta(eta)}  {shown}")
      t_last, step_last = now, step
    if step % cfg.checkpoint_interval == 0 or step == cfg.num_steps:
      manager.save(checkpoint_number=step)
    if cfg.eval_interval and step % cfg.eval_interval == 0 and step != cfg.num_steps:
      run_eval(step)
  train_writer.flush()
  run_eval(step)
  eval_writer.flush()
  return dict(step=step, last_metrics=last_metrics, last_eval=last_eval,
              checkpoint=manager.latest_checkpoint, resumed_from=start)
