"""The checks of the paths a binary is given, before anything is read or written: an output
directory (or file) that can be created and written, an input directory that exists. Each is
one ValueError naming the flag, the path and what is wrong; every binary's output flags go
through `config_flags.from_flags`, which calls these (the settings declared `output="dir"` /
`"file"`). No TensorFlow here, as in config_flags, which imports this module.
"""
from __future__ import annotations

import os


def check_output_dir(path: str, flag: str = "--root_dir") -> None:
  """ValueError naming `flag` unless `path` is (or can be created as) a writable local
  directory: not a file, not under a file, and writable where it exists (or its nearest
  existing parent is)."""
  if not path:
    raise ValueError(f"{flag} must be a directory path, got {path!r}")
  if "://" in path:
    return  # remote (gs://, ram://): checked by tf.io.gfile when written
  probe = os.path.abspath(path)
  if os.path.exists(probe) and not os.path.isdir(probe):
    raise ValueError(f"{flag} {path} is a file, not a directory")
  while not os.path.exists(probe):
    parent = os.path.dirname(probe)
    if parent == probe:
      break
    probe = parent
  if not os.path.isdir(probe):
    raise ValueError(f"{flag} {path}: {probe} is a file, so the directory cannot be created")
  if not os.access(probe, os.W_OK | os.X_OK):
    why = "is on a read-only file system" if _read_only(probe) else "is not writable"
    raise ValueError(f"{flag} {path}: {probe} {why}")
  _check_name_lengths(path, flag, probe)


def _read_only(path: str) -> bool:
  """Whether `path` lies on a file system mounted read-only."""
  try:
    return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
  except OSError:
    return False


def _check_name_lengths(path: str, flag: str, existing: str) -> None:
  """ValueError naming `flag` when a component of `path`, or the whole of it, is longer than
  the file system of `existing` (its nearest existing directory) allows."""
  def limit(name: str, default: int) -> int:
    try:
      return int(os.pathconf(existing, name))
    except (OSError, ValueError):
      return default
  name_max, path_max = limit("PC_NAME_MAX", 255), limit("PC_PATH_MAX", 4096)
  full = os.path.abspath(path)
  for part in full.split(os.sep):
    if len(os.fsencode(part)) > name_max:
      shown = part if len(part) <= 40 else part[:37] + "..."
      raise ValueError(f"{flag}: the path component {shown!r} is {len(os.fsencode(part))} "
                       f"bytes long, longer than the file system allows ({name_max}); use a "
                       f"shorter name")
  if len(os.fsencode(full)) >= path_max:
    raise ValueError(f"{flag}: the path is {len(os.fsencode(full))} bytes long, longer than the "
                     f"file system allows ({path_max - 1}); use a shorter path")


def check_output_file(path: str, flag: str) -> None:
  """ValueError naming `flag` unless `path` can be written as a file: not a directory, and
  its directory one `check_output_dir` accepts."""
  if not path:
    raise ValueError(f"{flag} must be a file path, got {path!r}")
  if "://" in path:
    return
  if os.path.isdir(path):
    raise ValueError(f"{flag} {path} is a directory, not a file")
  if path.endswith(("/", os.sep)):
    raise ValueError(f"{flag} {path} ends with '/', so it names a directory, not a file; give "
                     f"the file's path (e.g. {path.rstrip('/' + os.sep) or '.'}/out.json)")
  parent = os.path.dirname(os.path.abspath(path))
  if os.path.exists(parent) and not os.path.isdir(parent):
    raise ValueError(f"{flag} {path}: {parent} is a file, so the directory cannot be created")
  check_output_dir(parent, flag)
  _check_name_lengths(path, flag, parent)


def check_input_dir(path: str, flag: str, expected: str = "") -> None:
  """ValueError naming `flag` unless `path` is an existing local directory; the message says
  whether it is missing or a file (`expected`: what the directory should hold)."""
  hint = f" (expected {expected})" if expected else ""
  if not path:
    raise ValueError(f"{flag} must be a directory path{hint}, got {path!r}")
  if os.path.isdir(path):
    return
  if os.path.exists(path):
    raise ValueError(f"{flag} {path} is a file, not a directory{hint}")
  raise ValueError(f"{flag} {path} does not exist{hint}")
