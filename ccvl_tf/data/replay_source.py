"""A replay directory resolved once (stage 1 of the replay data pipeline, docs/data.md):
local or remote, `path` or `path/replay_logs`, its listings and `ccvl_dataset.json`, shared by
every stage of one load; and the listing rule that needs the resolution (`list_suffixes`).
The file access itself is ccvl_tf/data/replay_files.py.
"""
from __future__ import annotations

import functools
import hashlib
import os
from typing import List, Optional, Sequence, Tuple, Union

from ccvl_tf.data import replay_files


class ReplaySource:
  """A replay directory as a caller names it, resolved once: ``path`` as given (what the
  frame-store cache key and a run's identity name), whether it is remote, the directory of
  checkpoint files it stands for (``replay_dir``: ``path`` itself, or ``path/replay_logs``
  when ``path`` is a run directory laid out like the DQN Replay Dataset,
  ``<game>/<run>/replay_logs``), the listings of both and ``ccvl_dataset.json``.

  Each is looked up on first use and kept: the stages of one load (the dataset record's
  check, the frame-store cache's check, ``dqn_replay.inspect_dir``, a run's identity) are
  handed one source and share its resolution and listing instead of each asking the file
  system again, and a caller that needs only ``path`` looks nothing up. A source shows the
  directory as it was when first looked at: make one per load, with :func:`replay_source`.
  """

  def __init__(self, path: str):
    self.path = path
    self.remote = replay_files.is_remote(path)

  def __repr__(self) -> str:
    return "ReplaySource({!r})".format(self.path)

  @functools.cached_property
  def _path_is_dir(self) -> bool:
    return replay_files.path_isdir(self.path)

  @functools.cached_property
  def path_names(self) -> Optional[Tuple[str, ...]]:
    """The listing of ``path`` itself; None when it is not a directory."""
    return tuple(replay_files.list_dir(self.path)) if self._path_is_dir else None

  @functools.cached_property
  def replay_dir(self) -> str:
    """``path/replay_logs`` when ``path`` is a directory without checkpoint files of its
    own beside a ``replay_logs`` directory; else ``path``."""
    logs = os.path.join(self.path, "replay_logs")
    if self._path_is_dir and replay_files.path_isdir(logs) and not any(
        replay_files.CKPT_RE.match(n) for n in self.path_names):
      return logs
    return self.path

  @functools.cached_property
  def names(self) -> Optional[Tuple[str, ...]]:
    """The listing of ``replay_dir``; None when it is not a directory."""
    if self.replay_dir == self.path:
      return self.path_names
    return tuple(replay_files.list_dir(self.replay_dir))

  @functools.cached_property
  def metadata(self) -> Optional[dict]:
    """``replay_dir``'s ``ccvl_dataset.json`` (``replay_files.read_metadata``; None when the
    listing has none), read once."""
    if self.names is None or replay_files.METADATA_FILENAME not in self.names:
      return None
    return replay_files.read_metadata(self.replay_dir)

  @functools.cached_property
  def game_folder_runs(self) -> Tuple[str, ...]:
    """The runs ``path`` holds when it is a game folder of the DQN Replay Dataset's layout
    (``<game>/<run>/replay_logs``): its subdirectories holding a ``replay_logs`` directory,
    numbered runs in numeric order first. Empty for a directory with checkpoint files or a
    ``replay_logs`` of its own, and for anything that is not a directory."""
    names = self.path_names
    if names is None or self.replay_dir != self.path or any(
        replay_files.CKPT_RE.match(n) for n in names):
      return ()
    runs = [n for n in names
            if replay_files.path_isdir(os.path.join(self.path, n, "replay_logs"))]
    return tuple(sorted(runs, key=lambda n: (not n.isdigit(), int(n) if n.isdigit() else 0,
                                             n)))

  def game_folder_error(self) -> Optional[str]:
    """What to pass instead of a game folder (`game_folder_runs`): "<path> is a game folder
    holding runs 1, 2, 3 (<game>/<run>/replay_logs): pass <path>/1/replay_logs"; None for any
    other path."""
    runs = self.game_folder_runs
    if not runs:
      return None
    return ("{} is a game folder holding run{} {} (the DQN Replay layout "
            "<game>/<run>/replay_logs), not a run's replay directory: pass {}".format(
                self.path, "s" if len(runs) > 1 else "", ", ".join(runs),
                os.path.join(self.path, runs[0], "replay_logs")))

  def listed(self, directory: str) -> Optional[Tuple[str, ...]]:
    """The names in ``directory`` (``path`` or ``replay_dir``) when this source has listed
    it already, else None; looks nothing up (a cached property is kept in the instance's
    ``__dict__`` under its own name once computed)."""
    made = vars(self)
    if directory == self.path:
      return made.get("path_names")
    if made.get("replay_dir") == directory:
      return made.get("names")
    return None

  def listing(self) -> Tuple[str, ...]:
    """``names``; raises DatasetError (replay_files) for a missing ``replay_dir``, a file,
    or a directory without Dopamine checkpoint files."""
    if self.names is None:
      if replay_files.path_exists(self.replay_dir):
        raise replay_files.DatasetError(
            "replay directory {} is a file, not a directory".format(self.replay_dir))
      raise replay_files.DatasetError(
          "replay directory does not exist: {}".format(self.replay_dir))
    if not any(replay_files.CKPT_RE.match(n) for n in self.names):
      game_folder = self.game_folder_error()
      if game_folder is not None:
        raise replay_files.DatasetError(game_folder)
      raise replay_files.DatasetError(
          "replay directory {} holds no Dopamine checkpoint files "
          "('$store$_observation_ckpt.N.gz' ...)".format(self.replay_dir))
    return self.names


# What the public entry points take for a replay directory (offline.dataset.open_dataset's
# data settings, FrameStore.from_replay / from_plan, dqn_replay.load_checkpoint /
# iterate_transitions / dataset_format, replay_plan.subset_plan / select_plan, list_suffixes):
# a path, or a source already resolved. Each converts it once (`replay_source`); the stages
# below them (dqn_replay.inspect_dir, dataset_record.check, offline.dataset.dataset_identity)
# take a ReplaySource only (`require_source`).
ReplayDir = Union[str, ReplaySource]


def replay_source(path: ReplayDir) -> ReplaySource:
  """The :class:`ReplaySource` of ``path``, for an entry point that takes a path: a source
  already made is returned as it is, so that an entry point called with its caller's source
  shares that resolution."""
  return path if isinstance(path, ReplaySource) else ReplaySource(path)


def require_source(source: ReplaySource, what: str) -> ReplaySource:
  """``source`` itself, for a stage that takes a :class:`ReplaySource` only (its entry point
  resolved the path once). Raises TypeError naming ``what`` and what it was given: a path
  here would be resolved and listed again, apart from the entry point's source."""
  if not isinstance(source, ReplaySource):
    raise TypeError("{} takes a replay_source.ReplaySource (made once by the entry point: "
                    "replay_source.replay_source(path)), got {} {!r}".format(
                        what, type(source).__name__, source))
  return source


def resolve_replay_dir(path: str) -> str:
  """``path`` itself, or ``path/replay_logs`` when ``path`` is a run directory
  laid out like the DQN Replay Dataset (``ReplaySource.replay_dir``)."""
  return ReplaySource(path).replay_dir


def list_suffixes(replay_dir: ReplayDir, names: Optional[Sequence[str]] = None) -> List[int]:
  """Sorted suffixes with a complete set of checkpoint files. ``names``: the
  directory's listing if already made (``replay_dir`` is then taken as resolved);
  else ``replay_dir`` is resolved and listed (:class:`ReplaySource`).

  Raises DatasetError (replay_files) for a missing/empty directory, or when a suffix has some
  files but misses a required one (naming the missing file).
  """
  if names is None:
    source = replay_source(replay_dir)
    replay_dir, names = source.replay_dir, source.listing()
  suffixes, incomplete = replay_files.scan_suffixes(replay_dir, names)
  if incomplete is not None:
    raise replay_files.DatasetError(incomplete)
  return suffixes


def listing_sha256(directory: str, names: Sequence[str], remote: bool) -> str:
  """16 hex digits of sha256 over ``names`` in ``directory`` (each name and its size) and the
  bytes of its small JSON records: the same data in another place hashes alike, another
  dataset in the same place does not, and nothing but the listing and the records is read.
  A run's identity (offline.dataset.dataset_identity) and the checkpoint pool's check that no
  run is given twice (replay_pool) use it."""
  h = hashlib.sha256()
  for name in sorted(names or ()):
    entry = (directory.rstrip("/") + "/" + name) if remote else os.path.join(directory, name)
    try:
      size = replay_files.file_stat(entry)[0]
    except Exception:  # pylint: disable=broad-except
      size = -1  # a sub-directory or an unreadable entry: the name still counts
    h.update("{}:{}\n".format(name, size).encode())
    if not remote and name.endswith(".json") and 0 <= size < 1_000_000:
      with open(entry, "rb") as f:
        h.update(f.read())
  return h.hexdigest()[:16]
