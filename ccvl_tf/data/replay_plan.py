"""Stage 3 of the replay data pipeline (docs/data.md): the subset plan, i.e. which
checkpoints of a replay directory, and which rows of each, a frame store holds.

More in docs/data.md "Module notes", `ccvl_tf/data/replay_plan.py`.
"""
from __future__ import annotations

import dataclasses
from typing import List, Optional, Sequence, Tuple

import numpy as np

from ccvl_tf.data import dqn_replay
from ccvl_tf.data import replay_files
from ccvl_tf.data import replay_source


def subset_plan(replay_dir: replay_source.ReplayDir, subset: str = "all",
                dir_info: Optional[dqn_replay.DirInfo] = None) -> List[tuple]:
  """[(suffix, replay_capacity or None for whole checkpoint)] for a subset name:
  :func:`plan_from` of ``dir_info``, else of ``replay_dir`` (a path, resolved here, or a
  ``replay_source.ReplaySource``) inspected here (``dqn_replay.inspect_dir``)."""
  if dir_info is None:
    dir_info = dqn_replay.inspect_dir(replay_source.replay_source(replay_dir))
  return plan_from(dir_info, subset)


def select_plan(replay_dir: replay_source.ReplayDir, subset: str = "all",
                suffixes: Optional[Sequence[int]] = None
                ) -> Tuple[dqn_replay.DirInfo, List[tuple]]:
  """(the directory looked at once, :func:`plan_from` of it), for a caller that
  has not inspected ``replay_dir`` (a path, resolved here, or a
  ``replay_source.ReplaySource``) yet."""
  info = dqn_replay.inspect_dir(replay_source.replay_source(replay_dir))
  return info, plan_from(info, subset, suffixes)


def plan_from(dir_info: dqn_replay.DirInfo, subset: str = "all",
              suffixes: Optional[Sequence[int]] = None) -> List[tuple]:
  """The plan of ``subset`` in the inspected directory ``dir_info``, restricted to
  ``suffixes`` if given: [(suffix, rows)] (rows: batch_rl's capacity, None for the
  whole checkpoint), entries of a table in ``"prefix"`` mode ``(suffix, rows, "prefix")``.

  The subset names and their meaning are ``dqn_replay.SUBSETS`` (see the module
  notes), unless the dataset's ``ccvl_dataset.json`` declares its own ``"subsets"``
  table (``dir_info.subsets``). Raises ValueError for an unknown subset, DatasetError
  when none of ``suffixes`` is in the plan."""
  table = dir_info.subsets
  if subset not in table:
    raise ValueError("unknown subset {!r}; valid: {}".format(subset, ", ".join(table)))
  rows, n_ckpt = table[subset][:2]
  mode = tuple(table[subset][2:])
  if dir_info.incomplete is not None:
    raise replay_files.DatasetError(dir_info.incomplete)
  complete = list(dir_info.suffixes)
  if n_ckpt is not None:
    complete = complete[:n_ckpt]
  plan = [(s, rows) + (mode if rows is not None else ()) for s in complete]
  if suffixes is not None:
    wanted = set(int(s) for s in suffixes)
    plan = [p for p in plan if p[0] in wanted]
    if not plan:
      raise replay_files.DatasetError("none of suffixes {} in {}".format(sorted(wanted),
                                                                       dir_info.replay_dir))
  return plan


def check_subset_is_part(dir_info: dqn_replay.DirInfo, subset: str,
                         loaded: "LoadedPlan") -> None:
  """Raises DatasetError when ``subset`` (not "all") selects every slot of every checkpoint of
  the inspected directory ``dir_info`` (``loaded``: its plan read by :func:`load_plan`): a
  dataset smaller than the subset, e.g. "1%" (the first 10,000 slots of each checkpoint) of
  checkpoints of 1,000 slots, or "initial10%" (the first 5 checkpoints) of 3. Such a run
  would train on the whole dataset under the subset's name."""
  if subset == "all":
    return
  rows, n_ckpt = dir_info.subsets[subset][:2]
  suffixes = list(dir_info.suffixes)
  capacities = sorted({c.stored_rows for c in loaded.chunks})
  all_checkpoints = n_ckpt is None or n_ckpt >= len(suffixes)
  all_slots = rows is None or (capacities and rows >= capacities[-1])
  if not (all_checkpoints and all_slots):
    return
  parts = []
  if n_ckpt is not None:
    parts.append("the first {} checkpoint(s), and {} holds {} ({})".format(
        n_ckpt, dir_info.replay_dir, len(suffixes), ", ".join(str(x) for x in suffixes)))
  if rows is not None:
    parts.append("the first {:,} slots of each checkpoint, and the checkpoints of {} hold "
                 "{}".format(rows, dir_info.replay_dir,
                             " to ".join("{:,}".format(c) for c in capacities)))
  raise replay_files.DatasetError(
      "subset {!r} is {}: it would be the whole dataset under the subset's name; give the "
      "subset 'all' for the whole dataset (or a dataset with more data)".format(
          subset, "; ".join(parts)))


@dataclasses.dataclass
class Chunk:
  """The rows one plan entry contributes to a frame store, in chronological order.

  Row ``j`` is storage slot ``order[j]`` of the checkpoint when the buffer had to
  be reordered (a view whose stacks wrap around the circular buffer), else slot
  ``j`` (rows ``[0, rows)``: the frames up to the last transition's next state)."""
  suffix: int
  path: str                    # the observation file
  stored_rows: int             # the checkpoint's capacity C
  rows: int
  order: Optional[np.ndarray]  # int64 [rows] storage slots, or None: slot j = row j
  slots: np.ndarray            # int64 [M] the transitions, as rows of this chunk
  action: np.ndarray           # int32 [rows]
  reward: np.ndarray           # float32 [rows]
  terminal: np.ndarray         # uint8 [rows]

  def read_frames_into(self, dst: np.ndarray) -> None:
    """Decompresses this chunk's frames into ``dst`` (uint8 [rows, *frame_shape])."""
    dqn_replay.read_frames_into(self.path, dst, expected_rows=self.stored_rows)
    if self.order is not None:
      dst[...] = dst[self.order]


@dataclasses.dataclass
class LoadedPlan:
  """A plan's chunks, read except for their frames, and the frame layout."""
  replay_dir: str
  stack_size: int
  frame_shape: Tuple[int, ...]
  chunks: List[Chunk]

  @property
  def num_frames(self) -> int:
    return sum(c.rows for c in self.chunks)

  @property
  def num_transitions(self) -> int:
    return sum(int(c.slots.size) for c in self.chunks)


def load_plan(dir_info: dqn_replay.DirInfo, plan: List[tuple], *,
              num_actions: Optional[int] = None, allow_empty: bool = False) -> LoadedPlan:
  """Reads the small arrays of every entry of ``plan`` (:func:`plan_from` of the
  inspected directory ``dir_info``; observation files are not opened:
  :meth:`Chunk.read_frames_into`) and checks the values at the transitions of each
  entry's view (``num_actions``: see ``dqn_replay.load_checkpoint``).
  Raises DatasetError when the plan holds no transition at all, unless ``allow_empty``
  (a caller that reads one checkpoint at a time, e.g. ``replay_pool``'s survey)."""
  chunks = [_chunk(dir_info, item, num_actions) for item in plan]
  loaded = LoadedPlan(replay_dir=dir_info.replay_dir, stack_size=dir_info.stack_size,
                      frame_shape=tuple(dir_info.observation_shape), chunks=chunks)
  if loaded.num_frames == 0 and not allow_empty:
    raise replay_files.DatasetError("no valid transitions in {} for plan {}".format(
        dir_info.replay_dir, plan))
  return loaded


def _chunk(dir_info: dqn_replay.DirInfo, item: tuple, num_actions: Optional[int]) -> Chunk:
  suffix, rows, mode = item[0], item[1], tuple(item[2:])
  if mode not in ((), (dqn_replay.PREFIX,)):
    raise ValueError("plan entry {!r}: the third element must be {!r}".format(
        item, dqn_replay.PREFIX))
  prefix = bool(mode) and rows is not None  # literal prefix: no modular view
  ckpt = dqn_replay.read_checkpoint(
      dir_info, suffix, num_actions=num_actions, read_observation=False,
      replay_capacity=None if prefix else rows, prefix_rows=rows if prefix else None)
  k = dir_info.stack_size
  cap = ckpt.capacity if prefix or rows is None or rows >= ckpt.capacity else rows
  idx = ckpt.slots
  if idx.size > 0 and (idx.min() < k - 1 or idx.max() + 1 >= cap):
    # Stacks wrap around the circular buffer: reorder it chronologically (oldest first).
    cursor = ckpt.add_count % cap
    order = (cursor + np.arange(cap)) % cap
    idx = np.sort((idx - cursor) % cap)
    nrows, sel = cap, order
  else:
    order = None
    nrows = int(idx.max()) + 2 if idx.size else 0
    sel = slice(0, nrows)
  # Keep only the per-slot values the store holds (not the 1M-entry arrays).
  return Chunk(suffix=suffix, stored_rows=ckpt.capacity, rows=nrows, order=order, slots=idx,
               path=replay_files.checkpoint_path(dir_info.replay_dir,
                                               replay_files.STORE_PREFIX + "observation", suffix),
               action=ckpt.action[sel].copy(), reward=ckpt.reward[sel].copy(),
               terminal=ckpt.terminal[sel].copy())
