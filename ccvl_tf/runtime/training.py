"""The offline training loop: progress, TensorBoard summaries, checkpoints with exact resume.

More in docs/library.md "Module notes", `ccvl_tf/runtime/training.py`.
"""
from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import re
import time
from typing import Callable, Dict, Iterable, Mapping, Optional, Sequence

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np
import tensorflow as tf

from ccvl_tf.runtime import config_flags
from ccvl_tf.runtime import machine
from ccvl_tf.runtime import writes
from ccvl_tf.runtime import paths
from ccvl_tf.runtime.paths import check_input_dir, check_output_dir  # noqa: F401  (the run's checks)
from ccvl_tf.runtime import strict_json

# Failed writes (module notes); their names as callers know them.
WriteFailed = writes.WriteFailed
writing = writes.writing
save_checkpoint = writes.save_checkpoint


class TrainingStopped(RuntimeError):
  """Training stopped on a non-finite loss; `step` is the failing train step and
  `checkpoint` the last good checkpoint (kept, never overwritten by the failing state)."""

  def __init__(self, step: int, checkpoint: Optional[str], cause: BaseException):
    self.step, self.checkpoint = step, checkpoint
    super().__init__(
        f"training stopped at train step {step}: {cause}. The last good checkpoint is "
        f"{checkpoint or '(none written yet)'}; it was kept. Lower the learning rate or alpha, "
        f"or inspect the data near this step, then resume from it.")


class BadBatches(ValueError):
  """The training batches failed on bad data at train step `step`: a ValueError their iterator
  raised (e.g. a checkpoint pool's draw reading a damaged file), its message kept first, then
  what the run directory holds: `checkpoint`, the last checkpoint (intact), or none yet."""

  def __init__(self, step: int, checkpoint: Optional[str], cause: str):
    self.step, self.checkpoint = step, checkpoint
    where = (f"the last checkpoint {checkpoint} is intact: once the data is fixed, rerun the "
             f"same command to resume from it" if checkpoint else
             "no checkpoint was written yet (the run directory holds its fingerprint and "
             "summaries): once the data is fixed, rerun the same command to start again")
    super().__init__(f"{cause} (at train step {step}; {where})")


class Interrupted(KeyboardInterrupt):
  """Ctrl-C during training, saying where the same command resumes: the last checkpoint,
  which an interrupt never damages (checkpoints are renamed into place whole). Still a
  KeyboardInterrupt, so nothing that catches Exception swallows it; config_flags.run prints it
  as one line."""

  def __init__(self, step: int, checkpoint: Optional[str]):
    self.step, self.checkpoint = step, checkpoint
    where = (f"the last checkpoint {checkpoint} is intact: rerun the same command to resume "
             f"from it" if checkpoint else
             "no checkpoint was written yet: rerun the same command to start again")
    super().__init__(f"training stopped at train step {step}; {where}")


@dataclasses.dataclass
class LoopConfig:
  """Settings of `train`.

  Attributes:
    root_dir: where checkpoints, summaries and eval.csv go (see the module notes).
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


EVAL_RECORD = "evals.json"
FINGERPRINT = "fingerprint.json"


def _write_json_atomic(path: str, obj, last_good: Optional[str] = None) -> None:
  with writing(path, last_good, [path + ".tmp"]):
    with open(path + ".tmp", "w") as f:
      strict_json.dump(obj, f, indent=1, sort_keys=True, default=float)
    os.replace(path + ".tmp", path)


def record_evaluation(root_dir: str, step: int, results: Mapping[str, float],
                      last_good: Optional[str] = None) -> None:
  """Stores `results` of `step` in the run's evaluation record (evals.json, atomic), then
  rewrites eval.csv from the record: one row per evaluated step, whatever was rerun. The
  online fine-tuning runner uses it for its end-of-run evaluation; the offline loop below
  keeps its rows the same way. `last_good`: the checkpoint a WriteFailed names."""
  record = load_eval_record(root_dir)
  record["evals"][str(int(step))] = {k: float(v) for k, v in results.items()}
  _write_json_atomic(os.path.join(root_dir, EVAL_RECORD), record, last_good)
  _write_eval_csv(os.path.join(root_dir, "eval.csv"), record["evals"], last_good)


def recorded_evaluation(root_dir: str, step: int) -> Optional[Dict[str, float]]:
  """The recorded results of `step` (record_evaluation), or None if it was not evaluated."""
  found = load_eval_record(root_dir)["evals"].get(str(int(step)))
  return None if found is None else dict(found)


def load_eval_record(root_dir: str) -> Dict[str, object]:
  """{'evals': {str(step): results}, 'last_metrics': {...}} of a run (empty if none)."""
  path = os.path.join(root_dir, EVAL_RECORD)
  if not os.path.exists(path):
    return {"evals": {}, "last_metrics": {}}
  try:
    with open(path) as f:
      record = json.load(f)
  except ValueError as e:
    raise ValueError(f"{path} is not valid JSON ({e}); it is the run's evaluation record: "
                     f"delete it to re-evaluate from the checkpoints") from None
  record.setdefault("evals", {})
  record.setdefault("last_metrics", {})
  return record


def _write_eval_csv(path: str, evals: Mapping[str, Mapping[str, float]],
                    last_good: Optional[str] = None) -> None:
  """eval.csv from the record: one row per evaluated step, in step order (atomic rewrite)."""
  keys = sorted({k for r in evals.values() for k in r})
  with writing(path, last_good, [path + ".tmp"]):
    with open(path + ".tmp", "w", newline="") as f:
      w = csv.writer(f)
      w.writerow(["step"] + keys)
      for step in sorted(evals, key=int):
        w.writerow([int(step)] + [evals[step].get(k, "") for k in keys])
    os.replace(path + ".tmp", path)


def restore_newest_intact(learner, checkpoint_dir: str, keep: int = 3, log=print):
  """(a CheckpointManager for the learner, the checkpoint restored into it, the skipped ones):
  the newest checkpoint under `checkpoint_dir` that restores, or (manager, None, []) when there
  is none.

  A checkpoint that does not restore (truncated / missing data, garbage index) is skipped with
  a log line naming it and why, and the next older one is tried. Raises a ValueError listing
  every checkpoint and its failure when none restores (e.g. all written by a learner of
  another game, agent or network size)."""
  ckpt = learner.make_checkpoint()
  manager = tf.train.CheckpointManager(ckpt, checkpoint_dir, max_to_keep=keep)
  candidates = list(reversed(manager.checkpoints))  # newest first
  failures = []
  for path in candidates:
    try:
      ckpt.restore(path).assert_existing_objects_matched()
    except Exception as e:  # pylint: disable=broad-except
      # Truncated data raises IndexError, garbage index OpError/ValueError, a learner of
      # another shape AssertionError: all mean "not this one".
      reason = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
      failures.append((path, reason))
      log(f"Skipping checkpoint {path}: it does not restore ({reason}).")
      ckpt = learner.make_checkpoint()  # a fresh object: nothing left over from the attempt
      manager = tf.train.CheckpointManager(ckpt, checkpoint_dir, max_to_keep=keep)
      continue
    return manager, path, [p for p, _ in failures]
  if failures:
    raise ValueError(
        f"no checkpoint under {checkpoint_dir} restores into this learner: "
        + "; ".join(f"{os.path.basename(p)}: {r}" for p, r in failures)
        + ". If they were written by another configuration (game, agent, network size), "
        f"point --root_dir elsewhere; if they are damaged, the run cannot resume from them.")
  return manager, None, []


def restore_or_initialize(learner, checkpoint_dir: str, keep: int = 3, log=print):
  """A CheckpointManager for the learner, restored from its newest intact checkpoint
  (`restore_newest_intact`: damaged ones skipped and named, a ValueError when none restores);
  a learner without checkpoints starts fresh."""
  manager, path, skipped = restore_newest_intact(learner, checkpoint_dir, keep, log)
  if path is None:
    return manager
  step = int(learner.train_step_counter.numpy())
  if skipped:
    log(f"Resumed from the older checkpoint {path} (train step {step}); skipped: "
        + ", ".join(os.path.basename(p) for p in skipped) + ".")
  else:
    log(f"Resumed from {path} (train step {step}).")
  return manager


class FingerprintMismatch(ValueError):
  """Resuming checkpoints that were trained on something else (config or dataset)."""


_CKPT_FILE = re.compile(r"^(ckpt-\d+)\.(index|data-\d+-of-\d+)$")
STATE_FILE = "checkpoint"  # tf.train.CheckpointManager's record of its checkpoints


def check_checkpoint_records(checkpoint_dir: str, fingerprinted: bool,
                             allow_config_change: bool = False, log=print) -> None:
  """Checkpoint files under `checkpoint_dir` come with their records, else a ValueError naming
  them: the state file (without it the manager sees no checkpoint, trains from step 0 and
  overwrites them) and, where the run fingerprints its checkpoints (`fingerprinted`), the
  fingerprint.json they were trained under (without it they cannot be checked against the
  settings now in force; --allow_config_change resumes anyway, recording this run's)."""
  if not os.path.isdir(checkpoint_dir):
    return
  names = os.listdir(checkpoint_dir)
  found = sorted({m.group(1) for m in map(_CKPT_FILE.match, names) if m},
                 key=lambda n: int(n.split("-")[1]))
  if not found:
    return
  listed = ", ".join(found)
  if STATE_FILE not in names:
    raise FingerprintMismatch(
        f"{checkpoint_dir} holds the checkpoints {listed} but not their state file "
        f"{os.path.join(checkpoint_dir, STATE_FILE)} (which names them): the run would train "
        f"from step 0 and overwrite them. Restore the file, or move the checkpoints out of "
        f"the way to train afresh")
  if fingerprinted and FINGERPRINT not in names:
    if allow_config_change:
      log(f"Resuming {listed} in {checkpoint_dir} without its {FINGERPRINT} "
          f"(--allow_config_change): this run's settings are recorded as theirs.")
      return
    raise FingerprintMismatch(
        f"{checkpoint_dir} holds the checkpoints {listed} but not their "
        f"{os.path.join(checkpoint_dir, FINGERPRINT)} (the settings and data they were trained "
        f"with), so they cannot be checked against this run's. Restore the file, use another "
        f"--root_dir, or pass --allow_config_change to resume anyway")


def _moved(stored, current) -> bool:
  """Whether two fingerprint entries name the same files in another place: dicts equal but for
  'path', with an equal 'listing_sha256' (the hash of the file names, sizes and metadata, e.g.
  a run directory copied elsewhere with its default dataset inside it)."""
  if not (isinstance(stored, dict) and isinstance(current, dict)):
    return False
  if "listing_sha256" not in stored or stored.get("path") == current.get("path"):
    return False
  rest = lambda d: {k: v for k, v in d.items() if k != "path"}
  return rest(stored) == rest(current)


_REMEDY = "Use another --root_dir, or pass --allow_config_change to resume anyway."


def read_fingerprint(path: str) -> Dict[str, object]:
  """The fingerprint.json at `path`; FingerprintMismatch naming it when it cannot be read as a
  JSON object (cut short or edited)."""
  try:
    stored = json.loads(paths.read_text(path))
    if not isinstance(stored, dict):
      raise ValueError(f"a JSON object, got {type(stored).__name__}")
  except (OSError, UnicodeDecodeError, ValueError) as e:
    raise FingerprintMismatch(
        f"{path} (what the checkpoints beside it were trained with) cannot be read ({e}): it "
        f"was cut short or edited, so the checkpoints cannot be checked against this run's "
        f"settings. Restore it, or use another --root_dir") from None
  return stored


# The settings changes a run resumed under (--allow_config_change), each at the train step
# it took effect: beside fingerprint.json, which keeps the settings the run started with.
CHANGES = "config_changes.json"


def changed_lines(old: Mapping[str, object], new: Mapping[str, object],
                  skip: Sequence[str] = ()) -> list:
  """'name: old -> new' for each setting that differs between two fingerprints, each once:
  nested records entry by entry ('learner.dr3_coef: 0.0 -> 0.1'), and an entry of a nested
  record left out where the same change of the same name is listed at the top level (alpha
  changed is 'alpha: ...', not also 'learner.alpha: ...')."""
  lines = config_flags.diff_lines(old, new, skip=skip)
  shown = set(lines)
  return [line for line in lines
          if "." not in line.split(":", 1)[0] or line.split(":", 1)[0].rsplit(".", 1)[1]
          + ":" + line.split(":", 1)[1] not in shown]


def checkpoint_step(checkpoint_dir: str) -> int:
  """The train step of the newest checkpoint the state file under `checkpoint_dir` names
  (its number: checkpoints are saved numbered by step), 0 when there is none."""
  state = tf.train.get_checkpoint_state(checkpoint_dir)
  path = state.model_checkpoint_path if state is not None else ""
  found = re.search(r"ckpt-(\d+)$", path or "")
  return int(found.group(1)) if found else 0


def record_change(checkpoint_dir: str, step: int, changes: Sequence[str]) -> None:
  """Appends {'step', 'changes'} to the run's CHANGES record (a rerun under the same changed
  settings adds nothing)."""
  path = os.path.join(checkpoint_dir, CHANGES)
  record = []
  if os.path.exists(path):
    try:
      record = json.loads(paths.read_text(path))
    except (OSError, UnicodeDecodeError, ValueError):
      record = []
  if not isinstance(record, list):
    record = []
  if record and isinstance(record[-1], dict) and record[-1].get("changes") == list(changes):
    return
  record.append({"step": int(step), "changes": list(changes)})
  _write_json_atomic(path, record)


def read_changes(checkpoint_dir: str) -> list:
  """The CHANGES record of a run ([] when it resumed under no other settings)."""
  path = os.path.join(checkpoint_dir, CHANGES)
  if not os.path.exists(path):
    return []
  try:
    record = json.loads(paths.read_text(path))
  except (OSError, UnicodeDecodeError, ValueError):
    return []
  return record if isinstance(record, list) else []


MACHINES = "machines.json"


def record_machine(checkpoint_dir: str, step: int, last_good: Optional[str] = None) -> None:
  """Appends {'from_step': step, **machine.record()} to the run's MACHINES record: the machine
  each training segment ran on (a resumed run may train on another; two CPU types train
  different weights from one seed, docs/results/reproducibility.md). A segment that starts at
  `step` supersedes the entries from `step` on: what they trained past the checkpoint it
  resumes from is trained again."""
  path = os.path.join(checkpoint_dir, MACHINES)
  entries = [e for e in read_machines(checkpoint_dir) if e["from_step"] < step]
  with writing(checkpoint_dir, last_good):
    os.makedirs(checkpoint_dir, exist_ok=True)
  entries.append({"from_step": int(step), **machine.record()})
  _write_json_atomic(path, entries, last_good)


def read_machines(checkpoint_dir: str) -> list:
  """The MACHINES record of a run ([] before its first training segment, or a run trained
  before runs recorded it); one that cannot be read is a FingerprintMismatch naming it."""
  path = os.path.join(checkpoint_dir, MACHINES)
  if not os.path.exists(path):
    return []
  try:
    entries = json.loads(paths.read_text(path))
    if not isinstance(entries, list):
      raise ValueError(f"a JSON list, got {type(entries).__name__}")
    for i, e in enumerate(entries):
      step = e.get("from_step") if isinstance(e, dict) else None
      if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise ValueError(f"entry {i} must be an object with an integer 'from_step' >= 0, got "
                         f"{json.dumps(e)[:80]}")
  except (OSError, UnicodeDecodeError, ValueError) as e:
    raise FingerprintMismatch(
        f"{path} (the machines this run trained on) cannot be read ({e}): it was cut short "
        f"or edited. Restore it, or delete it (the record then starts again)") from None
  return entries


def check_fingerprint(checkpoint_dir: str, fingerprint: Optional[Mapping[str, object]],
                      allow_change: bool = False, log=print, remedy: str = _REMEDY,
                      normalize: Optional[Callable[[Dict], Dict]] = None,
                      since: Sequence[str] = ()) -> None:
  """Stores `fingerprint` with the checkpoints, or compares it with the stored one.

  Raises FingerprintMismatch listing the differences and then `remedy` (what the caller's user
  can do; unless allow_change, which logs them and keeps the stored fingerprint). Data that
  only moved (`_moved`: the same listing hash under another path) is not a difference: it is
  logged and the stored path updated. `normalize` maps both fingerprints to what is compared
  (e.g. settings given at their default dropped: an explicit default is no change); keys of
  `since` (added to the fingerprint later) are compared only when the stored one has them."""
  if fingerprint is None:
    return
  with writing(checkpoint_dir):
    os.makedirs(checkpoint_dir, exist_ok=True)
  path = os.path.join(checkpoint_dir, FINGERPRINT)
  fingerprint = json.loads(strict_json.dumps(dict(fingerprint), sort_keys=True, default=str))
  if not os.path.exists(path):
    _write_json_atomic(path, fingerprint)
    return
  stored = read_fingerprint(path)
  moved = {k: (stored[k]["path"], fingerprint[k]["path"])
           for k in sorted(set(stored) & set(fingerprint)) if _moved(stored[k], fingerprint[k])}
  if moved:
    log("The same data in another place (equal file listing hash), so the run resumes: "
        + "; ".join(f"{k}: {old} -> {new}" for k, (old, new) in moved.items()))
    stored = {**stored, **{k: fingerprint[k] for k in moved}}
    with writing(checkpoint_dir):
      _write_json_atomic(path, stored)
  a, b = (stored, fingerprint) if normalize is None else (normalize(stored),
                                                          normalize(fingerprint))
  older = [k for k in since if k not in stored and k in b]
  if older:
    log(f"The checkpoints' {FINGERPRINT} predates {', '.join(older)}: "
        f"{'that is' if len(older) == 1 else 'those are'} not compared on this resume.")
  diffs = changed_lines(a, b, skip=older)
  if not diffs:
    return
  if allow_change:
    step = checkpoint_step(checkpoint_dir)
    record_change(checkpoint_dir, step, diffs)
    log(f"Resuming although the run's fingerprint changed (--allow_config_change; recorded "
        f"in {os.path.join(checkpoint_dir, CHANGES)} as taking effect at train step {step}): "
        + "; ".join(diffs))
    return
  raise FingerprintMismatch(
      f"the checkpoints in {checkpoint_dir} were trained with another configuration or "
      f"dataset: " + "; ".join(diffs) + ". " + remedy)


class _Loop:
  """The state of one `train` call and its phases: exactly-once evaluation (`run_eval`), the
  train phase (`run_train_phase`), its summaries / progress lines and checkpoints."""

  def __init__(self, learner, cfg: LoopConfig, manager, evaluate, log):
    self.learner, self.cfg, self.manager, self.evaluate, self.log = (
        learner, cfg, manager, evaluate, log)
    self.start = int(learner.train_step_counter.numpy())
    self.summaries = os.path.join(cfg.root_dir, "summaries")
    with self.writing(self.summaries):
      self.train_writer = tf.summary.create_file_writer(os.path.join(self.summaries, "train"))
      self.eval_writer = tf.summary.create_file_writer(os.path.join(self.summaries, "eval"))
    self.eval_csv = os.path.join(cfg.root_dir, "eval.csv")
    self.record = load_eval_record(cfg.root_dir)
    self.evals = self.record["evals"]
    self.last_metrics: Dict[str, float] = dict(self.record["last_metrics"])

  def writing(self, path: str, leftovers: Sequence[str] = ()):
    """`writing` of `path`, naming the manager's latest checkpoint."""
    return writing(path, self.manager.latest_checkpoint, leftovers)

  def latest_eval(self) -> Dict[str, float]:
    return dict(self.evals[max(self.evals, key=int)]) if self.evals else {}

  def result(self, step: int) -> Dict[str, object]:
    """What `train` returns."""
    return dict(step=step, last_metrics=self.last_metrics, last_eval=self.latest_eval(),
                checkpoint=self.manager.latest_checkpoint, resumed_from=self.start,
                machines=read_machines(os.path.join(self.cfg.root_dir, "checkpoints")))

  def is_eval_step(self, step: int) -> bool:
    return bool(self.cfg.eval_interval) and step % self.cfg.eval_interval == 0

  def run_eval(self, step: int) -> None:
    """Evaluates `step` unless the record has it (exactly once across kills)."""
    if self.evaluate is None or str(step) in self.evals:
      return
    t = time.time()
    results = {k: float(v) for k, v in dict(self.evaluate(step)).items()}
    self.evals[str(step)] = results
    last_good = self.manager.latest_checkpoint
    _write_json_atomic(os.path.join(self.cfg.root_dir, EVAL_RECORD), self.record,
                       last_good)  # durable first
    _write_eval_csv(self.eval_csv, self.evals, last_good)
    with self.writing(self.summaries), self.eval_writer.as_default():
      for k, v in results.items():
        tf.summary.scalar(k, v, step=step)
      self.eval_writer.flush()
    self.log(f"[eval] step {step}: "
             + ", ".join(f"{k}={v:.4g}" for k, v in sorted(results.items()))
             + f"  ({time.time() - t:.1f}s)")

  def _summarize_and_log(self, step: int, metrics, t0: float) -> None:
    """TensorBoard scalars every summary_interval steps, a progress line every log_interval
    steps and at the last step."""
    cfg = self.cfg
    if step % cfg.summary_interval == 0 or step % cfg.log_interval == 0 or step == cfg.num_steps:
      self.last_metrics = _scalars(metrics)
    if step % cfg.summary_interval == 0:
      with self.writing(self.summaries), self.train_writer.as_default():
        for k, v in self.last_metrics.items():
          tf.summary.scalar(k, v, step=step)
        tf.summary.scalar("steps_per_sec", (step - self.start) / max(time.time() - t0, 1e-9),
                          step=step)
    if step % cfg.log_interval == 0 or step == cfg.num_steps:
      now = time.time()
      rate = (step - self._step_last) / max(now - self._t_last, 1e-9)
      eta = (cfg.num_steps - step) / rate if rate > 0 else float("inf")
      shown = ", ".join(f"{k}={v:.4g}" for k, v in sorted(self.last_metrics.items()))
      self.log(f"step {step}/{cfg.num_steps}  {rate:.1f} steps/s  ETA {_format_eta(eta)}  "
               f"{shown}")
      self._t_last, self._step_last = now, step

  def _maybe_checkpoint(self, step: int) -> None:
    """Every evaluation step is a checkpoint step too (exactly-once evaluation); the last
    step also records the last metrics."""
    cfg = self.cfg
    if step % cfg.checkpoint_interval == 0 or step == cfg.num_steps or (
        self.is_eval_step(step) and self.evaluate is not None):
      if step == cfg.num_steps:
        self.record["last_metrics"] = dict(self.last_metrics)
        _write_json_atomic(os.path.join(cfg.root_dir, EVAL_RECORD), self.record,
                           self.manager.latest_checkpoint)
      save_checkpoint(self.manager, step)

  def run_train_phase(self, make_dataset: Callable[[int], Iterable[Dict]]) -> int:
    """Steps from `start` to cfg.num_steps on make_dataset(start); returns the last step."""
    cfg, start = self.cfg, self.start
    iterator = iter(make_dataset(start))
    t0 = time.time()
    self._t_last, self._step_last = t0, start
    step = start
    try:
      while step < cfg.num_steps:
        bad = None
        try:
          batch = next(iterator)
        except StopIteration:
          raise ValueError(f"the dataset ran out of batches at train step {step} (it must be "
                           f"infinite or hold at least {cfg.num_steps - start} batches)") from None
        except ValueError as e:  # bad data found as it is read: said with what is written
          bad = str(e)
        if bad is not None:
          raise BadBatches(step, self.manager.latest_checkpoint, bad)
        try:
          metrics = self.learner.train_on_batch(batch)
        except FloatingPointError as e:
          raise TrainingStopped(step, self.manager.latest_checkpoint, e) from e
        step = int(self.learner.train_step_counter.numpy())
        self._summarize_and_log(step, metrics, t0)
        self._maybe_checkpoint(step)
        if self.is_eval_step(step) and step != cfg.num_steps:
          self.run_eval(step)
    finally:
      # The input pipeline is stopped here, in this thread, whatever ends the loop: an
      # exception (a non-finite loss, a failed write) would otherwise keep the iterator alive
      # through its traceback (see `train` on Ctrl-C).
      del iterator
    return step


def train(learner, make_dataset: Callable[[int], Iterable[Dict]], cfg: LoopConfig, *,
          evaluate: Optional[Callable[[int], Dict[str, float]]] = None,
          log: Callable[[str], None] = print,
          fingerprint: Optional[Mapping[str, object]] = None,
          allow_config_change: bool = False, remedy: str = _REMEDY,
          fingerprint_normalize: Optional[Callable[[Dict], Dict]] = None,
          fingerprint_since: Sequence[str] = ()) -> Dict[str, object]:
  """Trains `learner` to `cfg.num_steps`, resuming from `root_dir/checkpoints` if present.

  Args:
    learner: see the module notes.
    make_dataset: start_batch -> iterable of transition batches; batch i is used at step i.
    cfg: LoopConfig.
    evaluate: optional step -> dict of scalar results (e.g. mean return), run every
      `eval_interval` steps and at the end.
    log: where progress lines go.
    fingerprint: what the learned function depends on (agent, hyperparameters, dataset
      identity); stored with the checkpoints, and a resume with a different one is refused
      (FingerprintMismatch, ending with `remedy`) unless allow_config_change;
      `fingerprint_normalize`, `fingerprint_since`: check_fingerprint's `normalize`, `since`.

  Returns:
    dict(step=final step, last_metrics=..., last_eval=..., checkpoint=path, resumed_from=step).

  Raises:
    TrainingStopped: on a non-finite loss (the last good checkpoint is kept).
    BadBatches: the batches' iterator raised a ValueError (bad data read during training);
      names the step and the last checkpoint, which is kept.
    WriteFailed: a file could not be written (disk full, ...); names it and the last good
      checkpoint, which is kept.
  """
  cfg.validate()
  with writing(cfg.root_dir):
    os.makedirs(cfg.root_dir, exist_ok=True)
  ckpt_dir = os.path.join(cfg.root_dir, "checkpoints")
  check_checkpoint_records(ckpt_dir, fingerprint is not None, allow_config_change, log)
  check_fingerprint(ckpt_dir, fingerprint, allow_config_change, log, remedy,
                    fingerprint_normalize, fingerprint_since)
  manager = restore_or_initialize(learner, ckpt_dir, cfg.keep_checkpoints, log)
  loop = _Loop(learner, cfg, manager, evaluate, log)
  if loop.evals:  # eval.csv from the record: a run stopped by a failed write left it behind
    _write_eval_csv(loop.eval_csv, loop.evals, manager.latest_checkpoint)
  start = loop.start
  # An evaluation that a kill interrupted: its checkpoint is the one just restored.
  if start > 0 and (loop.is_eval_step(start) or start >= cfg.num_steps):
    loop.run_eval(start)
  if start >= cfg.num_steps:
    log(f"Already trained {start} >= {cfg.num_steps} steps; nothing to do.")
    return loop.result(start)
  log(f"Training from step {start} to {cfg.num_steps}.")
  record_machine(ckpt_dir, start, manager.latest_checkpoint)
  interrupted = None
  try:
    step = loop.run_train_phase(make_dataset)
    with loop.writing(loop.summaries):
      loop.train_writer.flush()
    loop.run_eval(step)
    with loop.writing(loop.summaries):
      loop.eval_writer.flush()
  except KeyboardInterrupt:
    interrupted = Interrupted(int(learner.train_step_counter.numpy()),
                              manager.latest_checkpoint)
  if interrupted is not None:
    # Raised here, after the KeyboardInterrupt is dropped, not chained to it: its traceback
    # holds every frame it crossed, the input pipeline's iterator among them when Ctrl-C
    # landed while a batch was awaited, and would keep that iterator alive until the
    # interpreter shuts down, when its threads, which run Python (tf.numpy_function), can no
    # longer take the GIL: the exit then stalls.
    raise interrupted
  return loop.result(step)
