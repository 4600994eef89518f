"""Stage 4 of the replay data pipeline (docs/data.md), its local cache: the arrays of
frame stores built from remote replay directories, as a plain ``get`` / ``put``.

The frame store decides when to build and calls ``get`` and ``put``; this module never
builds nor imports it. More in docs/data.md "Module notes", `ccvl_tf/data/store_cache.py`.
"""
from __future__ import annotations

import concurrent.futures
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
# How entries are written: $CCVL_STORE_CACHE, one of MODES (an entry of either kind is read).
MODE_ENV = "CCVL_STORE_CACHE"
COMPRESSED, UNCOMPRESSED, OFF = "compressed", "uncompressed", "off"
MODES = (COMPRESSED, UNCOMPRESSED, OFF)
DEFAULT_MODE = COMPRESSED
ZLIB = "zlib"  # an array record's "compression": zlib streams of BLOCK_BYTES each
BLOCK_BYTES = 1 << 24  # bytes of an array per zlib stream, compressed / inflated in parallel
ZLIB_LEVEL = 1  # the fastest: frames compress well at any level, time does not


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


def mode() -> str:
  """``$CCVL_STORE_CACHE`` (default :data:`DEFAULT_MODE`): "compressed" (arrays as zlib
  streams), "uncompressed" (``.npy``) or "off" (no entry read or written). ValueError
  naming the variable for another value."""
  value = os.environ.get(MODE_ENV, "").strip().lower() or DEFAULT_MODE
  if value not in MODES:
    raise ValueError("${}={!r}: expected one of {}".format(
        MODE_ENV, os.environ.get(MODE_ENV), ", ".join(MODES)))
  return value


def _workers() -> int:
  return max(1, min(8, os.cpu_count() or 1))


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


def _inflate(path: str, rec: dict, out: np.ndarray) -> None:
  """Fills ``out`` from the zlib streams of ``path`` (sizes ``rec["blocks"]``, in order, each
  ``rec["block_bytes"]`` inflated, the last one the rest), in parallel, each thread reading its
  own stream (memory: the array and a few streams); CacheInvalid("corrupt") for a stream that
  does not inflate to its block."""
  dst = memoryview(out.reshape(-1).view(np.uint8))
  sizes = [int(n) for n in rec["blocks"]]
  block = int(rec["block_bytes"])
  starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).tolist()
  if (block < 1 or starts[-1] != os.path.getsize(path)
      or len(sizes) != max(1, -(-dst.nbytes // block))):
    raise CacheInvalid("corrupt", "{}: its {} zlib stream(s) of {} bytes in all do not make "
                       "an array of {} bytes".format(path, len(sizes), starts[-1], dst.nbytes))
  fd = os.open(path, os.O_RDONLY)
  try:
    def one(i: int) -> None:
      want = dst[i * block:(i + 1) * block]
      try:
        got = zlib.decompress(os.pread(fd, sizes[i], starts[i]))
      except zlib.error as e:
        raise CacheInvalid("corrupt", "{}: block {} does not inflate: {}".format(
            path, i, e)) from e
      if len(got) != want.nbytes:
        raise CacheInvalid("corrupt", "{}: block {} holds {} bytes, expected {}".format(
            path, i, len(got), want.nbytes))
      want[:] = got

    with concurrent.futures.ThreadPoolExecutor(_workers()) as pool:
      list(pool.map(one, range(len(sizes))))  # zlib and pread release the GIL
  finally:
    os.close(fd)


def _load_array(entry: str, name: str, rec) -> np.ndarray:
  """One array of an entry as its manifest record ``rec`` describes it (``.npy``, or zlib
  streams when ``rec["compression"]`` is "zlib"), its file size, shape and dtype checked, and
  its content: the CRC-32 of an ``.npy``, each zlib stream's Adler-32."""
  try:
    want_bytes, want_shape = int(rec["bytes"]), [int(d) for d in rec["shape"]]
    compression = rec.get("compression")
    want_dtype = str(rec["dtype"])
    want_crc = int(rec["crc32"]) if compression is None else None
    path = os.path.join(entry, os.path.basename(str(rec.get("file", name + ".npy"))))
    if compression not in (None, ZLIB) or (compression == ZLIB and not (
        isinstance(rec.get("blocks"), list) and isinstance(rec.get("block_bytes"), int))):
      raise ValueError(compression)
  except (KeyError, TypeError, ValueError, AttributeError) as e:
    raise CacheInvalid("corrupt", "{} has no valid record of {}".format(
        os.path.join(entry, MANIFEST), os.path.join(entry, name + ".npy"))) from e
  try:
    size = os.path.getsize(path)
  except OSError as e:
    raise CacheInvalid("corrupt", "{} is missing".format(path)) from e
  if size != want_bytes:
    raise CacheInvalid("corrupt", "{} has {} bytes, the manifest says {} (truncated?)".format(
        path, size, want_bytes))
  try:
    if compression == ZLIB:
      arr = np.empty(want_shape, np.dtype(want_dtype))
      _inflate(path, rec, arr)
    else:
      arr = np.load(path, allow_pickle=False)
  except (OSError, ValueError, EOFError, TypeError) as e:
    raise CacheInvalid("corrupt", "{} is unreadable: {}".format(path, e)) from e
  if list(arr.shape) != want_shape or arr.dtype.str != want_dtype:
    raise CacheInvalid("corrupt", "{} holds {} {}, the manifest says {} {}".format(
        path, arr.dtype.str, list(arr.shape), want_dtype, want_shape))
  # zlib streams carry their own Adler-32, checked as they inflate: no second pass
  if want_crc is not None and _crc32(arr) != want_crc:
    raise CacheInvalid("corrupt", "{}: CRC-32 mismatch (altered or damaged)".format(path))
  return arr


def load_entry(entry: str, manifest: dict) -> Cached:
  """The arrays of a cache entry; raises CacheInvalid("corrupt", why) for a missing,
  truncated or altered array file, or a missing stack size."""
  arrays = {name: _load_array(entry, name, manifest["arrays"].get(name)) for name in ARRAYS}
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


def _deflate_to(f, arr: np.ndarray) -> List[int]:
  """Writes the bytes of the C-contiguous ``arr`` to ``f`` as zlib streams of BLOCK_BYTES each
  (the last shorter), compressed in parallel and written in order as they come; returns the
  streams' sizes."""
  flat = memoryview(arr.reshape(-1).view(np.uint8))
  starts = range(0, max(flat.nbytes, 1), BLOCK_BYTES)
  sizes = []
  with concurrent.futures.ThreadPoolExecutor(_workers()) as pool:
    for data in pool.map(lambda i: zlib.compress(flat[i:i + BLOCK_BYTES], ZLIB_LEVEL), starts):
      f.write(data)
      sizes.append(len(data))
  return sizes


def write_entry(entry: str, cached: Cached, manifest: dict,
                say: Callable[[str], None], compress: bool = True) -> bool:
  """Writes ``cached`` + ``manifest`` to ``entry`` atomically (temp dir + rename): each
  array as zlib streams (``compress``) or an ``.npy`` file. Returns False (after saying
  why) if that was not possible; the run goes on."""
  parent, key = os.path.split(entry)
  tmp = None
  try:
    os.makedirs(parent, exist_ok=True)
    _clean_leftovers(parent, key)
    tmp = tempfile.mkdtemp(prefix=".tmp-{}-{}-".format(key, os.getpid()), dir=parent)
    records = {}
    for name in ARRAYS:
      arr = np.ascontiguousarray(cached.arrays[name])
      if compress:  # each stream checked by its own Adler-32 when it inflates
        path = os.path.join(tmp, name + ".zlib")
        sizes = []
        _fsync_write(path, lambda f, a=arr: sizes.extend(_deflate_to(f, a)))
        extra = dict(compression=ZLIB, block_bytes=BLOCK_BYTES, blocks=sizes)
      else:
        path = os.path.join(tmp, name + ".npy")
        _fsync_write(path, lambda f, a=arr: np.save(f, a, allow_pickle=False))
        extra = dict(crc32=_crc32(arr))
      records[name] = dict(file=os.path.basename(path), shape=list(arr.shape),
                           dtype=arr.dtype.str, bytes=os.path.getsize(path), **extra)
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
    ondisk = sum(r["bytes"] for r in records.values())
    say("Cached the frame store in {} ({:.1f} MiB{}).".format(
        entry, nbytes / 2**20, ", {:.1f} MiB compressed".format(ondisk / 2**20)
        if compress else ""))
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
  if mode() == OFF:
    return None
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
  """Caches ``cached`` under ``fields`` with its ``source`` (``source_record``), as
  :func:`mode` says (nothing when "off"). Returns False (after saying why) if it could not be
  written or the cache is off; nothing else fails."""
  say = say if say is not None else _stderr
  how = mode()
  if how == OFF:
    return False
  manifest = dict(key=fields, created=time.strftime("%Y-%m-%dT%H:%M:%S%z"), source=source)
  return write_entry(entry_dir(fields, cache_dir), cached, manifest, say,
                     compress=how == COMPRESSED)


def plan_text(fields: dict, cache_dir: Optional[str] = None) -> str:
  """What will become of a store built now, for the line announcing the build."""
  how = mode()
  if how == OFF:
    return "the frame store will not be cached (${}={})".format(MODE_ENV, OFF)
  return "the frame store will be cached{} in {}".format(
      " compressed" if how == COMPRESSED else "", entry_dir(fields, cache_dir))


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
