"""``Transitions``: a researcher's own discrete-action dataset in memory, checked once when it
is read, sampled in batches that are a function of (seed, batch number).

Readers (each checks its input and says what is wrong in one ValueError line that starts with
the source, e.g. ``data.npz: actions: ...``; docs/data.md "Your own data"):
  Transitions.from_arrays(observations, actions, rewards, terminals, timeouts=None)
      per-step arrays with d3rlpy's ``MDPDataset`` meaning (``step_arrays``)
  Transitions.from_npz(path)       the same arrays in an .npz (what ``save_npz`` writes)
  Transitions.from_rlds(episodes)  a tf.data.Dataset of RLDS episodes (``rlds_steps``)
  Transitions.from_minari(path)    a Minari dataset directory, HDF5 format (``minari_steps``)

Storage: every observation a transition uses is held once, in episode and step order; a
transition names its s and s' by row, so s' costs no second copy.
"""
from __future__ import annotations

import hashlib
import os
from typing import Dict, Iterator, Optional, Tuple

import numpy as np

from ccvl_tf.data import step_arrays

# The transition-batch keys, in the order of ccvl_tf/data/pipeline.py's KEYS.
BATCH_KEYS = ("observation", "action", "reward", "next_observation", "terminal")
# The arrays of a Transitions with their dtypes (observations: float32 or uint8).
_INDEX_ARRAYS = (("obs_index", np.int64), ("next_index", np.int64), ("action", np.int32),
                 ("reward", np.float32), ("terminal", np.float32), ("episode", np.int64))


class Transitions:
  """N transitions of E whole episodes over M stored observations (M = N + the episodes that
  end in a time-out: their last observation is only an s').

  Attributes:
    observations: [M, *observation_shape]; float32 vectors [M, D] or uint8 images
      [M, H, W, C]; episode by episode, each episode's steps in order.
    obs_index: int64 [N]; s of transition i is ``observations[obs_index[i]]``.
    next_index: int64 [N]; s' of transition i. For a terminal transition it is
      ``obs_index[i]`` (unused: nothing bootstraps from a terminal s').
    action: int32 [N] in [0, num_actions).
    reward: float32 [N], the reward that followed the action.
    terminal: float32 [N]; 1.0 where s' is terminal (no bootstrap), else 0.0. A time-out is
      not terminal: its transition has terminal 0 and a real s'.
    episode: int64 [N]; the episode of transition i, 0-based in order (only episodes that give
      at least one transition are numbered).
    num_actions: the number of discrete actions.
    source: what the data was read from, for messages and records ("arrays",
      "/path/x.npz", "rlds", "minari:/path").

  The constructor checks that the arrays have this layout (what the readers make); use the
  readers, ``from_*``. The arrays are read-only views: a Transitions never changes.
  """

  def __init__(self, observations: np.ndarray, obs_index: np.ndarray, next_index: np.ndarray,
               action: np.ndarray, reward: np.ndarray, terminal: np.ndarray,
               episode: np.ndarray, num_actions: int, source: str = "arrays"):
    self.source = str(source)
    self.num_actions = int(num_actions)
    self.observations = _read_only(np.asarray(observations))
    given = dict(obs_index=obs_index, next_index=next_index, action=action, reward=reward,
                 terminal=terminal, episode=episode)
    for name, dtype in _INDEX_ARRAYS:
      setattr(self, name, _read_only(np.asarray(given[name], dtype)))
    self._check_layout()

  # --- what it holds ---

  @property
  def num_transitions(self) -> int:
    return int(self.action.shape[0])

  @property
  def num_episodes(self) -> int:
    return int(self.episode[-1]) + 1

  @property
  def observation_shape(self) -> Tuple[int, ...]:
    return tuple(int(d) for d in self.observations.shape[1:])

  @property
  def observation_dtype(self) -> np.dtype:
    return self.observations.dtype

  @property
  def nbytes(self) -> int:
    """Bytes of every array held (observations and the per-transition arrays)."""
    return int(self.observations.nbytes + sum(getattr(self, n).nbytes for n, _ in
                                              _INDEX_ARRAYS))

  def __repr__(self) -> str:
    return "Transitions({:,} transitions, {:,} episodes, observations {} {}, {} actions, " \
        "from {})".format(self.num_transitions, self.num_episodes, list(self.observation_shape),
                          self.observation_dtype, self.num_actions, self.source)

  # --- batches ---

  def batch(self, idx) -> Dict[str, np.ndarray]:
    """The transitions ``idx`` (int [B]) as a transition-batch dict (docs/CONTRACTS.md
    "Transition batches"): observation / next_observation [B, *observation_shape] as stored
    (float32 or uint8), action int32 [B], reward float32 [B], terminal float32 [B]."""
    idx = np.asarray(idx)
    if idx.size == 0:
      idx = idx.astype(np.int64)
    if idx.ndim != 1 or idx.dtype.kind not in "iu":
      raise ValueError("{}: batch: expected integer transition indices [B], got {} {}".format(
          self.source, idx.dtype, list(idx.shape)))
    if idx.size and (idx.min() < 0 or idx.max() >= self.num_transitions):
      raise ValueError("{}: batch: expected indices in [0, {}), got {}".format(
          self.source, self.num_transitions, idx.min() if idx.min() < 0 else idx.max()))
    return dict(observation=np.take(self.observations, self.obs_index[idx], axis=0),
                action=self.action[idx], reward=self.reward[idx],
                next_observation=np.take(self.observations, self.next_index[idx], axis=0),
                terminal=self.terminal[idx])

  def batch_indices(self, batch_size: int, seed: int, batch_number: int) -> np.ndarray:
    """The transitions of batch ``batch_number``: ``batch_size`` drawn uniformly with
    replacement by ``np.random.default_rng([seed, batch_number])``."""
    rng = np.random.default_rng([int(seed), int(batch_number)])
    return rng.integers(0, self.num_transitions, batch_size)

  def batches(self, batch_size: int, seed: int, start: int = 0) -> Iterator[Dict[str, np.ndarray]]:
    """Batches ``start``, ``start + 1``, ... without end; batch i is
    ``batch(batch_indices(batch_size, seed, i))``, a function of (seed, i) only, so a run
    resumed at step k passes ``start=k`` and sees the batches it would have seen."""
    _check_int(batch_size, "batch_size", 1, self.source)
    _check_int(seed, "seed", 0, self.source)
    _check_int(start, "start", 0, self.source)

    def stream():  # the arguments are checked above, at the call, not at the first batch
      i = int(start)
      while True:
        yield self.batch(self.batch_indices(batch_size, seed, i))
        i += 1
    return stream()

  # --- split, identity ---

  def split(self, held_out_fraction: float, seed: int) -> Tuple["Transitions", "Transitions"]:
    """(kept, held_out) by whole episodes: held_out_fraction x E episodes (rounded half up),
    drawn with ``np.random.default_rng(seed)``, are held out. Both parts must hold at least one
    episode, or ValueError."""
    _check_int(seed, "seed", 0, self.source)
    e = self.num_episodes
    try:
      frac = float(held_out_fraction)
    except (TypeError, ValueError):
      frac = float("nan")
    k = int(np.floor(frac * e + 0.5)) if 0 < frac < 1 else -1
    if not 0 < k < e:
      raise ValueError(
          "{}: held_out_fraction: expected a fraction that leaves at least one of the {} "
          "episodes on each side (at least {:.3g}, below {:.3g}), got {!r}".format(
              self.source, e, 0.5 / e, 1 - 0.5 / e, held_out_fraction) if e > 1 else
          "{}: held_out_fraction: a split by episodes needs at least 2 episodes, the data has "
          "1".format(self.source))
    held = np.zeros(e, bool)
    held[np.random.default_rng(int(seed)).choice(e, k, replace=False)] = True
    what = "{} (split {} seed {}: {{}})".format(self.source, held_out_fraction, seed)
    return (self._subset(~held[self.episode], what.format("kept")),
            self._subset(held[self.episode], what.format("held out")))

  def _subset(self, keep: np.ndarray, source: str) -> "Transitions":
    """The transitions ``keep`` (bool [N], whole episodes), their rows compacted."""
    obs_index, next_index = self.obs_index[keep], self.next_index[keep]
    used = np.union1d(obs_index, next_index)
    _, episode = np.unique(self.episode[keep], return_inverse=True)
    return Transitions(self.observations[used], np.searchsorted(used, obs_index),
                       np.searchsorted(used, next_index), self.action[keep],
                       self.reward[keep], self.terminal[keep], episode, self.num_actions,
                       source)

  def fingerprint(self) -> str:
    """sha256 (hex) over every array (name, dtype, shape, bytes) and num_actions: the same
    data read from any reader or path gives the same fingerprint, and any changed value
    another (a run refuses to resume on other data)."""
    h = hashlib.sha256()
    for name in ("observations",) + tuple(n for n, _ in _INDEX_ARRAYS):
      a = np.ascontiguousarray(getattr(self, name))
      h.update("{}:{}:{};".format(name, a.dtype.str, a.shape).encode())
      h.update(memoryview(a).cast("B"))
    h.update("num_actions:{}".format(self.num_actions).encode())
    return h.hexdigest()

  # --- files ---

  def step_arrays(self) -> Dict[str, np.ndarray]:
    """The per-step arrays (``from_arrays``' meaning) that give these transitions back:
    observations as stored [M, ...]; actions int32, rewards float32, terminals and timeouts
    float32 [M]. A row that only holds a timed-out episode's last observation has timeouts
    1 and action 0, reward 0 (not read)."""
    m = self.observations.shape[0]
    actions, rewards = np.zeros(m, np.int32), np.zeros(m, np.float32)
    terminals, timeouts = np.zeros(m, np.float32), np.zeros(m, np.float32)
    actions[self.obs_index] = self.action
    rewards[self.obs_index] = self.reward
    terminals[self.obs_index] = self.terminal
    last = np.r_[self.episode[1:] != self.episode[:-1], True]
    timeouts[self.next_index[last & (self.terminal == 0)]] = 1
    return dict(observations=self.observations, actions=actions, rewards=rewards,
                terminals=terminals, timeouts=timeouts)

  def save_npz(self, path: str) -> None:
    """Writes the per-step arrays (``step_arrays``) and num_actions to the .npz ``path``
    (uncompressed; through a temporary file renamed into place). ``from_npz`` reads it back
    to the same arrays and fingerprint; its observations, actions, rewards, terminals and
    timeouts are also the arguments of d3rlpy's ``MDPDataset`` (not tested against d3rlpy)."""
    path = os.fspath(path)
    tmp = path + ".tmp.npz"
    try:
      np.savez(tmp, num_actions=np.int64(self.num_actions), **self.step_arrays())
      os.replace(tmp, path)
    except OSError as e:
      if os.path.exists(tmp):
        os.remove(tmp)
      raise OSError("could not write {}: {}".format(path, e.strerror or e)) from None

  # --- readers ---

  @classmethod
  def from_arrays(cls, observations, actions, rewards, terminals, timeouts=None, *,
                  num_actions: Optional[int] = None, source: str = "arrays") -> "Transitions":
    """Per-step arrays with d3rlpy's ``MDPDataset`` meaning (``ccvl_tf/data/step_arrays.py``):
    observations [T, D] (any numbers, stored float32) or uint8 [T, H, W, C]; actions [T]
    integers; rewards [T] (the reward after the action); terminals [T] 0/1 (the episode
    terminated after this step); timeouts [T] 0/1 or None (the episode was cut after this
    step). Step t's s' is observations[t + 1] of its episode; a terminated episode's last step
    is a terminal transition; a timed-out episode's last step is only the s' of the step
    before (d3rlpy: a timed-out episode of T steps gives T - 1 transitions).
    num_actions: given, or the largest action of a transition + 1 (as d3rlpy infers
    ``action_size``). Observations already float32 (or uint8 images) with every row used are
    held without a copy: do not change them afterwards."""
    steps = step_arrays.Steps(observations, actions, rewards, terminals, timeouts)
    return cls._of(step_arrays.derive(steps, source, num_actions), source)

  @classmethod
  def from_npz(cls, path, *, num_actions: Optional[int] = None) -> "Transitions":
    """An .npz with the arrays of ``from_arrays`` under the keys observations, actions,
    rewards, terminals, and optionally timeouts and num_actions (what ``save_npz`` writes).
    num_actions: given, else the file's, else the largest action + 1."""
    path = os.fspath(path)
    try:
      with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    except FileNotFoundError:
      raise ValueError("{}: no such file: expected an .npz of per-step arrays".format(
          path)) from None
    except (OSError, ValueError) as e:
      raise ValueError("{}: not a readable .npz of arrays ({}): expected the keys {}".format(
          path, str(e).splitlines()[0] if str(e) else type(e).__name__,
          ", ".join(step_arrays.FIELDS))) from None
    missing = [k for k in step_arrays.FIELDS[:4] if k not in arrays]
    if missing:
      raise ValueError("{}: missing key(s) {}: expected observations, actions, rewards, "
                       "terminals (and optionally timeouts, num_actions), found {}".format(
                           path, ", ".join(missing), ", ".join(sorted(arrays)) or "none"))
    if num_actions is None and "num_actions" in arrays:
      stored = arrays["num_actions"]
      if stored.shape != () or stored.dtype.kind not in "iu":
        raise ValueError("{}: num_actions: expected one integer, got {} {}".format(
            path, stored.dtype, list(stored.shape)))
      num_actions = int(stored)
    return cls.from_arrays(arrays["observations"], arrays["actions"], arrays["rewards"],
                           arrays["terminals"], arrays.get("timeouts"),
                           num_actions=num_actions, source=path)

  @classmethod
  def from_rlds(cls, episodes, *, num_actions: Optional[int] = None,
                source: str = "rlds") -> "Transitions":
    """A ``tf.data.Dataset`` of RLDS episodes (each a dict with a 'steps' dataset of dicts
    with observation, action, reward, is_first, is_last, is_terminal): step t's reward
    follows its action; the is_last step holds the final observation (its action and reward
    are not read); is_terminal on it makes the transition before it terminal, else the
    episode was truncated (``ccvl_tf/data/rlds_steps.py``). num_actions: given, or the
    largest action + 1."""
    from ccvl_tf.data import rlds_steps  # pylint: disable=g-import-not-at-top (TensorFlow)
    steps = rlds_steps.read(episodes, source)
    return cls._of(step_arrays.derive(steps, source, num_actions), source)

  @classmethod
  def from_tfds(cls, directory, *, split: str = "train",
                num_actions: Optional[int] = None) -> "Transitions":
    """A TFDS dataset of RLDS episodes on disk (the directory holding its
    ``dataset_info.json``, as rlds' EpisodeWriter or a TFDS builder writes it), read with
    ``tfds.builder_from_directory`` in file order, then as `from_rlds`."""
    import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
    directory = str(directory)
    if not os.path.isfile(os.path.join(directory, "dataset_info.json")):
      raise ValueError("{}: not a TFDS dataset directory (expected its dataset_info.json "
                       "there)".format(directory))
    episodes = tfds.builder_from_directory(directory).as_dataset(split=split,
                                                                 shuffle_files=False)
    return cls.from_rlds(episodes, num_actions=num_actions, source="tfds:" + directory)

  @classmethod
  def from_minari(cls, path, *, num_actions: Optional[int] = None) -> "Transitions":
    """A Minari dataset directory (``<dataset>/data/main_data.hdf5`` and
    ``<dataset>/data/metadata.json``) read with h5py (``ccvl_tf/data/minari_steps.py``).
    num_actions: the metadata's Discrete action space; else given (a given one must agree
    with a Discrete space)."""
    from ccvl_tf.data import minari_steps  # pylint: disable=g-import-not-at-top (h5py)
    steps, space_n, source = minari_steps.read(path)
    if space_n is not None and num_actions is not None and num_actions != space_n:
      raise ValueError("{}: num_actions: given {}, but the dataset's action space is "
                       "Discrete({})".format(source, num_actions, space_n))
    return cls._of(step_arrays.derive(steps, source, space_n if num_actions is None
                                      else num_actions), source)

  @classmethod
  def _of(cls, d: step_arrays.Derived, source: str) -> "Transitions":
    return cls(d.observations, d.obs_index, d.next_index, d.action, d.reward, d.terminal,
               d.episode, d.num_actions, source)

  # --- the layout check ---

  def _check_layout(self) -> None:
    """One ValueError line unless the arrays have the layout of the class docstring: episode
    after episode, each a run of consecutive rows whose transitions chain (s' of one is s of
    the next), ending in a terminal transition or in one more row (the time-out's s')."""

    def fail(what):
      raise ValueError("{}: Transitions: {}".format(self.source, what))

    obs, n = self.observations, self.action.shape[0]
    if not ((obs.ndim == 2 and obs.dtype == np.float32) or (
        obs.ndim == 4 and obs.dtype == np.uint8)):
      fail("observations: expected float32 [M, D] or uint8 [M, H, W, C], got {} {}".format(
          obs.dtype, list(obs.shape)))
    for name, _ in _INDEX_ARRAYS:
      if getattr(self, name).shape != (n,):
        fail("{}: expected shape [{}] (as action), got {}".format(
            name, n, list(getattr(self, name).shape)))
    if n == 0:
      fail("no transitions: expected at least one")
    if self.num_actions < 1 or self.action.min() < 0 or self.action.max() >= self.num_actions:
      fail("action: expected integers in [0, num_actions={})".format(self.num_actions))
    if not np.isfinite(self.reward).all():
      fail("reward: expected finite numbers")
    if not np.isin(self.terminal, (0, 1)).all():
      fail("terminal: expected 0.0 or 1.0")
    ep = self.episode
    if ep[0] != 0 or not np.isin(np.diff(ep), (0, 1)).all():
      fail("episode: expected 0, 1, 2, ... in order")
    last = np.r_[ep[1:] != ep[:-1], True]
    terminal = self.terminal == 1
    if (terminal & ~last).any():
      fail("terminal: expected only on an episode's last transition")
    s, s2 = self.obs_index, self.next_index
    expected_next = np.where(terminal, s, s + 1)
    # the row after each transition's own rows: s + 1, or s' + 1 after a time-out's s'
    end = np.where(last & ~terminal, s2, s) + 1
    if (s[0] != 0 or not np.array_equal(s2, expected_next) or
        not np.array_equal(s[1:], end[:-1]) or end[-1] != obs.shape[0]):
      fail("obs_index, next_index: expected the rows of each episode in order, s' = the next "
           "row (a terminal transition: its own row), every row used once as s or a "
           "time-out's s'")


def _read_only(a: np.ndarray) -> np.ndarray:
  a = a.view()
  a.flags.writeable = False
  return a


def _check_int(value, name: str, low: int, source: str) -> None:
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
    raise ValueError("{}: {}: expected an integer >= {}, got {!r}".format(
        source, name, low, value))
