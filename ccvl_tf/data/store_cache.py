"""Stage 4 of the replay data pipeline (docs/data.md), its local cache: the arrays of
frame stores built from remote replay directories, as a plain ``get`` / ``put``.

The frame store decides when to build and calls ``get`` and ``put``; this module never
builds nor imports it. More in docs/data.md "Module notes", `ccvl_tf/data/store_cache.py`.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
import zlib
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence

import numpy as np

from ccvl_tf.data import dqn_replay
from ccvl_tf.data import replay_validity
from ccvl_tf.data import replay_files
from ccvl_tf.data import replay_source
from ccvl_tf.runtime import strict_json

CACHE_ENV = replay_files.CACHE_ENV
CACHE_FORMAT = 1
ARRAYS = ("frames", "action", "reward", "terminal", "valid")
MANIFEST = "manifest.json"
_CRC_CHUNK = 1 << 26  # bytes per zlib.crc32 call


class CacheInvalid(Exception):
  """An entry that must not be used; ``kind`` is "stale" or "corrupt"."""

  def __init__(self, kind: str, why: str):
    super().__init__(why)
    self.kind = kind
    self.why = why


class Cached(NamedTuple):
  """What an entry holds: the arrays named in ``ARRAYS`` and the store's stack size."""
  arrays: Dict[str, np.ndarray]
  stack_size: int


cache_root = replay_files.cache_root  # the cache's root (also of the verified-file records)


def key_fields(replay_dir: str, subset: str, suffixes: Optional[Sequence[int]] = None,
               num_actions: Optional[int] = None) -> dict:
  """What the cached store is a function of (besides the source files themselves,
  which the manifest identifies)."""
  return dict(format=CACHE_FORMAT, replay_dir=str(replay_dir).rstrip("/"), subset=str(subset),
              suffixes=None if suffixes is None else sorted(set(int(s) for s in suffixes)),
              num_actions=None if num_actions is None else int(num_actions),
              default_stack_size=replay_validity.STACK_SIZE,
              update_horizon=replay_validity.UPDATE_HORIZON)


def entry_dir(fields: dict, cache_dir: Optional[str] = None) -> str:
  """``<root>/frame_stores/<sha256 of the key fields, 32 hex digits>``."""
  key = hashlib.sha256(strict_json.dumps(fields, sort_keys=True).encode()).hexdigest()[:32]
  return os.path.join(cache_root(cache_dir), "frame_stores", key)


def _stderr(msg: str) -> None:
  print(msg, file=sys.stderr, flush=True)


def _crc32(arr: np.ndarray) -> int:
  flat = memoryview(np.ascontiguousarray(arr).reshape(-1).view(np.uint8))
  crc = 0
  for start in range(0, flat.nbytes, _CRC_CHUNK):
    crc = zlib.crc32(flat[start:start + _CRC_CHUNK], crc)
  return crc


# ---------------------------------------------------------------------- reading

def _read_manifest(entry: str) -> dict:
  path = os.path.join(entry, MANIFEST)
  try:
    with open(path) as f:
      manifest = json.load(f)
  except FileNotFoundError as e:
    raise CacheInvalid("corrupt", "{} is missing".format(path)) from e
  except (OSError, ValueError) as e:
    raise CacheInvalid("corrupt", "{} is unreadable: {}".format(path, e)) from e
  ok = isinstance(manifest, dict) and isinstance(manifest.get("arrays"), dict)
  source = manifest.get("source") if ok else None
  ok = ok and isinstance(source, dict) and isinstance(source.get("replay_dir"), str)
  ok = ok and isinstance(source.get("listing"), list) and isinstance(source.get("files"), dict)
  if not ok:
    raise CacheInvalid("corrupt", "{} is not a frame store manifest".format(path))
  return manifest


def check_source(manifest: dict,
                 source: Optional[replay_source.ReplaySource] = None) -> Optional[str]:
  """Raises CacheInvalid("stale", why) if the remote source no longer matches the
  manifest (one listing + one stat per recorded file). Returns a note instead
  when the source could not be reached (the entry is then used unchecked).
  ``source``: the caller's ``replay_source.ReplaySource``, whose listing of the recorded
  directory, when it has made one, is the one compared (:func:`_listing`)."""
  replay_dir = manifest["source"]["replay_dir"]
  try:
    listing = sorted(_listing(replay_dir, source))
  except replay_files.UnreachableError as e:
    return str(e)
  except replay_files.DatasetError as e:
    raise CacheInvalid("stale", "the source directory {} is gone ({})".format(replay_dir, e))
  recorded = manifest["source"]["listing"]
  if listing != recorded:
    added = sorted(set(listing) - set(recorded))
    removed = sorted(set(recorded) - set(listing))
    parts = []
    if added:
      parts.append("{} file(s) added, e.g. {}".format(len(added), added[0]))
    if removed:
      parts.append("{} file(s) removed, e.g. {}".format(len(removed), removed[0]))
    raise CacheInvalid("stale", "the listing of {} changed: {}".format(
        replay_dir, "; ".join(parts)))
  files = manifest["source"]["files"]
  try:
    now = replay_files.stat_names(replay_dir, sorted(files))
  except replay_files.UnreachableError as e:
    return str(e)
  except replay_files.DatasetError as e:
    raise CacheInvalid("stale", str(e))
  for name in sorted(files):
    if list(files[name]) != now[name]:
      raise CacheInvalid("stale", "{} changed (size, mtime_ns {} -> {})".format(
          os.path.join(replay_dir, name), files[name], now[name]))
  return None


def _listing(replay_dir: str, source: Optional[replay_source.ReplaySource]) -> Sequence[str]:
  """The names in the recorded ``replay_dir``: the listing ``source`` has already made of it
  (a run that checked its source before loading lists it once), else listed here (a missing
  directory then raises DatasetError naming it)."""
  names = source.listed(replay_dir) if source is not None else None
  return names if names is not None else replay_files.list_dir(replay_dir)


def load_entry(entry: str, manifest: dict) -> Cached:
  """The arrays of a cache entry; raises CacheInvalid("corrupt", why) for a missing,
  truncated or altered array file, or a missing stack size."""
  arrays = {}
  for name in ARRAYS:
    rec = manifest["arrays"].get(name)
    path = os.path.join(entry, name + ".npy")
    try:
      want_bytes, want_shape = int(rec["bytes"]), [int(d) for d in rec["shape"]]
      want_dtype, want_crc = str(rec["dtype"]), int(rec["crc32"])
    except (KeyError, TypeError, ValueError) as e:
      raise CacheInvalid("corrupt", "{} has no valid record of {}".format(
          os.path.join(entry, MANIFEST), path)) from e
    try:
      size = os.path.getsize(path)
    except OSError as e:
      raise CacheInvalid("corrupt", "{} is missing".format(path)) from e
    if size != want_bytes:
      raise CacheInvalid("corrupt", "{} has {} bytes, the manifest says {} (truncated?)".format(
          path, size, want_bytes))
    try:
      arr = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
      raise CacheInvalid("corrupt", "{} is unreadable: {}".format(path, e)) from e
    if list(arr.shape) != want_shape or arr.dtype.str != want_dtype:
      raise CacheInvalid("corrupt", "{} holds {} {}, the manifest says {} {}".format(
          path, arr.dtype.str, list(arr.shape), want_dtype, want_shape))
    if _crc32(arr) != want_crc:
      raise CacheInvalid("corrupt", "{}: CRC-32 mismatch (altered or damaged)".format(path))
    arrays[name] = arr
  try:
    return Cached(arrays, int(manifest["stack_size"]))
  except (KeyError, TypeError, ValueError) as e:
    raise CacheInvalid("corrupt", _not_a_store(entry, e)) from e


def _not_a_store(entry: str, error: Exception) -> str:
  """Why an entry whose arrays do not make a frame store is corrupt."""
  return "{}: the arrays do not make a frame store: {}".format(entry, error)


# ---------------------------------------------------------------------- writing

def _fsync_write(path: str, write: Callable) -> None:
  with open(path, "wb") as f:
    write(f)
    f.flush()
    os.fsync(f.fileno())


def _clean_leftovers(parent: str, key: str) -> None:
  """Removes ``.tmp-<key>-<pid>-*`` directories of processes that are gone
  (a build killed while writing); never used, only wasted space."""
  try:
    names = os.listdir(parent)
  except OSError:
    return
  for n in names:
    if not n.startswith(".tmp-{}-".format(key)):
      continue
    try:
      pid = int(n.split("-")[2])
      os.kill(pid, 0)
      continue  # still running (maybe writing this very entry)
    except ProcessLookupError:
      pass
    except (ValueError, IndexError, PermissionError, OSError):
      continue
    shutil.rmtree(os.path.join(parent, n), ignore_errors=True)


def write_entry(entry: str, cached: Cached, manifest: dict,
                say: Callable[[str], None]) -> bool:
  """Writes ``cached`` + ``manifest`` to ``entry`` atomically (temp dir + rename).
  Returns False (after saying why) if that was not possible; the run goes on."""
  parent, key = os.path.split(entry)
  tmp = None
  try:
    os.makedirs(parent, exist_ok=True)
    _clean_leftovers(parent, key)
    tmp = tempfile.mkdtemp(prefix=".tmp-{}-{}-".format(key, os.getpid()), dir=parent)
    records = {}
    for name in ARRAYS:
      arr = np.ascontiguousarray(cached.arrays[name])
      path = os.path.join(tmp, name + ".npy")
      _fsync_write(path, lambda f, a=arr: np.save(f, a, allow_pickle=False))
      records[name] = dict(file=name + ".npy", shape=list(arr.shape), dtype=arr.dtype.str,
                           bytes=os.path.getsize(path), crc32=_crc32(arr))
    manifest = dict(manifest, arrays=records, stack_size=int(cached.stack_size))
    _fsync_write(os.path.join(tmp, MANIFEST),
                 lambda f: f.write(strict_json.dumps(manifest, indent=1, sort_keys=True).encode()))
    try:
      os.rename(tmp, entry)
    except OSError:
      if os.path.isdir(entry):  # another process finished the same entry first
        return True
      raise
    tmp = None
    nbytes = sum(cached.arrays[name].nbytes for name in ARRAYS)
    say("Cached the frame store in {} ({:.1f} MiB).".format(entry, nbytes / 2**20))
    return True
  except OSError as e:
    say("Could not write the frame store cache {}: {}; continuing without it.".format(entry, e))
    return False
  finally:
    if tmp is not None:
      shutil.rmtree(tmp, ignore_errors=True)


# ------------------------------------------------------------------ get / put

def get(fields: dict, cache_dir: Optional[str] = None,
        say: Optional[Callable[[str], None]] = None,
        source: Optional[replay_source.ReplaySource] = None) -> Optional[Cached]:
  """The arrays cached under ``fields`` (``key_fields``), or None: no entry, or one
  that is stale or corrupt (said with the reason, and removed). See the module notes
  for what is checked; ``source``: :func:`check_source`'s."""
  say = say if say is not None else _stderr
  entry = entry_dir(fields, cache_dir)
  if not os.path.isdir(entry):
    return None
  try:
    manifest = _read_manifest(entry)
    if manifest.get("key") != fields:
      raise CacheInvalid("corrupt", "{} was made for other settings ({})".format(
          entry, manifest.get("key")))
    try:
      note = check_source(manifest, source)
    except (KeyError, TypeError, ValueError) as e:
      raise CacheInvalid("corrupt", "{}: malformed source record: {!r}".format(
          os.path.join(entry, MANIFEST), e)) from e
    t0 = time.time()
    cached = load_entry(entry, manifest)
  except CacheInvalid as e:
    _drop(entry, e, say)
    return None
  if note is not None:
    checked = "not checked against the source: {}".format(note)
  else:
    checked = "source listing and {} file sizes unchanged".format(
        len(manifest["source"]["files"]))
  say("Using the cached frame store {} of {} (subset {}; {} transitions; {}; loaded in "
      "{:.1f} s).".format(entry, manifest["source"]["replay_dir"], fields["subset"],
                          int(cached.arrays["valid"].shape[0]), checked, time.time() - t0))
  return cached


def source_record(dir_info: dqn_replay.DirInfo, subset: str, plan: List[tuple]) -> dict:
  """The identity of the source a store is built from: the directory's listing (as
  ``dqn_replay.inspect_dir`` made it) and the size and mtime of every file loading
  ``plan`` reads. Call it before reading, so that a change while reading shows as
  stale next time."""
  names = replay_files.files_read(dir_info.names, [p[0] for p in plan])
  return dict(replay_dir=dir_info.replay_dir, subset=subset, plan=[list(p) for p in plan],
              listing=list(dir_info.names),
              files=replay_files.stat_names(dir_info.replay_dir, names))


def put(fields: dict, cached: Cached, source: dict, cache_dir: Optional[str] = None,
        say: Optional[Callable[[str], None]] = None) -> bool:
  """Caches ``cached`` under ``fields`` with its ``source`` (``source_record``).
  Returns False (after saying why) if it could not be written; nothing else fails."""
  say = say if say is not None else _stderr
  manifest = dict(key=fields, created=time.strftime("%Y-%m-%dT%H:%M:%S%z"), source=source)
  return write_entry(entry_dir(fields, cache_dir), cached, manifest, say)


def reject(fields: dict, error: Exception, cache_dir: Optional[str] = None,
           say: Optional[Callable[[str], None]] = None) -> None:
  """Removes the entry under ``fields`` whose arrays the frame store refused with
  ``error``, saying so as ``get`` says of a corrupt entry."""
  entry = entry_dir(fields, cache_dir)
  _drop(entry, CacheInvalid("corrupt", _not_a_store(entry, error)),
        say if say is not None else _stderr)


def _drop(entry: str, invalid: CacheInvalid, say: Callable[[str], None]) -> None:
  what = "is stale" if invalid.kind == "stale" else "is truncated or corrupt"
  say("The frame store cache {} {}: {}; rebuilding it.".format(entry, what, invalid.why))
  shutil.rmtree(entry, ignore_errors=True)
