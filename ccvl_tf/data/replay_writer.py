"""Writing DQN Replay (Dopamine) checkpoints, and collecting them by running a policy.

:class:`DopamineReplayWriter` writes the format :mod:`ccvl_tf.data.dqn_replay` reads (that
module describes it); :func:`collect` runs a policy in an environment into a writer;
:func:`random_policy` is the random policy binaries/collect_dataset.py offers (an exported
policy: ``ccvl_tf.evaluation.rollouts.saved_model_policy``, loaded with the evaluation's checks).
"""
from __future__ import annotations

import gzip
import os
import io
import pickle
import struct
import time
import zlib
from typing import Callable, List, Optional

import numpy as np

from ccvl_tf.data import dqn_replay
from ccvl_tf.data import replay_validity
from ccvl_tf.data import replay_files
from ccvl_tf.runtime import strict_json


def _save_gz(path: str, value, zero_rows_from: Optional[int] = None) -> None:
  """Writes ``np.save`` into a gzip file like Dopamine, atomically; never
  overwrites an existing file; records it as verified (``replay_files.remember_written``). ``zero_rows_from``: the array's rows from this index on are
  all zero (the part of a final buffer after its cursor), compressed without reading them
  (`_write_npy_gz`)."""
  if os.path.exists(path):
    raise FileExistsError("refusing to overwrite {}".format(path))
  tmp = path + ".tmp"
  with open(tmp, "wb") as f:
    if isinstance(value, np.ndarray):
      _write_npy_gz(f, value, zero_rows_from)
    else:
      with gzip.GzipFile(fileobj=f, mode="wb", compresslevel=6) as out:
        pickle.dump(value, out)
  os.replace(tmp, path)
  replay_files.remember_written(path)


# Bytes fed to the compressor at a time, and the zero block compressed once and repeated.
_CHUNK = 1 << 24
_ZERO_BLOCK = 1 << 20


def _zero_block_deflated() -> bytes:
  """_ZERO_BLOCK zero bytes as raw deflate data that starts and ends on a byte boundary with an
  empty history (Z_FULL_FLUSH, no final block), so that copies of it can follow each other and
  any other data ending in a full flush."""
  c = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
  return c.compress(bytes(_ZERO_BLOCK)) + c.flush(zlib.Z_FULL_FLUSH)


def _write_npy_gz(f, arr: np.ndarray, zero_rows_from: Optional[int] = None) -> None:
  """A one-member gzip file (RFC 1952, deflate level 6) of exactly the bytes np.save writes for
  `arr`. A final buffer is stored at the full capacity (1,000,000 slots, ~7 GB of frames for
  Atari) and is mostly zeros after its cursor: with `zero_rows_from` those rows are not read or
  compressed again but written as copies of one compressed zero block (gzip of the whole array
  took 21.6 s for 50,000 transitions; the CRC-32 over the zeros is all that remains)."""
  arr = arr if arr.flags.c_contiguous else arr.copy(order="C")  # (keeps a 0-d array 0-d)
  header = io.BytesIO()
  np.lib.format.write_array_header_1_0(header, np.lib.format.header_data_from_array_1_0(arr))
  data = memoryview(arr.reshape(-1)).cast("B")                  # the array's bytes, no copy
  row = arr.nbytes // max(len(arr), 1) if arr.ndim else arr.nbytes
  split = arr.nbytes if zero_rows_from is None or arr.ndim == 0 else \
      min(max(int(zero_rows_from), 0), len(arr)) * row
  comp = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
  f.write(b"\x1f\x8b\x08\x00" + struct.pack("<I", 0) + b"\x00\xff")  # no name, mtime 0
  crc = zlib.crc32(header.getvalue())
  f.write(comp.compress(header.getvalue()))
  for start in range(0, split, _CHUNK):
    chunk = data[start:min(start + _CHUNK, split)]
    crc = zlib.crc32(chunk, crc)
    f.write(comp.compress(chunk))
  zeros = arr.nbytes - split
  if zeros:
    f.write(comp.flush(zlib.Z_FULL_FLUSH))
    block, zero = _zero_block_deflated(), bytes(_ZERO_BLOCK)
    for _ in range(zeros // _ZERO_BLOCK):
      crc = zlib.crc32(zero, crc)
      f.write(block)
    rest = bytes(zeros % _ZERO_BLOCK)
    crc = zlib.crc32(rest, crc)
    f.write(comp.compress(rest))
  f.write(comp.flush(zlib.Z_FINISH))
  size = len(header.getvalue()) + arr.nbytes
  f.write(struct.pack("<II", crc & 0xFFFFFFFF, size & 0xFFFFFFFF))


class DopamineReplayWriter:
  """Writes Dopamine replay checkpoints the way the DQN Replay Dataset was made.

  Mirrors batch_rl ``OutOfGraphLoggedReplayBuffer`` on Dopamine's
  ``OutOfGraphReplayBuffer``: circular storage of ``replay_capacity`` slots;
  ``add`` pads an episode start with ``stack_size - 1`` zero transitions; the
  buffer is logged to suffix ``log_count`` whenever ``add_count % capacity ==
  capacity - 1``; :meth:`close` logs the final (partial) buffer with
  ``add_count`` set to the cursor. Refuses to write into a directory that already
  holds checkpoint files.

  Rewards must lie in [-1, 1] (stored clipped, as Dopamine does) unless ``metadata`` says
  ``reward_clipping=False``, which the record keeps for the readers.

  ``observation_shape`` is the shape of what one slot stores ([84, 84] Atari
  frames; MinAtar: the whole [10, 10, C] observation with ``stack_size=1``, so
  no episode-start padding). ``close`` records ``stack_size`` and
  ``observation_shape`` in ``ccvl_dataset.json`` for the readers.
  """

  def __init__(self, output_dir: str, replay_capacity: int = dqn_replay.DQN_REPLAY_CAPACITY,
               stack_size: int = replay_validity.STACK_SIZE, observation_shape=(84, 84),
               metadata: Optional[dict] = None):
    if replay_capacity < stack_size + replay_validity.UPDATE_HORIZON:
      raise ValueError("replay_capacity too small")
    os.makedirs(output_dir, exist_ok=True)
    existing = sorted(n for n in os.listdir(output_dir)
                      if replay_files.CKPT_RE.match(n) or n == replay_files.METADATA_FILENAME)
    if existing:
      raise FileExistsError("{} already holds a dataset ({} ...); refusing to write over "
                            "it".format(output_dir, existing[0]))
    self._dir = output_dir
    self._cap = replay_capacity
    self._k = stack_size
    self._obs = np.zeros((replay_capacity,) + tuple(observation_shape), np.uint8)
    self._action = np.zeros((replay_capacity,), np.int32)
    self._reward = np.zeros((replay_capacity,), np.float32)
    self._terminal = np.zeros((replay_capacity,), np.uint8)
    self.add_count = 0
    self.invalid_range = np.zeros((stack_size,))
    self.log_count = 0
    self._metadata = dict(metadata or {})
    self._clipped_rewards = self._metadata.get("reward_clipping") is not False
    self._closed = False
    self.written_suffixes: List[int] = []

  def cursor(self) -> int:
    return self.add_count % self._cap

  def _add(self, obs, action, reward, terminal) -> None:
    c = self.cursor()
    self._obs[c] = obs
    self._action[c] = action
    self._reward[c] = reward
    self._terminal[c] = terminal
    self.add_count += 1
    c = self.cursor()
    self.invalid_range = np.array([(c - replay_validity.UPDATE_HORIZON + i) % self._cap
                                   for i in range(self._k + replay_validity.UPDATE_HORIZON)])

  def add(self, frame: np.ndarray, action: int, reward: float, terminal: bool) -> None:
    """One transition: the single frame *before* ``action`` (``observation_shape``)
    and its outcome."""
    if self._closed:
      raise RuntimeError("writer is closed")
    if self._clipped_rewards and not -1.0 <= float(reward) <= 1.0:
      raise ValueError(f"reward {reward!r} is outside [-1, 1]: the replay format stores "
                       f"clipped rewards (Dopamine clips them before storing, and the readers "
                       f"refuse others); clip it first, or give metadata "
                       f"reward_clipping=False")
    if self.add_count == 0 or self._terminal[self.cursor() - 1] == 1:
      for _ in range(self._k - 1):
        self._add(0, 0, 0.0, 0)
    self._add(frame, action, reward, 1 if terminal else 0)
    if self.add_count % self._cap == self._cap - 1:
      self._log()

  def _log(self, add_count: Optional[int] = None) -> None:
    suffix = self.log_count
    ac = self.add_count if add_count is None else add_count
    store = replay_files.STORE_PREFIX
    items = [(store + "observation", self._obs), (store + "action", self._action),
             (store + "reward", self._reward), (store + "terminal", self._terminal),
             ("add_count", np.array(ac)), ("invalid_range", np.asarray(self.invalid_range))]
    # Slots from add_count on were never written (zeros) until the buffer wraps.
    zero_from = self.add_count if self.add_count < self._cap else None
    for name, arr in items:
      _save_gz(replay_files.checkpoint_path(self._dir, name, suffix), arr,
               zero_rows_from=zero_from if arr.ndim and len(arr) == self._cap else None)
    self.written_suffixes.append(suffix)
    self.log_count += 1

  def close(self) -> List[int]:
    """Logs the final buffer (batch_rl ``log_final_buffer``) and the metadata.
    Returns the suffixes written."""
    if self._closed:
      return self.written_suffixes
    if self.add_count % self._cap != self._cap - 1 or not self.written_suffixes:
      self._log(add_count=self.cursor())
    meta = dict(self._metadata, replay_capacity=self._cap, stack_size=self._k,
                observation_shape=list(self._obs.shape[1:]),
                suffixes=self.written_suffixes, format=dqn_replay.WRITER_FORMAT)
    path = os.path.join(self._dir, replay_files.METADATA_FILENAME)
    with open(path + ".tmp", "w") as f:
      strict_json.dump(meta, f, indent=1, sort_keys=True)
    os.replace(path + ".tmp", path)
    self._closed = True
    return self.written_suffixes

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()


# ------------------------------------------------------------------- collection

def random_policy(num_actions: int, seed: int = 0) -> Callable:
  rng = np.random.default_rng(seed)
  return lambda time_step: int(rng.integers(num_actions))


def collect(env, policy: Callable, num_steps: int, writer: DopamineReplayWriter, *,
            progress: Optional[Callable[[dict], None]] = None,
            progress_every: int = 1000) -> dict:
  """Runs ``policy`` in ``env`` (an :class:`ccvl_tf.envs.atari.AtariEnvironment`)
  for ``num_steps`` agent steps and adds each transition to ``writer`` the way
  Dopamine's DQN agent stores it: (latest single frame before the action, action,
  clipped reward, terminal) with terminal = 1 at every episode end (game over or
  the 27k-step cap, as in the DQN Replay Dataset). Episodes cut off by
  ``num_steps`` end without a terminal flag. Returns a summary dict.
  """
  t0 = time.time()
  time_step = env.reset()
  episode_returns: List[float] = []
  for step in range(num_steps):
    frame = np.asarray(time_step.observation)[..., -1]
    action = policy(time_step)
    next_ts = env.step(action)
    done = bool(next_ts.is_last())
    writer.add(frame, action, float(next_ts.reward), done)
    if done:
      episode_returns.append(env.episode_raw_return)
      time_step = env.reset()
    else:
      time_step = next_ts
    if progress is not None and ((step + 1) % progress_every == 0 or step + 1 == num_steps):
      el = time.time() - t0
      progress(dict(step=step + 1, num_steps=num_steps, steps_per_s=(step + 1) / max(el, 1e-9),
                    eta_s=(num_steps - step - 1) * el / (step + 1),
                    episodes=len(episode_returns),
                    mean_return=float(np.mean(episode_returns)) if episode_returns else None))
  return dict(steps=num_steps, episodes=len(episode_returns),
              episode_returns=episode_returns, seconds=time.time() - t0)
