# Over ~500 lines on purpose: the format's description, its file access (local or gfile),
# reader, validity rules and subset plan must agree with each other (the writer is in
# replay_writer.py), and tests patch the file access here (issue 16).
"""DQN Replay Dataset (Dopamine replay checkpoints): reader, validity, subsets.

File format (exactly what Dopamine's ``OutOfGraphReplayBuffer.save`` and
batch_rl's ``OutOfGraphLoggedReplayBuffer._log_buffer`` write): for a suffix N,
one gzip file per attribute, ``<name>_ckpt.N.gz``, each holding one
``np.save(..., allow_pickle=False)`` array:

  ``$store$_observation_ckpt.N.gz``  uint8   [C, 84, 84]  one frame per slot
  ``$store$_action_ckpt.N.gz``       int32   [C]
  ``$store$_reward_ckpt.N.gz``       float32 [C]          (clipped to [-1, 1])
  ``$store$_terminal_ckpt.N.gz``     uint8   [C]          1 on the last transition
                                                         of an episode
  ``add_count_ckpt.N.gz``            int     []           transitions ever added,
                                                         blank padding included
  ``invalid_range_ckpt.N.gz``        int     [stack+horizon] slots around the cursor
  ``episode_end_indices_ckpt.N.gz``  (newer Dopamine only) a pickled ``set`` of slots

C is the replay capacity (1,000,000 in the DQN Replay Dataset). Slot ``i`` holds
(frame s_i, action a_i, reward r_i, terminal t_i): the frame *before* the action.
The next state of slot ``i`` is the stack ending at slot ``i + 1``. Every episode
starts with ``stack_size - 1`` all-zero padding transitions, so the first states
of an episode are stacks like [0, 0, 0, s_0]. The buffer is circular: the next
write goes to ``cursor = add_count % C``.

Which slots are transitions (Dopamine ``sample_index_batch`` +
``is_valid_transition``, reproduced by :func:`valid_indices`): with ``K`` the
stack size and ``n`` the update horizon (1 here),
  * not full (``add_count < C``): ``K - 1 <= i < cursor - n``;
  * full: ``i`` in ``[cursor - C + K - 1, cursor - n)`` taken modulo C;
  * ``i`` not in ``invalid_range`` (``cursor - n ... cursor + K - 1``, mod C);
  * no terminal flag among the ``K - 1`` slots before ``i`` (``terminal[i]``
    itself may be 1: that is a terminal transition, whose next state is unused).
  * newer Dopamine: a slot in ``episode_end_indices`` with terminal 0 (an episode
    truncated by the time limit) is not a transition either. We also reject stacks
    that contain such a truncated end (Dopamine does not check this; it keeps our
    promise that stacks never cross episodes).

Subsets used by the offline Atari literature (:data:`SUBSETS`):
  * ``"1%"`` / ``"5%"``: the first 10,000 / 50,000 slots of every checkpoint of a
    run (50 checkpoints x 10k = 500k transitions = 1% of the ~50M-transition run).
    Papers: the CCVL paper (Sec. 6.2) and DR3 (Kumar et al., ICLR 2022) call these
    "1% and 5% of samples uniformly drawn from the DQN Replay Dataset", following
    CQL (Kumar et al., NeurIPS 2020, Atari "1%" / "10%"), which builds on the data
    and code of Agarwal, Schuurmans & Norouzi, "An Optimistic Perspective on
    Offline RL" (ICML 2020, the DQN Replay / REM paper). Code: the CQL Atari code
    (github.com/aviralkumar2907/CQL, ``atari/README.md``: "subsampling the first
    10000 samples from each of [the 50 buffers]"; ``fixed_replay_buffer.py``
    sets ``replay_capacity = 10000`` and then loads the full 1M-slot checkpoint
    arrays, so Dopamine's sampler only addresses slots ``[0, 10000)`` with
    ``cursor = add_count % 10000``). "Uniform" in the papers therefore means
    uniform sampling over this per-checkpoint prefix, which is spread uniformly
    over training time. We reproduce the capacity trick exactly
    (``valid_indices(..., replay_capacity=10_000)``), including the few slots it
    leaves out next to its artificial cursor. batch_rl/CQL load every suffix whose
    6 or 7 files are present; we use every suffix present too (the published runs
    hold 50 logged buffers plus, when present, the final partial one).
  * ``"initial10%"``: the first 10% of the run = the first 20M frames = 5M
    transitions = the first 5 checkpoints (suffixes 0-4) whole. CCVL paper Sec.
    6.2 ("10% of the initial samples ... the first 20M observations during online
    DQN"), DR3; the CQL code's ``_load_replay_buffers_initial(num_load=5,
    num_buffers=5)`` draws from suffixes 0-4. We use the 5 smallest suffixes
    present.
  * ``"all"``: every suffix whole.

Other observation shapes and stack sizes (e.g. the MinAtar datasets of
``ccvl_tf.data.minatar_datasets``: one [10, 10, C] observation per slot, no frame
stacking). Our writer records ``stack_size`` and ``observation_shape`` in
``ccvl_dataset.json``; the reader, :class:`ccvl_tf.data.frame_store.FrameStore`
and the pipeline take both from there (defaults without that file: 4 and
[84, 84], i.e. the DQN Replay Dataset). A slot's frame may be 2-D [H, W] (Atari)
or 3-D [H, W, C] (MinAtar); a stacked state is [H, W, K] resp. [H, W, K * C]
(oldest frame's channels first; with K = 1 simply the [H, W, C] observation),
see :func:`stacked_shape`. With K = 1 there is no episode-start padding and a
slot is a transition unless it is next to the cursor (``invalid_range``). A
dataset may also declare what its subsets mean (a ``"subsets"`` table in
``ccvl_dataset.json``, same form as :data:`SUBSETS`); the MinAtar datasets use
this for subsets scaled to their run length. Datasets without the table (the
DQN Replay Dataset) use :data:`SUBSETS`. An entry may carry a third element
``"prefix"`` (see :data:`PREFIX`): then "the first R slots of a checkpoint" is
taken literally (:func:`prefix_valid_indices`: the transitions whose state and
next state both lie in slots ``[0, R)``) instead of through batch_rl's capacity
trick. The MinAtar datasets need this: with ``stack_size=1`` the trick's
modular view makes slot ``R - 1`` a transition whose "next state" is slot 0
(Dopamine's own sampler would return that bogus transition; with 4-stacks the
trick's cursor lands so that it does not).

Where the data lives: a replay directory is a local path or any path with a URL
scheme (``gs://atari-replay-datasets/dqn/Breakout/1/replay_logs``, TensorFlow's
in-memory ``ram://...``). Every read (listing, exists/isdir, ``ccvl_dataset.json``,
the gzipped .npy checkpoints, including the prefix reads of the subsets) goes
through ``tf.io.gfile`` for the latter (:func:`is_remote`, :func:`open_gzip`):
the gzip stream is decompressed as it is read, so a subset that needs the first
R rows of a checkpoint fetches only the start of the remote file (in the file
system's read blocks; GCS: ``GCS_READ_CACHE_BLOCK_SIZE_MB``, 64 MB by default).
Local paths keep ``os``/``gzip``. The writer writes local directories only.
:meth:`ccvl_tf.data.frame_store.FrameStore.from_replay` caches what it builds from
a remote directory locally (``ccvl_tf.data.store_cache``).

Public API: :func:`iterate_transitions`, :func:`load_checkpoint`,
:func:`valid_indices`, :func:`list_suffixes`, :func:`subset_plan`,
:func:`inspect_dir`. The writer and the collection loop (:class:`DopamineReplayWriter`,
:func:`collect`) are in :mod:`ccvl_tf.data.replay_writer`.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import gzip
import json
import os
import pickle
import re
import sys
import zlib
from typing import Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

STORE_PREFIX = "$store$_"
STORE_ARRAYS = ("observation", "action", "reward", "terminal")
REQUIRED_NAMES = tuple(STORE_PREFIX + a for a in STORE_ARRAYS) + ("add_count", "invalid_range")
OPTIONAL_NAMES = ("episode_end_indices",)
METADATA_FILENAME = "ccvl_dataset.json"
STACK_SIZE = 4
UPDATE_HORIZON = 1
DQN_REPLAY_CAPACITY = 1_000_000
STREAM_BLOCK_ROWS = 4096  # frames decompressed at a time by iterate_transitions
_CKPT_RE = re.compile(r"^(?P<name>.+)_ckpt\.(?P<suffix>\d+)\.gz$")

# subset name -> (number of leading slots per checkpoint or None for all,
#                 number of leading checkpoints or None for all)
SUBSETS: Dict[str, Tuple[Optional[int], Optional[int]]] = {
    "1%": (10_000, None),
    "5%": (50_000, None),
    "initial10%": (None, 5),
    "all": (None, None),
}


PREFIX = "prefix"  # subset-table mode: literal first-R-slots prefixes (see module doc)


class DatasetError(ValueError):
  """A replay directory or file that cannot be read as a Dopamine checkpoint."""


class UnreachableError(DatasetError):
  """A remote path whose file system answered with an error other than "not
  found" (e.g. gs:// without network or without permission)."""


class Transition(NamedTuple):
  """One transition; also indexable by field name (``t['observation']``)."""
  observation: np.ndarray       # uint8 [84, 84, 4], oldest frame first (MinAtar: [10, 10, C])
  action: int
  reward: float
  next_observation: np.ndarray  # same shape; equals observation if terminal
  terminal: bool

  def __getitem__(self, key):  # type: ignore[override]
    if isinstance(key, str):
      return getattr(self, key)
    return tuple.__getitem__(self, key)


@dataclasses.dataclass
class ReplayCheckpoint:
  """The arrays of one suffix, validated. ``observation`` may hold only a prefix."""
  replay_dir: str
  suffix: int
  observation: np.ndarray   # uint8 [R, H, W], R <= capacity rows read
  action: np.ndarray        # int32 [C]
  reward: np.ndarray        # float32 [C]
  terminal: np.ndarray      # uint8 [C]
  add_count: int
  invalid_range: np.ndarray  # int64
  episode_end_indices: Optional[np.ndarray] = None
  stack_size: int = STACK_SIZE  # from ccvl_dataset.json when present

  @property
  def capacity(self) -> int:
    return int(self.terminal.shape[0])

  @property
  def frame_shape(self) -> Tuple[int, ...]:
    return tuple(int(d) for d in self.observation.shape[1:])

  def valid_indices(self, replay_capacity: Optional[int] = None,
                    stack_size: Optional[int] = None) -> np.ndarray:
    return valid_indices(self.terminal, self.add_count, self.invalid_range,
                         replay_capacity=replay_capacity,
                         stack_size=self.stack_size if stack_size is None else stack_size,
                         episode_end_indices=self.episode_end_indices)


def stacked_shape(frame_shape, stack_size: int) -> Tuple[int, ...]:
  """Shape of a stacked state: [H, W] frames -> [H, W, K]; [H, W, C] -> [H, W, K * C]."""
  frame_shape = tuple(int(d) for d in frame_shape)
  if len(frame_shape) == 2:
    return frame_shape + (int(stack_size),)
  if len(frame_shape) == 3:
    return frame_shape[:2] + (int(stack_size) * frame_shape[2],)
  raise ValueError("frames must be [H, W] or [H, W, C], got shape {}".format(frame_shape))


def stack_frames(frames: np.ndarray, frame_ndim: int) -> np.ndarray:
  """[..., K, *frame] -> [..., *stacked_shape(frame, K)], oldest frame first.

  ``frame_ndim`` = 2: [..., K, H, W] -> [..., H, W, K];
  ``frame_ndim`` = 3: [..., K, H, W, C] -> [..., H, W, K * C] (frame k's channels
  at k * C ... k * C + C - 1)."""
  frames = np.asarray(frames)
  axis = frames.ndim - frame_ndim - 1          # the K axis
  if frame_ndim == 2:
    return np.moveaxis(frames, axis, -1)       # [..., H, W, K]
  if frame_ndim == 3:
    moved = np.moveaxis(frames, axis, -2)      # [..., H, W, K, C]
    return moved.reshape(moved.shape[:-2] + (moved.shape[-2] * moved.shape[-1],))
  raise ValueError("frames must be [H, W] or [H, W, C], got rank {}".format(frame_ndim))


# ----------------------------------------------------------------------- file access
#
# A replay directory is a local path or any path with a URL scheme ("gs://...",
# "ram://..."): the latter are read through tf.io.gfile (GFile as the fileobj of
# gzip.GzipFile; gfile.listdir/exists/isdir/stat), sequentially, so a prefix of a
# checkpoint costs a prefix of the remote file. Local paths keep os/gzip.

def is_remote(path: str) -> bool:
  """True for a path with a URL scheme (``gs://bucket/...``, ``ram://...``): read
  through ``tf.io.gfile``. Local paths are read with ``os``/``gzip``."""
  return "://" in str(path)


def _gfile():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.io.gfile


def _tf_errors() -> tuple:
  """(tf.errors.OpError,) once TensorFlow is loaded (remote reads load it), else ()."""
  tf = sys.modules.get("tensorflow")
  errors = getattr(tf, "errors", None)
  return (errors.OpError,) if errors is not None else ()


def _tf_not_found() -> tuple:
  tf = sys.modules.get("tensorflow")
  errors = getattr(tf, "errors", None)
  return (errors.NotFoundError,) if errors is not None else ()


def not_found_errors() -> tuple:
  """What opening/reading a missing file raises (local and through tf.io.gfile)."""
  return (FileNotFoundError,) + _tf_not_found()


def read_errors() -> tuple:
  """What a failed read of a gzipped .npy raises (local and through tf.io.gfile)."""
  return (OSError, EOFError, zlib.error, ValueError, pickle.UnpicklingError) + _tf_errors()


def error_text(e: BaseException) -> str:
  """The first line of an exception's message (TF errors append long context)."""
  text = str(getattr(e, "message", None) or e).strip()
  return text.splitlines()[0] if text else type(e).__name__


def _unreachable(path: str, e: BaseException) -> UnreachableError:
  return UnreachableError(
      "could not reach {} ({}: {}); a gs:// path needs network access and, for a "
      "non-public bucket, Google credentials".format(path, type(e).__name__, error_text(e)))


def path_exists(path: str) -> bool:
  """os.path.exists, or tf.io.gfile.exists for a remote path (raises DatasetError
  saying the path could not be reached when the file system answers with an error
  other than "not found", e.g. gs:// without network)."""
  if not is_remote(path):
    return os.path.exists(path)
  gfile = _gfile()  # imports TensorFlow: _tf_errors() below is then non-empty
  try:
    return bool(gfile.exists(path))
  except _tf_errors() as e:
    raise _unreachable(path, e) from e


def path_isdir(path: str) -> bool:
  """os.path.isdir, or (remote) exists + tf.io.gfile.isdir; see :func:`path_exists`."""
  if not is_remote(path):
    return os.path.isdir(path)
  return path_exists(path) and bool(_gfile().isdir(path))


def list_dir(path: str) -> List[str]:
  """os.listdir, or tf.io.gfile.listdir (names without the trailing "/" GCS gives
  sub-directories)."""
  if not is_remote(path):
    return os.listdir(path)
  try:
    return [n.rstrip("/") for n in _gfile().listdir(path)]
  except _tf_errors() as e:
    if isinstance(e, _tf_not_found()):
      raise DatasetError("replay directory does not exist: {}".format(path)) from e
    raise _unreachable(path, e) from e


def file_stat(path: str) -> Tuple[int, int]:
  """(size in bytes, modification time in ns; 0 where the file system has none)."""
  if not is_remote(path):
    try:
      st = os.stat(path)
    except FileNotFoundError as e:
      raise DatasetError("missing file: {}".format(path)) from e
    return int(st.st_size), int(st.st_mtime_ns)
  try:
    st = _gfile().stat(path)
  except _tf_errors() as e:
    if isinstance(e, _tf_not_found()):
      raise DatasetError("missing file: {}".format(path)) from e
    raise _unreachable(path, e) from e
  return int(st.length), int(st.mtime_nsec)


def stat_files(paths: Sequence[str], max_workers: int = 16) -> Dict[str, Tuple[int, int]]:
  """:func:`file_stat` of many files (remote ones in parallel: one request each)."""
  paths = list(paths)
  if not any(is_remote(p) for p in paths):
    return {p: file_stat(p) for p in paths}
  with concurrent.futures.ThreadPoolExecutor(max_workers=max_workers) as pool:
    return dict(zip(paths, pool.map(file_stat, paths)))


@contextlib.contextmanager
def open_binary(path: str):
  """A binary file object for reading: ``open`` or a ``tf.io.gfile.GFile``."""
  if not is_remote(path):
    with open(path, "rb") as f:
      yield f
  else:
    with _gfile().GFile(path, "rb") as f:
      yield f


@contextlib.contextmanager
def open_gzip(path: str):
  """A gzip stream of ``path``, decompressed as it is read (a remote file is
  fetched only as far as the stream is read: prefixes cost prefixes)."""
  if not is_remote(path):
    with gzip.open(path, "rb") as f:
      yield f
  else:
    with open_binary(path) as raw, gzip.GzipFile(fileobj=raw, mode="rb") as f:
      yield f


# ----------------------------------------------------------------------------- files

def checkpoint_path(replay_dir: str, name: str, suffix: int) -> str:
  """Dopamine's ``_generate_filename``: ``<dir>/<name>_ckpt.<suffix>.gz``."""
  return os.path.join(replay_dir, "{}_ckpt.{}.gz".format(name, suffix))


def resolve_replay_dir(path: str) -> str:
  """``path`` itself, or ``path/replay_logs`` when ``path`` is a run directory
  laid out like the DQN Replay Dataset (``<game>/<run>/replay_logs``)."""
  logs = os.path.join(path, "replay_logs")
  if path_isdir(path) and path_isdir(logs) and not any(
      _CKPT_RE.match(n) for n in list_dir(path)):
    return logs
  return path


def _check_dir(replay_dir: str) -> List[str]:
  if not path_isdir(replay_dir):
    raise DatasetError("replay directory does not exist: {}".format(replay_dir))
  names = list_dir(replay_dir)
  if not any(_CKPT_RE.match(n) for n in names):
    raise DatasetError(
        "replay directory {} holds no Dopamine checkpoint files "
        "('$store$_observation_ckpt.N.gz' ...)".format(replay_dir))
  return names


@dataclasses.dataclass(frozen=True)
class DirInfo:
  """One look at a replay directory (one listing, one read of ccvl_dataset.json),
  shared by the readers so that a remote directory is listed once per build."""
  replay_dir: str
  names: Tuple[str, ...]
  metadata: Optional[dict]   # ccvl_dataset.json, None when absent
  stack_size: int
  observation_shape: Tuple[int, ...]
  subsets: Dict[str, tuple]


def inspect_dir(replay_dir: str) -> DirInfo:
  """Lists ``replay_dir`` (resolved, see :func:`resolve_replay_dir`) and reads its
  ``ccvl_dataset.json``. Raises DatasetError for a missing/empty directory."""
  replay_dir = resolve_replay_dir(replay_dir)
  names = tuple(sorted(_check_dir(replay_dir)))
  meta = read_metadata(replay_dir) if METADATA_FILENAME in names else None
  fmt = _format_from_metadata(meta, os.path.join(replay_dir, METADATA_FILENAME))
  return DirInfo(replay_dir=replay_dir, names=names, metadata=meta, **fmt)


def _suffixes_from_names(replay_dir: str, names: Sequence[str]) -> List[int]:
  found: Dict[int, set] = {}
  for n in names:
    m = _CKPT_RE.match(n)
    if m:
      found.setdefault(int(m.group("suffix")), set()).add(m.group("name"))
  for suffix, present in sorted(found.items()):
    missing = [r for r in REQUIRED_NAMES if r not in present]
    if missing:
      raise DatasetError("suffix {} in {} is incomplete: missing {}".format(
          suffix, replay_dir,
          ", ".join(checkpoint_path(replay_dir, m, suffix) for m in missing)))
  return sorted(found)


def list_suffixes(replay_dir: str, dir_info: Optional[DirInfo] = None) -> List[int]:
  """Sorted suffixes with a complete set of checkpoint files.

  Raises DatasetError for a missing/empty directory, or when a suffix has some
  files but misses a required one (naming the missing file).
  """
  if dir_info is None:
    replay_dir = resolve_replay_dir(replay_dir)
    return _suffixes_from_names(replay_dir, _check_dir(replay_dir))
  return _suffixes_from_names(dir_info.replay_dir, dir_info.names)


def checkpoint_files(dir_info: DirInfo, suffix: int) -> List[str]:
  """The file names of one suffix that the readers open (required + optional ones
  present)."""
  names = ["{}_ckpt.{}.gz".format(n, suffix) for n in REQUIRED_NAMES]
  names += [n for n in ("{}_ckpt.{}.gz".format(o, suffix) for o in OPTIONAL_NAMES)
            if n in dir_info.names]
  return names


class _RestrictedUnpickler(pickle.Unpickler):
  """Only what a pickled ``set`` of (numpy) ints needs."""
  _ALLOWED = {("builtins", "set"), ("builtins", "frozenset"), ("builtins", "int"),
              ("numpy", "dtype"), ("numpy.core.multiarray", "scalar"),
              ("numpy._core.multiarray", "scalar")}

  def find_class(self, module, name):
    if (module, name) in self._ALLOWED:
      return super().find_class(module, name)
    raise pickle.UnpicklingError("refusing to unpickle {}.{}".format(module, name))


def _open_array(path: str, max_rows: Optional[int] = None, allow_set: bool = False,
                full_rows: Optional[list] = None):
  """np.load of a gzipped .npy (optionally only the first max_rows rows; then the
  stored row count is appended to ``full_rows``). Local or remote (tf.io.gfile);
  a prefix read decompresses, and fetches, only the start of the file."""
  try:
    with open_gzip(path) as f:
      magic = f.read(6)
      f.seek(0)
      if magic != b"\x93NUMPY":
        if allow_set:
          return np.array(sorted(int(x) for x in _RestrictedUnpickler(f).load()),
                          dtype=np.int64)
        raise DatasetError("{} is not a numpy .npy array inside gzip".format(path))
      if max_rows is None:
        return np.load(f, allow_pickle=False)
      version = np.lib.format.read_magic(f)
      shape, fortran, dtype = np.lib.format._read_array_header(f, version)  # pylint: disable=protected-access
      if fortran or dtype.hasobject:
        raise DatasetError("{}: unsupported array layout".format(path))
      if full_rows is not None:
        full_rows.append(shape[0] if shape else 0)
      rows = min(max_rows, shape[0]) if shape else 0
      row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
      buf = f.read(rows * row_bytes)
      if len(buf) != rows * row_bytes:
        raise EOFError("file ended after {} of {} bytes".format(len(buf), rows * row_bytes))
      return np.frombuffer(buf, dtype=dtype).reshape((rows,) + tuple(shape[1:])).copy()
  except DatasetError:
    raise
  except not_found_errors() as e:
    raise DatasetError("missing file: {}".format(path)) from e
  except read_errors() as e:
    raise DatasetError("cannot read {} (corrupt or truncated gzip/npy?): {}: {}".format(
        path, type(e).__name__, error_text(e))) from e


# Over 80 lines with its docstring: the arrays of one checkpoint read and checked in one
# place, each check naming its file.
def load_checkpoint(replay_dir: str, suffix: int, *, max_rows: Optional[int] = None,
                    num_actions: Optional[int] = None,
                    observation_shape: Optional[Sequence[int]] = None,
                    dir_info: Optional[DirInfo] = None,
                    read_observation: bool = True) -> ReplayCheckpoint:
  """Reads and validates one suffix. ``max_rows`` reads only the first rows of
  the observation array (the big one), e.g. for the 1%/5% subsets.

  ``num_actions``: if given, every action must be in ``[0, num_actions)`` (the
  game's minimal action set); a ``ccvl_dataset.json`` written by our writer must
  also agree. ``observation_shape``: the shape of one stored frame; by default
  the ``observation_shape`` of ``ccvl_dataset.json``, else [84, 84] (Atari).
  The checkpoint's ``stack_size`` comes from ``ccvl_dataset.json`` (else 4).
  ``dir_info`` (:func:`inspect_dir`) saves listing the directory and reading its
  metadata again. ``read_observation=False`` does not open the observation file
  at all (``observation`` holds 0 rows; the caller reads and checks the frames
  itself, as :class:`ccvl_tf.data.frame_store.FrameStore` does: a remote file is
  then opened once). Works on local and remote (``gs://``, ``ram://``) paths.
  Raises DatasetError naming the offending file.
  """
  if dir_info is None:
    dir_info = inspect_dir(replay_dir)
  replay_dir = dir_info.replay_dir
  if observation_shape is None:
    observation_shape = dir_info.observation_shape
  observation_shape = tuple(int(d) for d in observation_shape)
  paths = {n: checkpoint_path(replay_dir, n, suffix) for n in REQUIRED_NAMES}
  missing = [p for p in paths.values() if os.path.basename(p) not in dir_info.names]
  if missing:
    raise DatasetError("suffix {} in {}: missing {}".format(suffix, replay_dir,
                                                            ", ".join(missing)))
  obs_path = paths[STORE_PREFIX + "observation"]
  full_rows: list = []
  if read_observation:
    obs = _open_array(obs_path, max_rows=max_rows, full_rows=full_rows)
  else:
    obs = np.zeros((0,) + observation_shape, np.uint8)
  stored_rows = full_rows[0] if full_rows else obs.shape[0]
  arrays = {a: _open_array(paths[STORE_PREFIX + a]) for a in ("action", "reward", "terminal")}
  add_count = _open_array(paths["add_count"])
  inv = _open_array(paths["invalid_range"])
  eei_path = checkpoint_path(replay_dir, "episode_end_indices", suffix)
  eei = (_open_array(eei_path, allow_set=True)
         if os.path.basename(eei_path) in dir_info.names else None)

  if (obs.ndim != 1 + len(observation_shape) or tuple(obs.shape[1:]) != observation_shape
      or obs.dtype != np.uint8):
    raise DatasetError("{}: expected uint8 frames [N, {}], got {} {}".format(
        obs_path, ", ".join(str(d) for d in observation_shape), obs.dtype, obs.shape))
  capacity = None
  for a, arr in arrays.items():
    p = paths[STORE_PREFIX + a]
    if arr.ndim != 1:
      raise DatasetError("{}: expected a 1-D array, got shape {}".format(p, arr.shape))
    if capacity is None:
      capacity = arr.shape[0]
    elif arr.shape[0] != capacity:
      raise DatasetError("arrays of different lengths in suffix {}: {} has {} entries, "
                         "{} has {}".format(suffix, paths[STORE_PREFIX + "action"], capacity,
                                            p, arr.shape[0]))
  if read_observation and stored_rows != capacity:
    raise DatasetError("arrays of different lengths in suffix {}: {} has {} frames, {} has "
                       "{} entries".format(suffix, obs_path, stored_rows,
                                           paths[STORE_PREFIX + "action"], capacity))
  if add_count.size != 1:
    raise DatasetError("{}: add_count must be a scalar".format(paths["add_count"]))
  if int(add_count.reshape(())) < 0:
    raise DatasetError("{}: add_count must be >= 0 (the number of transitions ever added), "
                       "got {}".format(paths["add_count"], int(add_count.reshape(()))))
  action = arrays["action"]
  if not np.issubdtype(action.dtype, np.integer):
    raise DatasetError("{}: actions must be integers, got {}".format(
        paths[STORE_PREFIX + "action"], action.dtype))
  reward = arrays["reward"]
  bad = ~np.isfinite(reward.astype(np.float64)) | (np.abs(reward.astype(np.float64)) > 1e9)
  if np.any(bad):
    i = int(np.flatnonzero(bad)[0])
    raise DatasetError("{}: rewards must be finite numbers (|r| <= 1e9), got {!r} at index {} "
                       "({} such entries)".format(paths[STORE_PREFIX + "reward"],
                                                 float(reward[i]), i, int(bad.sum())))
  ckpt = ReplayCheckpoint(replay_dir=replay_dir, suffix=suffix, observation=obs,
                          action=action.astype(np.int32), reward=arrays["reward"].astype(np.float32),
                          terminal=arrays["terminal"].astype(np.uint8),
                          add_count=int(add_count.reshape(())),
                          invalid_range=np.asarray(inv).astype(np.int64).reshape(-1),
                          episode_end_indices=eei, stack_size=dir_info.stack_size)
  if num_actions is not None:
    check_actions(ckpt, num_actions, metadata=dir_info.metadata)
  return ckpt


def read_metadata(replay_dir: str) -> Optional[dict]:
  """The directory's ``ccvl_dataset.json`` (None when absent); local or remote."""
  path = os.path.join(replay_dir, METADATA_FILENAME)
  if not path_exists(path):
    return None
  try:
    with open_binary(path) as f:
      return json.loads(f.read())
  except (ValueError,) + read_errors() as e:
    raise DatasetError("cannot read {}: {}".format(path, error_text(e))) from e


def dataset_format(replay_dir: str) -> dict:
  """``dict(stack_size, observation_shape, subsets)`` of a replay directory: from
  its ``ccvl_dataset.json`` when present, else the DQN Replay Dataset's
  (4, (84, 84), :data:`SUBSETS`). Raises DatasetError naming the file if its
  values are malformed."""
  replay_dir = resolve_replay_dir(replay_dir)
  return _format_from_metadata(read_metadata(replay_dir) or {},
                               os.path.join(replay_dir, METADATA_FILENAME))


def _format_from_metadata(meta: Optional[dict], path: str) -> dict:
  meta = meta or {}
  try:
    k = int(meta.get("stack_size", STACK_SIZE))
    shape = tuple(int(d) for d in meta.get("observation_shape", (84, 84)))
    subsets = dict(SUBSETS)
    if "subsets" in meta:
      subsets = {}
      for n, entry in meta["subsets"].items():
        r, c = entry[0], entry[1]
        mode = tuple(entry[2:])
        if mode not in ((), (PREFIX,)):
          raise ValueError("subset {!r}: third element must be {!r}, got {!r}".format(
              n, PREFIX, mode[0]))
        subsets[str(n)] = (None if r is None else int(r), None if c is None else int(c)) + mode
  except (TypeError, ValueError, AttributeError, IndexError) as e:
    raise DatasetError("{}: malformed stack_size / observation_shape / subsets: {}".format(
        path, e)) from e
  if k < 1 or len(shape) not in (2, 3) or min(shape) < 1:
    raise DatasetError("{}: stack_size must be >= 1 and observation_shape [H, W] or "
                       "[H, W, C], got {} and {}".format(path, k, list(shape)))
  return dict(stack_size=k, observation_shape=shape, subsets=subsets)


_UNREAD = object()


def check_actions(ckpt: ReplayCheckpoint, num_actions: int, metadata=_UNREAD) -> None:
  """Actions must index the game's minimal action set [0, num_actions).
  ``metadata``: the directory's ccvl_dataset.json if already read (None: absent)."""
  path = checkpoint_path(ckpt.replay_dir, STORE_PREFIX + "action", ckpt.suffix)
  meta = read_metadata(ckpt.replay_dir) if metadata is _UNREAD else metadata
  if meta is not None and meta.get("num_actions") not in (None, num_actions):
    raise DatasetError(
        "{} describes a dataset of game {!r} with {} actions, but this game has {} actions "
        "(dataset of another game?)".format(os.path.join(ckpt.replay_dir, METADATA_FILENAME),
                                             meta.get("game"), meta.get("num_actions"),
                                             num_actions))
  # Only slots that were ever written matter (np.empty slots are garbage).
  written = ckpt.action[:min(ckpt.add_count, ckpt.capacity)]
  if written.size and (written.min() < 0 or written.max() >= num_actions):
    bad = written[(written < 0) | (written >= num_actions)]
    raise DatasetError(
        "{}: actions outside the game's action set [0, {}): found {} (min {}, max {}); "
        "is this a dataset of another game?".format(path, num_actions, bad.size,
                                                    int(written.min()), int(written.max())))


# ---------------------------------------------------------------------- validity

def valid_indices(terminal: np.ndarray, add_count: int, invalid_range: np.ndarray, *,
                  replay_capacity: Optional[int] = None, stack_size: int = STACK_SIZE,
                  update_horizon: int = UPDATE_HORIZON,
                  episode_end_indices: Optional[np.ndarray] = None) -> np.ndarray:
  """Slots Dopamine's sampler can return, sorted (storage order), int64.

  Vectorized ``OutOfGraphReplayBuffer.sample_index_batch`` candidate range and
  ``is_valid_transition``. ``replay_capacity`` smaller than the arrays reproduces
  batch_rl's subset trick (only slots ``[0, replay_capacity)`` are addressable).
  """
  terminal = np.asarray(terminal)
  cap = int(terminal.shape[0] if replay_capacity is None else replay_capacity)
  if cap > terminal.shape[0] or cap < stack_size + update_horizon:
    raise ValueError("replay_capacity {} must be in [{}, {}]".format(
        cap, stack_size + update_horizon, terminal.shape[0]))
  term = terminal[:cap] != 0
  add_count = int(add_count)
  cursor = add_count % cap
  if add_count >= cap:  # is_full()
    min_id = cursor - cap + stack_size - 1
    max_id = cursor - update_horizon
  else:
    min_id = stack_size - 1
    max_id = cursor - update_horizon
  if max_id <= min_id:
    return np.zeros((0,), np.int64)
  cand = np.arange(min_id, max_id, dtype=np.int64) % cap
  keep = ~np.isin(cand, np.asarray(invalid_range, np.int64))
  # No terminal in the stack except possibly its last frame.
  prev = (cand[:, None] - np.arange(stack_size - 1, 0, -1)[None, :]) % cap
  keep &= ~term[prev].any(axis=1)
  if episode_end_indices is not None and len(episode_end_indices):
    ends = np.zeros(cap, bool)
    e = np.asarray(episode_end_indices, np.int64)
    ends[e[(e >= 0) & (e < cap)]] = True
    truncated = ends & ~term
    traj = (cand[:, None] + np.arange(update_horizon)[None, :]) % cap
    keep &= ~truncated[traj].any(axis=1)   # Dopamine's rule
    keep &= ~truncated[prev].any(axis=1)   # ours: never a stack across a truncation
  return np.sort(cand[keep])


def prefix_valid_indices(terminal: np.ndarray, add_count: int, invalid_range: np.ndarray,
                         rows: int, *, stack_size: int = STACK_SIZE,
                         update_horizon: int = UPDATE_HORIZON,
                         episode_end_indices: Optional[np.ndarray] = None) -> np.ndarray:
  """The transitions of the checkpoint's first ``rows`` slots, taken literally.

  Dopamine's valid slots (:func:`valid_indices` at the stored capacity) whose
  whole stack ``i-K+1 .. i`` and next slot ``i+1`` (``i + n``) lie in
  ``[0, rows)``. Unlike batch_rl's capacity trick (``replay_capacity=rows``), no
  slot is read modulo ``rows``, so no transition joins two slots that are not
  consecutive in the real buffer. int64 [M], sorted.
  """
  idx = valid_indices(terminal, add_count, invalid_range, stack_size=stack_size,
                      update_horizon=update_horizon, episode_end_indices=episode_end_indices)
  return idx[(idx >= stack_size - 1) & (idx + update_horizon < int(rows))]


def transition_arrays(ckpt: ReplayCheckpoint, indices: np.ndarray,
                      stack_size: Optional[int] = None,
                      replay_capacity: Optional[int] = None) -> Dict[str, np.ndarray]:
  """Builds stacked transitions at ``indices`` (e.g. from ``valid_indices``).

  observation[b] = frames [i-K+1, ..., i] (mod capacity) stacked on the last axis
  (:func:`stack_frames`); next_observation[b] = frames [i-K+2, ..., i+1], or a
  copy of observation when the transition is terminal (its next state belongs to
  the next episode and is multiplied by 0 in any TD target). ``stack_size``
  defaults to the checkpoint's.
  """
  stack_size = ckpt.stack_size if stack_size is None else stack_size
  cap = ckpt.capacity if replay_capacity is None else replay_capacity
  idx = np.asarray(indices, np.int64)
  offs = np.arange(-stack_size + 1, 1)
  term = ckpt.terminal[idx] != 0
  nxt = np.where(term, idx, idx + 1)
  obs_i = (idx[:, None] + offs) % cap
  nxt_i = (nxt[:, None] + offs) % cap
  if max(obs_i.max(initial=0), nxt_i.max(initial=0)) >= ckpt.observation.shape[0]:
    raise DatasetError("suffix {}: frames beyond the rows read were needed".format(ckpt.suffix))
  fdim = ckpt.observation.ndim - 1
  return dict(observation=stack_frames(ckpt.observation[obs_i], fdim),  # [B, *stacked]
              action=ckpt.action[idx], reward=ckpt.reward[idx],
              next_observation=stack_frames(ckpt.observation[nxt_i], fdim),
              terminal=term)


def iterate_transitions(replay_dir: str, suffix: int, *, replay_capacity: Optional[int] = None,
                        num_actions: Optional[int] = None,
                        stack_size: Optional[int] = None) -> Iterator[Transition]:
  """Yields, in storage order, exactly the transitions Dopamine's sampler treats
  as valid in ``<replay_dir>/*_ckpt.<suffix>.gz``.

  Each record: ``observation`` uint8 [84, 84, 4] (oldest frame first), ``action``
  int, ``reward`` float (as stored, i.e. clipped), ``next_observation`` uint8
  [84, 84, 4] (a copy of ``observation`` for terminal transitions), ``terminal``
  bool. ``replay_capacity`` < stored capacity restricts to the batch_rl subset.
  Other datasets: states are ``stacked_shape(frame_shape, stack_size)``, e.g.
  [10, 10, C] for MinAtar; ``stack_size`` defaults to the dataset's
  (``ccvl_dataset.json``, else 4).
  The frames are streamed from the gzip file (memory: a few thousand frames),
  unless some stack wraps around the circular buffer; so a corrupt observation
  file raises ``DatasetError`` when the iteration reaches the damage.
  """
  info = inspect_dir(replay_dir)
  replay_dir = info.replay_dir
  ckpt = load_checkpoint(replay_dir, suffix, max_rows=0, num_actions=num_actions,
                         dir_info=info)
  if stack_size is None:
    stack_size = ckpt.stack_size
  fdim = ckpt.observation.ndim - 1
  if replay_capacity is not None and replay_capacity >= ckpt.capacity:
    replay_capacity = None
  cap = ckpt.capacity if replay_capacity is None else replay_capacity
  idx = ckpt.valid_indices(replay_capacity=replay_capacity, stack_size=stack_size)
  if idx.size == 0:
    return
  obs_path = checkpoint_path(replay_dir, STORE_PREFIX + "observation", suffix)
  wraps = bool(idx.min() < stack_size - 1 or idx.max() + 1 >= cap)
  if wraps:
    # Some stacks wrap around the circular buffer: read the frames whole.
    ckpt.observation = _open_array(obs_path, max_rows=cap)
    blocks = [(ckpt.observation, 0)]
  else:
    # Common case (every published checkpoint): stream the frames, holding only
    # a block of rows (+ the stack overlap) in memory.
    blocks = _stream_rows(obs_path, int(idx.max()) + 2, STREAM_BLOCK_ROWS)
  term_all = ckpt.terminal
  win, w0, pos = None, 0, 0
  for block, start in blocks:
    if win is None:
      win, w0 = block, start
    else:
      keep = win[-stack_size:]
      win, w0 = np.concatenate([keep, block]), start - keep.shape[0]
    w1 = w0 + win.shape[0]
    # emit i with i + 1 < w1 (all of them when the whole buffer is in memory)
    end = idx.size if wraps else int(np.searchsorted(idx, w1 - 1, side="left"))
    for i in idx[pos:end]:
      i = int(i)
      terminal = bool(term_all[i])
      obs = stack_frames(
          np.stack([win[(i - k) % cap - w0] for k in range(stack_size - 1, -1, -1)]), fdim)
      nxt = obs if terminal else stack_frames(
          np.stack([win[(i + 1 - k) % cap - w0] for k in range(stack_size - 1, -1, -1)]), fdim)
      yield Transition(observation=obs, action=int(ckpt.action[i]),
                       reward=float(ckpt.reward[i]),
                       next_observation=nxt.copy() if terminal else nxt, terminal=terminal)
    pos = end


def _stream_rows(path: str, rows: int, block_rows: int = 4096):
  """Yields (block [n, H, W], first row) reading the first ``rows`` rows of a
  gzipped .npy sequentially (local or remote: only that prefix is fetched)."""
  try:
    with open_gzip(path) as f:
      version = np.lib.format.read_magic(f)
      shape, _, dtype = np.lib.format._read_array_header(f, version)  # pylint: disable=protected-access
      row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
      done = 0
      while done < rows:
        n = min(block_rows, rows - done)
        buf = f.read(n * row_bytes)
        if len(buf) != n * row_bytes:
          raise EOFError("file ended inside row {}".format(done + len(buf) // row_bytes))
        yield np.frombuffer(buf, dtype=dtype).reshape((n,) + tuple(shape[1:])), done
        done += n
  except not_found_errors() as e:
    raise DatasetError("missing file: {}".format(path)) from e
  except read_errors() as e:
    raise DatasetError("cannot read {} (corrupt or truncated gzip/npy?): {}: {}".format(
        path, type(e).__name__, error_text(e))) from e


def subset_plan(replay_dir: str, subset: str = "all",
                dir_info: Optional[DirInfo] = None) -> List[tuple]:
  """[(suffix, replay_capacity or None for whole checkpoint)] for a subset name.

  The names and their meaning are :data:`SUBSETS`, unless the dataset's
  ``ccvl_dataset.json`` declares its own ``"subsets"`` table (the MinAtar
  datasets: the same names scaled to their run length). Entries of a table in
  :data:`PREFIX` mode are ``(suffix, rows, "prefix")``: the first ``rows`` slots
  taken literally (:func:`prefix_valid_indices`). ``dir_info``: see
  :func:`inspect_dir`."""
  if dir_info is None:
    dir_info = inspect_dir(replay_dir)
  table = dir_info.subsets
  if subset not in table:
    raise ValueError("unknown subset {!r}; valid: {}".format(subset, ", ".join(table)))
  rows, n_ckpt = table[subset][:2]
  mode = tuple(table[subset][2:])
  suffixes = list_suffixes(dir_info.replay_dir, dir_info=dir_info)
  if n_ckpt is not None:
    suffixes = suffixes[:n_ckpt]
  return [(s, rows) + (mode if rows is not None else ()) for s in suffixes]
