"""The offline run's record fine-tuning starts from, verified: its summary.json, every field
fine-tuning takes present, of its type and in range (no default fills in a missing one), and
checked against the checkpoints' own fingerprint.json (what they were trained with). One reader
for every route into fine-tuning (experiments/online/start.resolve_config: finetune_online.py,
reverb_server.py, finetune_minatar.py's runs) and every layout: train_offline.py's (Atari,
MinAtar), compare.py's, the gridworld's, and a run of ccvl_tf.fit on own data
(`_check_own_data_fields`; what fine-tuning takes from it: experiments/online/own_data.py).
"""
from __future__ import annotations

import json
import math
import os
from typing import Dict

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import tensorflow as tf

from ccvl_tf.experiments.fit import settings as fit_settings
from ccvl_tf.runtime import paths
from ccvl_tf.runtime import training
from ccvl_tf.envs.factory import GRIDWORLD


def is_number(value) -> bool:
  """A JSON number (not a bool)."""
  return isinstance(value, (int, float)) and not isinstance(value, bool)


# What train_offline.py's summary.json and its checkpoints' fingerprint.json (written when
# the checkpoints were first made, training.check_fingerprint) both record, as (summary key
# path, fingerprint key): a summary that disagrees with the checkpoint is not that
# checkpoint's. compare.py's layout: `_recorded_pairs`.
_CHECKED_AGAINST_CHECKPOINT = (
    (("game",), "game"), (("num_transitions",), "num_transitions"),
    (("settings", "alpha"), "alpha"), (("config", "ccvl_options"), "ccvl_options"),
    (("config", "num_deltas"), "num_deltas"), (("config", "num_pairs"), "num_pairs"))


# What a run of ccvl_tf.fit on own data records in both its summary.json and its checkpoints'
# fingerprint.json (experiments/fit/own_data.py `fingerprint`), under the same keys: |D|, the
# learner's config record and the network.
_OWN_DATA_CHECKED = ("num_transitions", "config", "network")


def _recorded_pairs(summary: Dict, fingerprint: Dict):
  """[(where in summary.json, its value, fingerprint key, the fingerprint's value)] of every
  setting both record: a run on own data's (`_OWN_DATA_CHECKED`), train_offline.py's layout
  (`_CHECKED_AGAINST_CHECKPOINT`), or compare.py's (units.write_train_summary /
  train_fingerprint: the game as the environment name 'suite/Game' against 'Game', alpha and
  |D| at the top level, the learner's config record flat under 'config' and at the
  fingerprint's top level)."""
  config = summary.get("config")
  if is_own_data(summary):
    return [(f" {k!r}", summary.get(k), k, fingerprint.get(k)) for k in _OWN_DATA_CHECKED]
  if _is_train_offline(summary):
    out = []
    for keys, fp_key in _CHECKED_AGAINST_CHECKPOINT:
      value = summary
      for k in keys:
        value = value.get(k) if isinstance(value, dict) else None
      out.append(("".join(f" {k!r}" for k in keys), value, fp_key, fingerprint.get(fp_key)))
    return out
  game = summary.get("game")
  out = [(" 'game'", game.rsplit("/", 1)[-1] if isinstance(game, str) else game, "game",
          fingerprint.get("game")),
         (" 'num_transitions'", summary.get("num_transitions"), "num_transitions",
          fingerprint.get("num_transitions")),
         (" 'alpha'", summary.get("alpha"), "alpha", fingerprint.get("alpha"))]
  if isinstance(config, dict):
    out += [(f" 'config' {k!r}", v, k, fingerprint.get(k)) for k, v in config.items()]
  return out


# Keys only train_offline.py's summary.json has (compare.py's units write a flat 'config').
_TRAIN_OFFLINE_ONLY = ("settings", "learner_settings", "exported_policies")


def is_own_data(summary: Dict) -> bool:
  """Whether `summary` is the record of a run of ccvl_tf.fit on own data (its 'route')."""
  return summary.get("route") == fit_settings.ROUTE


def _is_train_offline(summary: Dict) -> bool:
  return any(k in summary for k in _TRAIN_OFFLINE_ONLY)


def _check_fields(summary: Dict, path: str) -> None:
  """The fields fine-tuning takes from an offline run's summary.json, each present (where the
  run's layout and agent write it) and of its type and range; a ValueError naming `path` and
  the key: a missing field is never filled in by a default."""
  def get(keys):
    node = summary
    for k in keys:
      if not isinstance(node, dict) or k not in node:
        return _MISSING
      node = node[k]
    return node

  def need(keys, ok, what, required=True):
    value, where = get(keys), " ".join(repr(k) for k in keys)
    if value is _MISSING:
      if required:
        raise ValueError(f"{path} has no {where} ({what}): rerun the offline run to write it "
                         f"again; fine-tuning fills in no default")
      return
    if not ok(value):
      raise ValueError(f"{path} records {where} = {value!r}, which is not {what}")

  number = lambda lo, strict: (lambda v: is_number(v) and math.isfinite(v) and (  # noqa
      v > lo if strict else v >= lo))
  need(("game",), lambda v: isinstance(v, str) and bool(v), "the game's name, a string")
  need(("agent",), lambda v: isinstance(v, str) and bool(v), "the offline agent's name",
       required=_is_train_offline(summary))
  need(("num_transitions",), number(0, True), "a finite number > 0 (|D| of the offline data)",
       required=str(summary.get("game", "")).lower() != GRIDWORLD)
  agent = str(summary.get("agent", "")).lower()
  need(("belief_temperature",), lambda v: number(0, True)(v) and v <= MAX_TEMPERATURE,
       f"a number in (0, {MAX_TEMPERATURE:g}] (the belief temperature set from the offline "
       f"data: twice the smallest held-out mean squared Bellman error)",
       required=_is_train_offline(summary) and agent in ("ccvl", "fixed_ccvl"))
  if not _is_train_offline(summary):
    return
  need(("settings",), lambda v: isinstance(v, dict), "a JSON object (the training settings in "
       "force)")
  need(("settings", "alpha"), number(0, False), "a finite number >= 0 (alpha of the offline "
       "run)", required=agent in ("ccvl", "fixed_ccvl", "cql"))
  need(("config",), lambda v: isinstance(v, dict), "a JSON object (the run's settings)")
  need(("config", "ccvl_options"), lambda v: isinstance(v, dict),
       "a JSON object (the CCVL options given)")
  for key in ("num_deltas", "num_pairs"):
    need(("config", key), lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
         "an integer >= 1", required=agent in ("ccvl", "fixed_ccvl"))


def _check_own_data_fields(summary: Dict, path: str) -> None:
  """The fields fine-tuning takes from the summary.json of a run of ccvl_tf.fit on own data
  (experiments/fit/own_data.py writes them), each present and of its type: a ValueError naming
  `path` and the key otherwise. A run written before a field was recorded is rerun (the same
  call or command: a finished run resumes with nothing to train and writes its summary again);
  no default fills one in."""
  def fail(key, what, value=_MISSING):
    if value is _MISSING:
      raise ValueError(f"{path} has no {key!r} ({what}): rerun ccvl_tf.fit (or train_offline.py "
                       f"--dataset) with the run's arguments and its root_dir to write it "
                       f"again; fine-tuning fills in no default")
    raise ValueError(f"{path} records {key!r} = {value!r}, which is not {what}")

  def need(key, ok, what):
    if key not in summary:
      fail(key, what)
    if not ok(summary[key]):
      fail(key, what, summary[key])

  positive_int = lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1  # noqa
  need("method", lambda v: isinstance(v, str) and bool(v), "the method's name, a string")
  need("env", lambda v: v is None or (isinstance(v, str) and bool(v)),
       "the environment's name or null")
  need("data", lambda v: isinstance(v, str) and bool(v), "where the data was read from")
  need("num_transitions", positive_int, "an integer >= 1 (|D| of the data)")
  need("data_spec", lambda v: isinstance(v, dict) and set(v) == {
      "observation_shape", "observation_dtype", "num_actions"} and isinstance(
          v["observation_shape"], list) and all(positive_int(d) for d in v[
              "observation_shape"]) and v["observation_dtype"] in ("float32", "uint8")
       and positive_int(v["num_actions"]),
       "a JSON object of the data's 'observation_shape' (a list of integers >= 1), "
       "'observation_dtype' (float32 or uint8) and 'num_actions' (an integer >= 1)")
  need("network", lambda v: isinstance(v, dict), "a JSON object (the Q-network's settings)")
  need("config", lambda v: isinstance(v, dict), "a JSON object (the learner's settings)")
  need("reward_clip", lambda v: v is None or (is_number(v) and math.isfinite(v) and v > 0),
       "null (rewards as the data gives them) or a number > 0")
  if str(summary["method"]).lower() in ("ccvl", "fixed_ccvl"):
    need("belief_temperature", lambda v: is_number(v) and 0 < v <= MAX_TEMPERATURE,
         f"a number in (0, {MAX_TEMPERATURE:g}] (the belief temperature set from the data)")


_MISSING = object()
# The largest belief temperature a summary may record: twice a mean squared Bellman error of
# clipped rewards (|r| <= 1, so |Q| <= 1 / (1 - gamma) = 100 at gamma 0.99) is below 1e5.
MAX_TEMPERATURE = 1e6


def _has_checkpoint(ckpt_dir: str) -> bool:
  return paths.isdir(ckpt_dir) and (
      tf.train.latest_checkpoint(ckpt_dir) is not None
      or any(n.startswith("ckpt-") for n in tf.io.gfile.listdir(ckpt_dir)))


def offline_record(offline_dir: str) -> Dict[str, object]:
  """The offline run's summary.json, verified, or {} for a directory with neither a summary
  nor a checkpoint (restore_offline then names what is missing). Refused (ValueError naming
  the file and key): checkpoints without a summary (a run stopped before its end: the summary
  records the game, alpha, |D| and belief temperature fine-tuning starts from, and none may be
  filled in by a default); a summary without 'game'; 'num_transitions' or
  'belief_temperature' not a finite number > 0; a run of ccvl_tf.fit on own data without a
  field fine-tuning takes (`_check_own_data_fields`); a summary that disagrees with the
  checkpoints' own fingerprint.json (game, |D|, alpha, CCVL options, N, M; own data: |D|, the
  learner's config, the network)."""
  path = os.path.join(offline_dir, "summary.json")
  ckpt_dir = os.path.join(offline_dir, "checkpoints")
  if not paths.exists(path):
    if _has_checkpoint(ckpt_dir):
      raise ValueError(
          f"{path} is missing, but {ckpt_dir} holds checkpoints: the offline run stopped "
          f"before its end (or the file was removed). Its summary records the game, alpha, "
          f"|D| and belief temperature fine-tuning starts from; rerun train_offline.py with "
          f"--root_dir={offline_dir} and the run's flags to finish it")
    return {}
  summary = _read_summary(path)
  if is_own_data(summary):
    _check_own_data_fields(summary, path)
  else:
    _check_fields(summary, path)
  fp_path = os.path.join(ckpt_dir, training.FINGERPRINT)
  if not paths.exists(fp_path):
    return summary
  fingerprint = training.read_fingerprint(fp_path)
  for where, value, fp_key, fp_value in _recorded_pairs(summary, fingerprint):
    if value is None or fp_value is None:
      continue
    if value != fp_value:
      raise ValueError(f"{path} records{where} = {value!r}, but the checkpoints' {fp_path} "
                       f"records {fp_key!r} = {fp_value!r}: the summary is not this "
                       f"checkpoint's (edited, or copied from another run); restore the run's "
                       f"own summary.json or rerun train_offline.py with --root_dir="
                       f"{offline_dir}")
  return summary


def _read_summary(path: str) -> Dict[str, object]:
  """The offline run's summary.json at `path`; a ValueError naming it when it cannot be read,
  is not JSON or not a JSON object, or records a belief temperature that is not a number."""
  try:
    summary = json.loads(paths.read_text(path))
  except (OSError, UnicodeDecodeError, ValueError) as e:
    raise ValueError(f"{path} cannot be read as JSON ({e}); the offline run writes it whole at "
                     f"its end, so it was truncated or edited: rerun the offline run "
                     f"(train_offline.py with its --root_dir) to write it again") from None
  if not isinstance(summary, dict):
    raise ValueError(f"{path} must hold a JSON object (the offline run's summary), got "
                     f"{type(summary).__name__}")
  temperature = summary.get("belief_temperature")
  if temperature is not None and not is_number(temperature):
    raise ValueError(f"{path} records 'belief_temperature' = {temperature!r}, which is not a "
                     f"number")
  return summary
