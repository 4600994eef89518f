"""Stage 2 of the replay data pipeline (docs/data.md): one Dopamine replay
checkpoint's reader (the DQN Replay Dataset's format).

More in docs/data.md "Module notes", `ccvl_tf/data/dqn_replay.py`.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Dict, Iterator, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from ccvl_tf.data import replay_files
from ccvl_tf.data import replay_source
from ccvl_tf.data import replay_validity
from ccvl_tf.data.replay_files import (
    METADATA_FILENAME, STORE_PREFIX, DatasetError, checkpoint_path)
from ccvl_tf.data.replay_source import ReplayDir
from ccvl_tf.data.replay_validity import STACK_SIZE, valid_indices

DQN_REPLAY_CAPACITY = 1_000_000
STREAM_BLOCK_ROWS = 4096  # frames decompressed at a time by iterate_transitions

# The DQN Replay Dataset's subsets (a dataset's ccvl_dataset.json may declare its own
# table): name -> (number of leading slots per checkpoint or None for all, number of
# leading checkpoints or None for all[, PREFIX]). What they mean and where they come
# from: ccvl_tf.data.replay_plan.
SUBSETS: Dict[str, Tuple[Optional[int], Optional[int]]] = {
    "1%": (10_000, None),
    "5%": (50_000, None),
    "initial10%": (None, 5),
    "all": (None, None),
}
PREFIX = "prefix"  # subset-table mode: literal first-R-slots prefixes (see replay_plan)
# The "format" of a ccvl_dataset.json written by replay_writer.DopamineReplayWriter: its
# checkpoints follow batch_rl's logging schedule (replay_validity.check_logged_schedule).
WRITER_FORMAT = "dopamine_replay_v1"


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
  action: np.ndarray        # int32 [C]; outside ``slots`` possibly garbage (np.empty)
  reward: np.ndarray        # float32 [C]
  terminal: np.ndarray      # uint8 [C]
  add_count: int
  invalid_range: np.ndarray  # int64
  episode_end_indices: Optional[np.ndarray] = None
  stack_size: int = STACK_SIZE  # from ccvl_dataset.json when present
  slots: Optional[np.ndarray] = None  # int64 [M]: the view's transitions, values checked

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


# ------------------------------------------------------------------ the directory

@dataclasses.dataclass(frozen=True)
class DirInfo:
  """One look at a replay directory (one listing, its suffixes, one read of
  ccvl_dataset.json and the format it declares), made once by :func:`inspect_dir` and
  handed to the plan and the readers, so that a remote directory is listed once per build."""
  replay_dir: str
  names: Tuple[str, ...]
  suffixes: Tuple[int, ...]  # sorted, of the checkpoint files in ``names``
  incomplete: Optional[str]  # why a suffix misses a required file, or None: all complete
  metadata: Optional[dict]   # ccvl_dataset.json, None when absent
  stack_size: int
  observation_shape: Tuple[int, ...]
  subsets: Dict[str, tuple]


def inspect_dir(source: replay_source.ReplaySource) -> DirInfo:
  """Lists ``source`` (a ``replay_source.ReplaySource``, made once by the entry point: its
  resolution and listing are used as they are), finds its suffixes
  (``replay_files.scan_suffixes``: an incomplete one is kept in ``incomplete``, raised by
  whoever needs the suffixes) and reads its ``ccvl_dataset.json``. Raises DatasetError
  for a missing/empty directory; TypeError for a path (``replay_source.require_source``):
  the entry points taking a path (:func:`load_checkpoint`, :func:`iterate_transitions`,
  ``FrameStore.from_replay`` ...) resolve it once and hand the source down."""
  replay_source.require_source(source, "dqn_replay.inspect_dir")
  names = tuple(sorted(source.listing()))
  replay_dir = source.replay_dir
  suffixes, incomplete = replay_files.scan_suffixes(replay_dir, names)
  meta = source.metadata
  fmt = format_from_metadata(meta, os.path.join(replay_dir, METADATA_FILENAME))
  if incomplete is None:
    incomplete = _unlisted_suffixes(meta, suffixes, replay_dir)
  return DirInfo(replay_dir=replay_dir, names=names, suffixes=tuple(suffixes),
                 incomplete=incomplete, metadata=meta, **fmt)


def _unlisted_suffixes(meta: Optional[dict], suffixes: Sequence[int],
                       replay_dir: str) -> Optional[str]:
  """Why the checkpoints in the directory are not the ones its ``ccvl_dataset.json`` lists
  (``"suffixes"``: what the writer wrote), or None. A listed suffix whose files are all gone
  would otherwise leave the data a checkpoint short, and an unlisted one would add
  transitions the record does not know of, both without a word."""
  if not isinstance(meta, dict) or "suffixes" not in meta:
    return None
  path = os.path.join(replay_dir, METADATA_FILENAME)
  try:
    listed = sorted(int(s) for s in meta["suffixes"])
  except (TypeError, ValueError) as e:
    raise DatasetError("{}: 'suffixes' must be a list of checkpoint numbers, got {!r}".format(
        path, meta["suffixes"])) from e
  missing = sorted(set(listed) - set(suffixes))
  extra = sorted(set(suffixes) - set(listed))
  if not missing and not extra:
    return None
  parts = []
  if missing:
    parts.append("suffix(es) {} listed there have no files in the directory".format(missing))
  if extra:
    parts.append("suffix(es) {} in the directory are not listed there".format(extra))
  return ("{} lists the checkpoints {}, but the directory holds {}: {}. Restore the missing "
          "files (or remove the unlisted ones): a dataset is read whole or not at all".format(
              path, listed, sorted(suffixes), "; ".join(parts)))


def dataset_format(replay_dir: ReplayDir) -> dict:
  """``dict(stack_size, observation_shape, subsets)`` of a replay directory (an entry point:
  a path, resolved here, or a ``replay_source.ReplaySource``): from its
  ``ccvl_dataset.json`` when present, else the DQN Replay Dataset's (4, (84, 84),
  :data:`SUBSETS`). Raises DatasetError naming the file if its values are malformed."""
  source = replay_source.replay_source(replay_dir)
  return format_from_metadata(source.metadata,
                              os.path.join(source.replay_dir, METADATA_FILENAME))


def _subset_entry(entry, where: str) -> tuple:
  """A subset table entry [rows, checkpoints] or [rows, checkpoints, "prefix"] (each an
  integer >= 1 or null) as (rows, checkpoints[, PREFIX]); DatasetError naming `where`."""
  ok = isinstance(entry, (list, tuple)) and len(entry) in (2, 3)
  if ok:
    for v in entry[:2]:
      ok &= v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 1)
    ok &= len(entry) == 2 or entry[2] == PREFIX
  if not ok:
    raise DatasetError("{} must be [rows, checkpoints] or [rows, checkpoints, {!r}] with "
                       "rows (leading slots of each checkpoint) and checkpoints (leading "
                       "checkpoints) integers >= 1 or null (all), got {!r}".format(
                           where, PREFIX, entry))
  return (entry[0], entry[1]) + tuple(entry[2:])


def _is_int(v, lo: int) -> bool:
  return isinstance(v, int) and not isinstance(v, bool) and v >= lo


def _is_int_list(v, lo: int) -> bool:
  return isinstance(v, list) and all(_is_int(x, lo) for x in v)


# The fields of a ccvl_dataset.json a reader acts on, each with what it must be (a field that
# is absent keeps the reader's default: the DQN Replay Dataset's format).
RECORD_FIELDS = {
    "format": (lambda v: isinstance(v, str), "a string"),
    "suite": (lambda v: isinstance(v, str) and bool(v), "a non-empty string"),
    "game": (lambda v: isinstance(v, str) and bool(v), "a non-empty string"),
    "num_actions": (lambda v: _is_int(v, 1), "an integer >= 1"),
    "action_set": (lambda v: _is_int_list(v, 0) and len(v) >= 1,
                   "a non-empty list of action ids (integers >= 0)"),
    "replay_capacity": (lambda v: _is_int(v, 1), "an integer >= 1"),
    "steps": (lambda v: _is_int(v, 0), "an integer >= 0"),
    "suffixes": (lambda v: _is_int_list(v, 0) and len(v) >= 1,
                 "a non-empty list of checkpoint suffixes (integers >= 0)"),
    "stack_size": (lambda v: _is_int(v, 1), "an integer >= 1"),
    "observation_shape": (lambda v: _is_int_list(v, 1) and len(v) in (2, 3),
                          "[H, W] or [H, W, C], integers >= 1"),
    "reward_clipping": (lambda v: isinstance(v, bool), "true or false"),
}


def check_record_fields(meta: dict, path: str) -> None:
  """DatasetError naming ``path`` and the key for a field of RECORD_FIELDS of the read
  ``ccvl_dataset.json`` ``meta`` that is not what it must be."""
  for key, (ok, what) in RECORD_FIELDS.items():
    if key in meta and not ok(meta[key]):
      raise DatasetError("{}: {!r} must be {}, got {!r}".format(path, key, what, meta[key]))


def format_from_metadata(meta: Optional[dict], path: str) -> dict:
  """:func:`dataset_format` of a ``ccvl_dataset.json`` already read (``meta``; None or
  empty: the DQN Replay Dataset's), ``path`` naming it in errors (every field a reader acts
  on checked first: :func:`check_record_fields`)."""
  meta = meta or {}
  if not isinstance(meta, dict):
    raise DatasetError("{} must hold a JSON object (the dataset's record), got {}".format(
        path, type(meta).__name__))
  check_record_fields(meta, path)
  try:
    k = int(meta.get("stack_size", STACK_SIZE))
    shape = tuple(int(d) for d in meta.get("observation_shape", (84, 84)))
    subsets = dict(SUBSETS)
    if "subsets" in meta:
      subsets = {}
      if not isinstance(meta["subsets"], dict):
        raise DatasetError("{}: 'subsets' must be an object of name -> [rows, checkpoints"
                           "(, \"prefix\")], got {!r}".format(path, meta["subsets"]))
      for n, entry in meta["subsets"].items():
        subsets[str(n)] = _subset_entry(entry, "{}: 'subsets' {!r}".format(path, n))
  except DatasetError:
    raise
  except (TypeError, ValueError, AttributeError, IndexError) as e:
    raise DatasetError("{}: malformed stack_size / observation_shape / subsets: {}".format(
        path, e)) from e
  if k < 1 or len(shape) not in (2, 3) or min(shape) < 1:
    raise DatasetError("{}: stack_size must be >= 1 and observation_shape [H, W] or "
                       "[H, W, C], got {} and {}".format(path, k, list(shape)))
  return dict(stack_size=k, observation_shape=shape, subsets=subsets)


# ------------------------------------------------------------------ one checkpoint

def load_checkpoint(replay_dir: ReplayDir, suffix: int, *,
                    max_rows: Optional[int] = None,
                    num_actions: Optional[int] = None,
                    observation_shape: Optional[Sequence[int]] = None,
                    dir_info: Optional[DirInfo] = None,
                    read_observation: bool = True,
                    replay_capacity: Optional[int] = None,
                    prefix_rows: Optional[int] = None,
                    stack_size: Optional[int] = None) -> ReplayCheckpoint:
  """Reads and validates one suffix. ``max_rows`` reads only the first rows of
  the observation array (the big one), e.g. for the 1%/5% subsets.

  The view (see the module notes): the whole checkpoint, or
  ``replay_capacity`` (batch_rl's subset trick), or ``prefix_rows`` (a literal
  prefix); ``stack_size`` defaults to the dataset's. ``slots`` of the result are the
  view's transitions (``replay_validity.view_indices``); their rewards (finite,
  ``|r| <= 1e9``), terminal flags (0 or 1) and actions (``>= 0``) are checked, and
  nothing else: the slots Dopamine never wrote may hold anything.

  ``num_actions``: if given, every action of the view must be in
  ``[0, num_actions)`` (the game's minimal action set); a ``ccvl_dataset.json``
  written by our writer must also agree. ``observation_shape``: the shape of one
  stored frame; by default the ``observation_shape`` of ``ccvl_dataset.json``,
  else [84, 84] (Atari). The checkpoint's ``stack_size`` comes from
  ``ccvl_dataset.json`` (else 4). ``dir_info`` (:func:`inspect_dir`) saves listing
  the directory and reading its metadata again. ``read_observation=False`` does
  not open the observation file at all (``observation`` holds 0 rows; the caller
  reads and checks the frames with :func:`read_frames_into`: a remote file is then
  opened once). Works on local and remote (``gs://``, ``ram://``) paths.
  ``replay_dir``: a path (resolved here) or a ``replay_source.ReplaySource``.
  Raises DatasetError naming the offending file (and slot).
  """
  if dir_info is None:
    dir_info = inspect_dir(replay_source.replay_source(replay_dir))
  return read_checkpoint(dir_info, suffix, max_rows=max_rows, num_actions=num_actions,
                         observation_shape=observation_shape,
                         read_observation=read_observation, replay_capacity=replay_capacity,
                         prefix_rows=prefix_rows, stack_size=stack_size)


def read_checkpoint(dir_info: DirInfo, suffix: int, *, max_rows: Optional[int] = None,
                    num_actions: Optional[int] = None,
                    observation_shape: Optional[Sequence[int]] = None,
                    read_observation: bool = True,
                    replay_capacity: Optional[int] = None,
                    prefix_rows: Optional[int] = None,
                    stack_size: Optional[int] = None) -> ReplayCheckpoint:
  """:func:`load_checkpoint` of a directory already inspected (:func:`inspect_dir`):
  the listing and format come from ``dir_info``, nothing of the directory is looked
  at again. The arguments are :func:`load_checkpoint`'s."""
  replay_dir = dir_info.replay_dir
  if observation_shape is None:
    observation_shape = dir_info.observation_shape
  observation_shape = tuple(int(d) for d in observation_shape)
  paths = {n: checkpoint_path(replay_dir, n, suffix) for n in replay_files.REQUIRED_NAMES}
  missing = [p for p in paths.values() if os.path.basename(p) not in dir_info.names]
  if missing:
    raise DatasetError("suffix {} in {}: missing {}".format(suffix, replay_dir,
                                                            ", ".join(missing)))
  obs_path = paths[STORE_PREFIX + "observation"]
  if read_observation:
    obs, stored_rows = replay_files.read_array(obs_path, max_rows=max_rows)
  else:
    obs, stored_rows = np.zeros((0,) + observation_shape, np.uint8), None
  arrays = {a: replay_files.read_array(paths[STORE_PREFIX + a])[0]
            for a in ("action", "reward", "terminal")}
  add_count = replay_files.read_array(paths["add_count"])[0]
  inv = replay_files.read_array(paths["invalid_range"])[0]
  eei_path = checkpoint_path(replay_dir, "episode_end_indices", suffix)
  eei = (replay_files.read_int_set(eei_path)
         if os.path.basename(eei_path) in dir_info.names else None)
  _check_layout(suffix, paths, obs, observation_shape, stored_rows, arrays, add_count)
  add_count = int(add_count.reshape(()))
  inv = np.asarray(inv).astype(np.int64).reshape(-1)
  replay_validity.check_bookkeeping(add_count, inv, int(arrays["terminal"].shape[0]), paths,
                                    stack_size=dir_info.stack_size)
  meta = dir_info.metadata
  writer_record = (meta if isinstance(meta, dict)
                   and meta.get("format") == WRITER_FORMAT else None)
  if writer_record is not None:
    replay_validity.check_logged_schedule(
        add_count, int(arrays["terminal"].shape[0]), suffix, writer_record, paths,
        os.path.join(replay_dir, METADATA_FILENAME), stack_size=dir_info.stack_size)
  else:
    _check_written_since_previous(dir_info, suffix, add_count, arrays, paths)
  k = dir_info.stack_size if stack_size is None else stack_size
  if num_actions is not None:
    _check_game(dir_info, num_actions)
  slots = replay_validity.view_indices(
      arrays["terminal"], add_count, inv, replay_capacity=replay_capacity,
      prefix_rows=prefix_rows, stack_size=k, episode_end_indices=eei)
  replay_validity.check_slot_values(
      arrays["action"], arrays["reward"], arrays["terminal"], slots,
      {a: paths[STORE_PREFIX + a] for a in ("action", "reward", "terminal")},
      num_actions=num_actions, clipped_rewards=_clipped_rewards(meta))
  return ReplayCheckpoint(replay_dir=replay_dir, suffix=suffix, observation=obs,
                          action=arrays["action"].astype(np.int32),
                          reward=arrays["reward"].astype(np.float32),
                          terminal=arrays["terminal"].astype(np.uint8),
                          add_count=add_count, invalid_range=inv, episode_end_indices=eei,
                          stack_size=dir_info.stack_size, slots=slots)


# The fewest stale slots that count as evidence (fewer may coincide by chance, e.g. the one
# slot a logged-full buffer's cursor leaves at C - 1).
MIN_STALE_SLOTS = 16


def _check_written_since_previous(dir_info: DirInfo, suffix: int, add_count: int,
                                  arrays: Dict[str, np.ndarray], paths: Dict[str, str]) -> None:
  """Without the writer's record, Dopamine's own bookkeeping is all there is: an ``add_count``
  of at least the capacity says every slot was written, so the slots from the write cursor to
  the end were written after the previous checkpoint was logged. A DatasetError names the file
  when those slots (at least MIN_STALE_SLOTS of them) hold exactly the previous suffix's
  actions, rewards and terminal flags: they were not written since (a final partial buffer
  whose ``add_count`` was set past its cursor), and reading them would read old transitions
  as this checkpoint's."""
  cap = int(arrays["terminal"].shape[0])
  cursor = int(add_count) % cap
  if int(add_count) < cap or cap - cursor < MIN_STALE_SLOTS or suffix - 1 not in set(
      dir_info.suffixes):
    return
  prev = {a: checkpoint_path(dir_info.replay_dir, STORE_PREFIX + a, suffix - 1)
          for a in ("action", "reward", "terminal")}
  if any(os.path.basename(p) not in dir_info.names for p in prev.values()):
    return
  for a, path in prev.items():
    old = replay_files.read_array(path)[0]
    if old.shape != arrays[a].shape or not np.array_equal(old[cursor:], arrays[a][cursor:]):
      return
  raise DatasetError(
      "{}: add_count {} says all {} slots were written, but slots [{}, {}) hold exactly the "
      "actions, rewards and terminal flags of suffix {} ({}): they were not written since that "
      "checkpoint, so the count is past what this suffix holds (a final buffer's count is its "
      "write cursor, below {}). The file is damaged; restore it".format(
          paths["add_count"], int(add_count), cap, cursor, cap, suffix - 1,
          os.path.dirname(prev["action"]), cap))


def _clipped_rewards(meta: Optional[dict]) -> bool:
  """Whether the stored rewards must lie in [-1, 1]: Dopamine clips them before storing, and
  so do our writers unless the record says otherwise (``"reward_clipping": false``, a MinAtar
  dataset built without clipping)."""
  return not (isinstance(meta, dict) and meta.get("reward_clipping") is False)


def _check_layout(suffix: int, paths: Dict[str, str], obs: np.ndarray, observation_shape,
                  stored_rows: Optional[int], arrays: Dict[str, np.ndarray],
                  add_count: np.ndarray) -> None:
  """Shapes, lengths and dtypes of one suffix's arrays (not their values)."""
  obs_path = paths[STORE_PREFIX + "observation"]
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
  if stored_rows is not None and stored_rows != capacity:
    raise DatasetError("arrays of different lengths in suffix {}: {} has {} frames, {} has "
                       "{} entries".format(suffix, obs_path, stored_rows,
                                           paths[STORE_PREFIX + "action"], capacity))
  if add_count.size != 1:
    raise DatasetError("{}: add_count must be a scalar".format(paths["add_count"]))
  if int(add_count.reshape(())) < 0:
    raise DatasetError("{}: add_count must be >= 0 (the number of transitions ever added), "
                       "got {}".format(paths["add_count"], int(add_count.reshape(()))))
  if not np.issubdtype(arrays["action"].dtype, np.integer):
    raise DatasetError("{}: actions must be integers, got {}".format(
        paths[STORE_PREFIX + "action"], arrays["action"].dtype))


def _check_game(dir_info: DirInfo, num_actions: int) -> None:
  """A ccvl_dataset.json that names another action count is another game's dataset."""
  meta = dir_info.metadata
  if meta is not None and meta.get("num_actions") not in (None, num_actions):
    raise DatasetError(
        "{} describes a dataset of game {!r} with {} actions, but this game has {} actions "
        "(dataset of another game?)".format(os.path.join(dir_info.replay_dir, METADATA_FILENAME),
                                             meta.get("game"), meta.get("num_actions"),
                                             num_actions))


def _check_frames_header(npy: replay_files.NpyStream, frame_shape: Tuple[int, ...],
                         expected_rows: int) -> None:
  """An observation file's .npy header: uint8 [expected_rows, *frame_shape], C order."""
  path = npy.path
  if npy.fortran or npy.dtype != np.uint8 or npy.row_shape != tuple(frame_shape):
    raise DatasetError("{}: expected uint8 frames [N, {}], got {} {}".format(
        path, ", ".join(str(d) for d in frame_shape), npy.dtype, npy.shape))
  if npy.rows != expected_rows:
    raise DatasetError(
        "arrays of different lengths: {} has {} frames, the suffix's action/reward/"
        "terminal arrays have {} entries".format(path, npy.rows, expected_rows))


def read_frames_into(path: str, dst: np.ndarray, expected_rows: int) -> None:
  """Decompresses the first ``len(dst)`` frames of an observation file straight into
  ``dst`` (local or remote: only that prefix of the file is read). The stored array
  must be uint8 [expected_rows, *dst.shape[1:]]."""
  with replay_files.open_npy(path) as npy:
    _check_frames_header(npy, dst.shape[1:], expected_rows)
    npy.readinto(dst)


def check_frames_file(path: str, frame_shape: Sequence[int], expected_rows: int) -> None:
  """What :func:`read_frames_into` checks of an observation file before its frames, without
  reading them: its .npy header (uint8 [expected_rows, *frame_shape]) and, unless the file was
  verified before, its gzip trailer's length against that header (a file cut short is a
  DatasetError naming it: ``replay_files.verified_read``). Two small reads, at the file's start
  and end, local or remote."""
  with replay_files.open_npy(path) as npy:
    _check_frames_header(npy, tuple(int(d) for d in frame_shape), expected_rows)


# ------------------------------------------------------------------ transitions

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


def iterate_transitions(replay_dir: ReplayDir, suffix: int, *,
                        replay_capacity: Optional[int] = None,
                        num_actions: Optional[int] = None,
                        stack_size: Optional[int] = None) -> Iterator[Transition]:
  """Yields, in storage order, exactly the transitions Dopamine's sampler treats
  as valid in ``<replay_dir>/*_ckpt.<suffix>.gz`` (``replay_dir``: a path, resolved here,
  or a ``replay_source.ReplaySource``).

  Each record: ``observation`` uint8 [84, 84, 4] (oldest frame first), ``action``
  int, ``reward`` float (as stored, i.e. clipped), ``next_observation`` uint8
  [84, 84, 4] (a copy of ``observation`` for terminal transitions), ``terminal``
  bool. ``replay_capacity`` < stored capacity restricts to the batch_rl subset.
  Other datasets: states are ``stacked_shape(frame_shape, stack_size)``, e.g.
  [10, 10, C] for MinAtar; ``stack_size`` defaults to the dataset's
  (``ccvl_dataset.json``, else 4).
  The frames are streamed from the gzip file (memory: a few thousand frames),
  unless some stack wraps around the circular buffer; so a corrupt observation
  file raises ``DatasetError`` when the iteration reaches the damage, or, for a
  file read for the first time whole or mostly, when the stream ends and its CRC-32
  is checked (a shorter prefix is not: ``replay_files.verified_read``).
  """
  info = inspect_dir(replay_source.replay_source(replay_dir))
  replay_dir = info.replay_dir
  ckpt = read_checkpoint(info, suffix, max_rows=0, num_actions=num_actions,
                         replay_capacity=replay_capacity, stack_size=stack_size)
  if stack_size is None:
    stack_size = ckpt.stack_size
  fdim = ckpt.observation.ndim - 1
  if replay_capacity is not None and replay_capacity >= ckpt.capacity:
    replay_capacity = None
  cap = ckpt.capacity if replay_capacity is None else replay_capacity
  idx = ckpt.slots
  if idx.size == 0:
    return
  obs_path = checkpoint_path(replay_dir, STORE_PREFIX + "observation", suffix)
  wraps = bool(idx.min() < stack_size - 1 or idx.max() + 1 >= cap)
  if wraps:
    # Some stacks wrap around the circular buffer: read the frames whole.
    ckpt.observation = replay_files.read_array(obs_path, max_rows=cap)[0]
    blocks = [(ckpt.observation, 0)]
  else:
    # Common case (every published checkpoint): stream the frames, holding only
    # a block of rows (+ the stack overlap) in memory.
    blocks = replay_files.stream_rows(obs_path, int(idx.max()) + 2, STREAM_BLOCK_ROWS)
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
