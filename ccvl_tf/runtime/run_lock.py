"""One process per run directory: an OS-level lock on `<run dir>/run.lock`, taken when a run
starts and released when it ends.

The lock is `fcntl.flock` on the open lock file, so the kernel releases it when the holding
process ends in any way, also when it is killed (kill -9): no stale lock is ever left to clean
up. While it is held, the file records its holder (pid, host, start time, command) so that a
second process is refused with one line naming the directory and the holder:

    with run_lock.hold(root_dir, "--root_dir"):
      ...  # the run

The lock is taken once per process, by the outermost entry: binaries/train_offline.py holds it
across the run and its results table (offline.runner.run_holding_lock, then
compare.offline_table.run), and offline.runner.run takes it itself for a library user who calls it
alone. The library functions below such an entry need the directory locked and do not take the
lock: they check that their caller holds it (`require_held`). `hold` taken again by the process
that holds it takes nothing more (it is the same lock). A run that ends having written nothing
(refused before its first output, e.g. on a corrupt dataset) leaves the directory as it found it:
the lock file is removed, and the directory too if `hold` created it. Removing a lock file is safe
because a taker checks, once it holds the lock, that the file it locked is still the one at the
path (else it could lock an unlinked file while another process locks the new one), and tries
again. A lock file beside a run's outputs stays (emptied). On file systems without flock support
the lock cannot be taken and `hold` says so; a remote run directory (gs://) is not locked.
Processes forked while the lock is held share it (the lock belongs to the open file).
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shlex
import socket
import sys
import time
from typing import Iterator, Set

LOCK_FILENAME = "run.lock"

# The lock files this process holds (real paths).
_HELD: Set[str] = set()


class RunDirectoryInUse(ValueError):
  """Another process holds the run directory's lock; the message names the directory, the
  holder (pid, host, start time, command) and what to do."""


def _holder_text(path: str) -> str:
  """The holder recorded in the lock file `path`, in words."""
  try:
    with open(path) as f:
      info = json.loads(f.read() or "{}")
  except (OSError, ValueError):
    info = {}
  if not isinstance(info, dict) or "pid" not in info:
    return "a process that has not recorded itself yet"
  return (f"pid {info.get('pid')} on {info.get('host', '?')}, started "
          f"{info.get('started', '?')} ({info.get('command', '?')})")


def _record(fd: int) -> None:
  """Writes this process as the holder into the locked file `fd`."""
  command = shlex.join(sys.argv) if sys.argv and sys.argv[0] else sys.executable
  info = {"pid": os.getpid(), "host": socket.gethostname(),
          "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
          "command": command if len(command) <= 300 else command[:297] + "..."}
  with contextlib.suppress(OSError):  # e.g. a full disk: the lock holds without the record
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)


@contextlib.contextmanager
def hold(run_dir: str, flag: str = "--root_dir") -> Iterator[str]:
  """Holds the lock of `run_dir` (created if missing) for the block; yields the lock file's
  path.

  Raises:
    RunDirectoryInUse: another process holds it (the message names `flag`, the directory and
      the holder).
    ValueError: the directory or its lock file cannot be created or locked (e.g. read-only, or
      a file system without flock), naming `flag`, the path and why.
  """
  if "://" in str(run_dir):  # a remote run directory (gs://): no OS lock to take there
    yield ""
    return
  directory = os.path.realpath(run_dir)
  path = os.path.join(directory, LOCK_FILENAME)
  if path in _HELD:  # taken again by the process that holds it
    yield path
    return
  created = not os.path.isdir(directory)
  fd = _lock(run_dir, path, flag)
  try:
    _record(fd)
    _HELD.add(path)
    try:
      yield path
    finally:
      _HELD.discard(path)
      with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)  # no holder recorded while nobody holds it
      _remove_if_nothing_written(directory, path, created)
  finally:
    os.close(fd)  # closing the descriptor releases the flock


def _lock_path(run_dir: str) -> str:
  return os.path.join(os.path.realpath(run_dir), LOCK_FILENAME)


def held(run_dir: str) -> bool:
  """Whether this process holds the lock of `run_dir` (`hold`); a remote run directory
  (gs://), which is not locked, counts as held."""
  return "://" in str(run_dir) or _lock_path(run_dir) in _HELD


def require_held(run_dir: str, what: str, flag: str = "--root_dir") -> None:
  """For a library function that writes in `run_dir` and leaves taking its lock to the entry
  that called it: raises RuntimeError naming `what` and the directory unless this process
  holds the lock (`hold`)."""
  if not held(run_dir):
    raise RuntimeError(f"{what} needs {flag} {run_dir} locked by its caller: call it inside "
                       f"`with run_lock.hold({run_dir!r}, {flag!r}):` (one process per run "
                       f"directory)")


def _lock(run_dir: str, path: str, flag: str, attempts: int = 10) -> int:
  """An open descriptor of the lock file `path`, locked: the file that is at `path` once the
  lock is held (one another holder removed meanwhile is not it: then again)."""
  if os.path.exists(run_dir) and not os.path.isdir(run_dir):
    raise ValueError(f"{flag} {run_dir}: is a file, expected a directory (the run's "
                     f"directory, created when missing)")
  for _ in range(attempts):
    try:
      os.makedirs(run_dir, exist_ok=True)
      fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as e:
      raise ValueError(f"{flag} {run_dir}: cannot create its lock file {path}: "
                       f"{e.strerror or e}") from None
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
      os.close(fd)
      if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
        raise ValueError(f"{flag} {run_dir}: cannot lock {path} ({e.strerror or e}); one "
                         f"process per run directory needs a file system with flock "
                         f"support") from None
      raise RunDirectoryInUse(
          f"{flag} {run_dir} is in use by another process: {_holder_text(path)}. One process "
          f"per run directory: wait for it to end, or give another {flag} (its lock {path} is "
          f"released when that process ends, also if it is killed)") from None
    if _same_file(fd, path):
      return fd
    os.close(fd)  # its holder removed it while this process was opening it
  raise ValueError(f"{flag} {run_dir}: its lock file {path} was removed and made again "
                   f"{attempts} times while this process was taking it")


def _same_file(fd: int, path: str) -> bool:
  try:
    at_path = os.stat(path)
  except FileNotFoundError:
    return False
  held = os.fstat(fd)
  return (held.st_dev, held.st_ino) == (at_path.st_dev, at_path.st_ino)


def _remove_if_nothing_written(directory: str, path: str, created: bool) -> None:
  """Removes the lock file `path` (still locked) when it is all `directory` holds, and the
  directory when `hold` created it: a run that wrote nothing leaves no trace."""
  with contextlib.suppress(OSError):
    if os.listdir(directory) != [LOCK_FILENAME]:
      return
    os.unlink(path)
    if created:
      os.rmdir(directory)  # fails, harmlessly, if another process wrote there meanwhile
