"""Beside the replay data pipeline: a replay directory's own record, `ccvl_dataset.json` (the
game it was collected in, that game's action set, the frame format), checked against the game
and environment of the run that is about to train on it, before any data is read.

The reader (dqn_replay) compares only the action count with the run's, and every action read
with it: a dataset of another game with as many actions as the run's trains without a word.
The record names its game and ALE action set, so such a dataset is refused here, naming the
file and both values. A DQN Replay directory has no record: `check` then returns what it could
not check (the caller logs it); the reader's checks stay (every action read below the action
count, the frames' stored shape).

More in docs/data.md "Module notes", `ccvl_tf/data/dataset_record.py`.
"""
from __future__ import annotations

import os
import re
from typing import List, Optional, Sequence

from ccvl_tf.data import dqn_replay
from ccvl_tf.data import replay_source
from ccvl_tf.data.replay_files import METADATA_FILENAME, DatasetError

# The suite a record without a "suite" key belongs to (the Atari writers write none).
DEFAULT_SUITE = "atari"


def _spelling(game) -> str:
  """A game name without case, '_', '-' or spaces (the record may spell it either way)."""
  return re.sub(r"[^a-z0-9]", "", str(game).lower())


def check(source: replay_source.ReplaySource, *, game: str,
          action_set: Optional[Sequence[int]], observation_shape: Sequence[int],
          suite: str = DEFAULT_SUITE) -> List[str]:
  """Checks the ccvl_dataset.json of `source` (a `replay_source.ReplaySource`, made once by the
  caller, e.g. offline.dataset.open_dataset: its resolution, listing and record are used as
  they are; a path is a TypeError) against the run: the same `suite` and `game` (any spelling),
  the same ALE `action_set` (the game's minimal action set; None: not compared) and frames that
  stack to `observation_shape` (e.g. (84, 84, 4)).

  Returns the checks that could not be made, as sentences for the log: all of them for a
  directory without a record (a DQN Replay directory), the keys a record lacks otherwise.

  Raises:
    DatasetError: naming the file, what it records and what the run has, for each
      disagreement; or a record that cannot be read.
  """
  replay_source.require_source(source, "dataset_record.check")
  resolved = source.replay_dir
  if source.names is None:
    return []  # nothing to check: the reader refuses a missing directory, naming it
  path = os.path.join(resolved, METADATA_FILENAME)
  meta = source.metadata
  want_shape = tuple(int(d) for d in observation_shape)
  if meta is None:
    return [f"{resolved} has no {METADATA_FILENAME} (a DQN Replay directory): its game and "
            f"action set cannot be checked against {game}; checked instead: every action read "
            f"is below the game's action count{_count(action_set)} and the frames stack to "
            f"{_shape(want_shape)}"]
  if not isinstance(meta, dict):
    raise DatasetError(f"{path} is not a dataset record (a JSON object), got "
                       f"{type(meta).__name__}")
  problems, unchecked = [], []
  recorded_suite = str(meta.get("suite", DEFAULT_SUITE))
  if "game" not in meta:
    unchecked.append("its game")
  elif (_spelling(recorded_suite) != _spelling(suite)
        or _spelling(meta["game"]) != _spelling(game)):
    where = "" if recorded_suite == DEFAULT_SUITE else f"{recorded_suite} "
    problems.append(f"the {where}game {meta['game']}, but this run's game is {game}")
  if action_set is not None:
    recorded = meta.get("action_set")
    if recorded is None:
      unchecked.append("its action set")
    elif _ints(recorded) != [int(a) for a in action_set]:
      problems.append(f"the action set (ALE action ids) {recorded}, but {game}'s is "
                      f"{[int(a) for a in action_set]}")
  fmt = dqn_replay.format_from_metadata(meta, path)
  stacked = dqn_replay.stacked_shape(fmt["observation_shape"], fmt["stack_size"])
  if stacked != want_shape:
    problems.append(f"frames {_shape(fmt['observation_shape'])} stacked {fmt['stack_size']} "
                    f"to {_shape(stacked)}, but {game}'s observations are {_shape(want_shape)}")
  if problems:
    raise DatasetError(f"{path} records a dataset of another game or format: "
                       + "; ".join(problems) + ". Train with the --game it was collected in, "
                       "or give another --dataset_dir")
  if unchecked:
    return [f"{path} does not record {' or '.join(unchecked)}: not checked against {game}"]
  return []


def _ints(values) -> Optional[List[int]]:
  try:
    return [int(v) for v in values]
  except (TypeError, ValueError):
    return None


def _count(action_set) -> str:
  return "" if action_set is None else f" ({len(action_set)})"


def _shape(shape: Sequence[int]) -> str:
  return "uint8 " + "x".join(str(int(d)) for d in shape)

