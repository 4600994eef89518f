"""Checkpoint-pool benchmark (data/replay_pool.py): memory per transition and swap time.

``python -m ccvl_tf.bench.pool [--checkpoints=6] [--capacity=10000] [--pool=2] [--swaps=4]``
writes a run of ``checkpoints`` Dopamine checkpoints of ``capacity`` slots with the project's
writer (frames: the testdata's Breakout frames, repeated, so that they compress like Atari
frames; episodes of 1,000 steps), makes a pool of ``pool`` of them and times ``swaps`` draws.
Prints one JSON object:

  survey_s                   making the pool: every checkpoint's small arrays read once
  swap_s                     each draw's read (frames decompressed into the pool's store)
  swap_frames_per_s          frames read per second of swap, the mean over the swaps
  bytes_per_transition       the pool store's nbytes / its transitions
  pool_bytes                 the pool store's nbytes, per draw
  rss_after_swap_bytes       resident memory after each swap (flat: one draw in memory)
  swap_s_per_1m_checkpoint   one DQN Replay checkpoint (1M slots) at the measured frames per
                             second (a draw of K of them: K times that)

The records of the files verified (``replay_files.cache_root``) go to the temporary directory,
not the user's cache.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

from ccvl_tf.bench.data import _rss_bytes
from ccvl_tf.data import dqn_replay, replay_files, replay_pool, replay_writer
from ccvl_tf.runtime import strict_json

TESTDATA = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "testdata", "dqn_replay", "Breakout", "1", "replay_logs")
EPISODE_LENGTH = 1000


def write_run(out_dir: str, checkpoints: int, capacity: int) -> None:
  """A run of ``checkpoints`` logged buffers of ``capacity`` slots (the last one the final,
  partial buffer) of Breakout frames from the testdata."""
  frames = dqn_replay.load_checkpoint(TESTDATA, 0).observation  # uint8 [1000, 84, 84]
  frames = frames[frames.reshape(len(frames), -1).any(axis=1)]  # without the zero padding
  w = replay_writer.DopamineReplayWriter(out_dir, replay_capacity=capacity)
  step = 0
  while w.log_count < checkpoints - 1 or step % capacity < capacity // 2:
    w.add(frames[step % len(frames)], step % 4, 0.0, step % EPISODE_LENGTH == EPISODE_LENGTH - 1)
    step += 1
  w.close()


def run(checkpoints: int = 6, capacity: int = 10_000, pool: int = 2, swaps: int = 4,
        work_dir: str = "") -> dict:
  with tempfile.TemporaryDirectory(dir=work_dir or None) as tmp:
    before = os.environ.get(replay_files.CACHE_ENV)
    os.environ[replay_files.CACHE_ENV] = os.path.join(tmp, "cache")
    try:
      return _measure(os.path.join(tmp, "Breakout", "1", "replay_logs"), checkpoints,
                      capacity, pool, swaps)
    finally:
      if before is None:
        os.environ.pop(replay_files.CACHE_ENV, None)
      else:
        os.environ[replay_files.CACHE_ENV] = before


def _measure(d: str, checkpoints: int, capacity: int, pool: int, swaps: int) -> dict:
  t0 = time.perf_counter()
  write_run(d, checkpoints, capacity)
  write_s = time.perf_counter() - t0
  t0 = time.perf_counter()
  p = replay_pool.CheckpointPool([d], "all", pool, 1, seed=0)
  survey_s = time.perf_counter() - t0
  rss, nbytes, per_transition, frames = [], [], [], []
  for j in range(swaps):
    store = p.store_of_draw(j)
    nbytes.append(store.nbytes)
    per_transition.append(store.bytes_per_transition)
    frames.append(store.num_frames)
    del store
    rss.append(_rss_bytes())
  fps = float(np.mean([f / s for f, s in zip(frames, p.swap_seconds)]))
  return dict(checkpoints=checkpoints, capacity=capacity, pool=pool,
              files_bytes=sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d)),
              write_s=round(write_s, 2), survey_s=round(survey_s, 2),
              swap_s=[round(s, 3) for s in p.swap_seconds], swap_frames_per_s=round(fps),
              bytes_per_transition=[round(b, 1) for b in per_transition], pool_bytes=nbytes,
              rss_after_swap_bytes=rss,
              swap_s_per_1m_checkpoint=round(dqn_replay.DQN_REPLAY_CAPACITY / fps, 1))


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--checkpoints", type=int, default=6)
  parser.add_argument("--capacity", type=int, default=10_000)
  parser.add_argument("--pool", type=int, default=2)
  parser.add_argument("--swaps", type=int, default=4)
  parser.add_argument("--work_dir", default="", help="where the run is written (a temporary "
                      "directory there, removed after)")
  args = parser.parse_args()
  print(strict_json.dumps(run(args.checkpoints, args.capacity, args.pool, args.swaps,
                              args.work_dir), indent=1))


if __name__ == "__main__":
  main()
