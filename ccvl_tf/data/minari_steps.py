"""A Minari dataset on disk as per-step arrays (``step_arrays.Steps``) for
``Transitions.from_minari``, read with h5py (minari itself is not needed).

Minari's HDF5 layout (Minari docs "Dataset Format"; ``minari/dataset/_storages/hdf5_storage.py``,
``minari_storage.py``, ``serialization.py``):
  <dataset>/data/metadata.json   data_format ("hdf5"), action_space and observation_space
                                 (each a JSON string: {"type": "Discrete", "n": 4, "start": 0}
                                 or {"type": "Box", "shape": [...], "dtype": ...}; Dict and
                                 Tuple spaces nest "subspaces"), total_episodes, ...
  <dataset>/data/main_data.hdf5  one group per episode, episode_0, episode_1, ..., each with
                                 observations [T + 1, ...] (the first and the final one
                                 included), actions [T], rewards [T] (after each action),
                                 terminations [T], truncations [T] (gymnasium's terminated /
                                 truncated after each step); a Dict / Tuple space is a group
                                 instead of a dataset.
An episode ends at its last step, which is terminated or truncated (Minari's collector marks an
unfinished episode truncated); a flag before the last step, or neither flag on it, is refused.
Terminated (also when truncated is set too, as gymnasium allows): T steps, the last terminal,
the final observation not kept. Truncated: T + 1 steps, the last a time-out whose observation is
the final s' (as step_arrays' timeouts).
"""
from __future__ import annotations

import json
import os
import re
from typing import Optional, Tuple

import numpy as np

from ccvl_tf.data import step_arrays

NAMES = dict(terminals="terminations", timeouts="truncations")
EPISODE_FIELDS = ("observations", "actions", "rewards", "terminations", "truncations")


def read(path) -> Tuple[step_arrays.Steps, Optional[int], str]:
  """(the steps, n of a Discrete action space or None, the source 'minari:<path>'); each
  problem one ValueError line naming the file or field."""
  import h5py  # pylint: disable=g-import-not-at-top

  path = os.fspath(path)
  source = "minari:" + path
  data_dir = os.path.join(path, "data")
  if not os.path.isdir(data_dir) and os.path.isfile(os.path.join(path, "main_data.hdf5")):
    data_dir = path  # the data/ folder itself
  meta_path = os.path.join(data_dir, "metadata.json")
  h5_path = os.path.join(data_dir, "main_data.hdf5")
  absent = [p for p in (meta_path, h5_path) if not os.path.isfile(p)]
  if absent:
    raise ValueError("{}: expected a Minari dataset directory holding data/metadata.json and "
                     "data/main_data.hdf5, {} not found".format(source, " and ".join(absent)))

  def fail(field, what):
    raise ValueError("{}: {}: {}".format(source, field, what))

  try:
    with open(meta_path) as f:
      meta = json.load(f)
  except (OSError, ValueError) as e:
    fail("data/metadata.json", "not readable JSON ({})".format(e))
  if not isinstance(meta, dict):
    fail("data/metadata.json", "expected a JSON object")
  if meta.get("data_format", "hdf5") != "hdf5":
    fail("data_format", "expected hdf5 (the format read here), got {!r}".format(
        meta["data_format"]))
  obs_space = _space(meta, "observation_space", fail)
  if obs_space and obs_space.get("type") in ("Dict", "Tuple", "Text"):
    fail("observation_space", "a {} space: only one array observation per step (Box) is read"
         .format(obs_space["type"]))
  act_space = _space(meta, "action_space", fail)
  n = None
  if act_space:
    if act_space.get("type") != "Discrete":
      fail("action_space", "expected Discrete actions, got a {} space".format(
          act_space.get("type")))
    if int(act_space.get("start", 0)) != 0:
      fail("action_space", "expected Discrete(n) starting at 0, got start={}".format(
          act_space["start"]))
    n = int(act_space["n"])

  try:
    with h5py.File(h5_path, "r") as f:
      parts = _episodes(f, h5py, fail)
  except OSError as e:
    fail("data/main_data.hdf5", "not a readable HDF5 file ({})".format(e))
  cat = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
  ep, step = cat.pop("episode"), cat.pop("step")
  steps = step_arrays.Steps(names=NAMES, where=lambda r: "episode_{} step {}".format(
      ep[r], step[r]), **cat)
  return steps, n, source


def _space(meta, key, fail) -> Optional[dict]:
  """The serialized space ``meta[key]`` (a JSON string or an object) as a dict, or None."""
  space = meta.get(key)
  if space is None:
    return None
  try:
    space = json.loads(space) if isinstance(space, str) else space
  except ValueError:
    fail(key, "not a serialized space (JSON): {!r}".format(space[:80]))
  if not isinstance(space, dict):
    fail(key, "expected a serialized space, a JSON object, got {!r}".format(space))
  return space


def _episodes(f, h5py, fail):
  """Per episode, in id order: its rows as per-step arrays plus episode id and step."""
  ids = sorted(int(k[len("episode_"):]) for k in f.keys() if re.fullmatch(r"episode_\d+", k))
  if not ids:
    fail("data/main_data.hdf5", "no episode_<i> groups: expected Minari episodes")
  parts = []
  for i in ids:
    name = "episode_{}".format(i)
    g = f[name]
    for k in EPISODE_FIELDS:
      if k not in g:
        fail(name, "missing {}: expected {}".format(k, ", ".join(EPISODE_FIELDS)))
      if not isinstance(g[k], h5py.Dataset):
        fail("{}/{}".format(name, k), "a group (a Dict or Tuple space): expected one array")
    t = g["actions"].shape[0] if g["actions"].ndim else -1
    if t < 0:
      fail(name + "/actions", "expected one action per step, got a scalar")
    if g["observations"].ndim == 0 or g["observations"].shape[0] != t + 1:
      fail(name + "/observations", "expected {} rows (steps + 1: the final observation "
           "included), got {}".format(t + 1, list(g["observations"].shape)))
    for k in ("rewards", "terminations", "truncations"):
      if g[k].ndim == 0 or g[k].shape[0] != t:
        fail("{}/{}".format(name, k), "expected {} rows (one per step, as actions), got {}"
             .format(t, list(g[k].shape)))
    if t == 0:
      continue
    term, trunc = g["terminations"][()] != 0, g["truncations"][()] != 0
    early = np.flatnonzero((term | trunc)[:-1])
    if early.size:
      k = "terminations" if term[early[0]] else "truncations"
      fail("{}/{}".format(name, k), "set at step {}, before the episode's last step {} "
           "(an episode ends only at its last step)".format(early[0], t - 1))
    if not (term[-1] or trunc[-1]):
      fail(name, "never ends: its last step {} is neither terminated nor truncated (expected "
           "one of the two)".format(t - 1))
    terminated = bool(term[-1])
    rows = t if terminated else t + 1
    flags = np.zeros(rows, bool)
    flags[-1] = True
    parts.append(dict(
        observations=g["observations"][:rows],
        actions=_pad(g["actions"][()], rows - t), rewards=_pad(g["rewards"][()], rows - t),
        terminals=flags if terminated else np.zeros(rows, bool),
        timeouts=np.zeros(rows, bool) if terminated else flags,
        episode=np.full(rows, i), step=np.arange(rows)))
  if not parts:
    fail("data/main_data.hdf5", "the dataset is empty (every episode has 0 steps): expected "
         "at least one transition")
  return parts


def _pad(a: np.ndarray, extra: int) -> np.ndarray:
  """``a`` with ``extra`` zero rows after it (the time-out step's unread action / reward)."""
  return np.concatenate([a, np.zeros((extra,) + a.shape[1:], a.dtype)]) if extra else a
