"""Data-side benchmark: frame-store sampling, memory per transition, ALE speed.

``run(quick=False) -> dict`` (called by binaries/benchmark.py, merged under "data"):
  stacked_transitions_per_s   numpy sampling from the FrameStore (batch 32, one
                              thread): observation + next_observation stacks built
  pipeline_transitions_per_s  the same through transition_dataset (tf.data,
                              2 parallel calls, prefetch), iterated in Python
  bytes_per_transition        FrameStore.nbytes / transitions (frames + per-slot arrays)
  store_500k_frames_bytes     bytes held by a 500k-frame store (measured when built,
                              i.e. quick=False; else bytes_per_transition x 500k)
  store_500k_rss_delta_bytes  resident-memory growth while building it (quick=False)
  ale_env_steps_per_s         AtariEnvironment("Breakout") agent steps/s (4 frames each,
                              max-pool, greyscale, 84x84 area resize, stacking), random actions
The synthetic store has episodes of 1,000 steps (3 padding frames each), like
the DQN Replay Dataset's mid-length episodes.
"""
from __future__ import annotations

import os
import time
from typing import Optional

import numpy as np

from ccvl_tf.data import pipeline
from ccvl_tf.data.frame_store import FrameStore
from ccvl_tf.envs import atari
from ccvl_tf.runtime import strict_json

EPISODE_LENGTH = 1000


def _rss_bytes() -> int:
  try:
    with open("/proc/self/status") as f:
      for line in f:
        if line.startswith("VmRSS:"):
          return int(line.split()[1]) * 1024
  except OSError:
    pass
  return -1


def synthetic_store(num_frames: int, seed: int = 0) -> FrameStore:
  """A store laid out like Dopamine logs: every episode = 3 zero frames + 1,000
  real frames, the last one terminal."""
  rng = np.random.default_rng(seed)
  frames = np.empty((num_frames, 84, 84), np.uint8)
  pattern = rng.integers(0, 256, (256, 84, 84), dtype=np.uint8)
  for s in range(0, num_frames, 256):  # touch every page with non-zero data
    frames[s:s + 256] = pattern[:min(256, num_frames - s)]
  period = EPISODE_LENGTH + 3
  pos = np.arange(num_frames) % period
  frames[pos < 3] = 0
  terminal = (pos == period - 1).astype(np.uint8)
  action = rng.integers(0, 4, num_frames).astype(np.int32)
  reward = np.zeros(num_frames, np.float32)
  slots = np.arange(3, num_frames - 1)
  valid = slots[pos[slots] >= 3]
  return FrameStore(frames, action, reward, terminal, valid)


def _sampling_rate(store: FrameStore, seconds: float, batch_size: int = 32) -> float:
  rng = np.random.default_rng(1)
  store.sample(batch_size, rng)
  n, t0 = 0, time.perf_counter()
  while time.perf_counter() - t0 < seconds:
    store.sample(batch_size, rng)
    n += batch_size
  return n / (time.perf_counter() - t0)


def _pipeline_rate(store: FrameStore, seconds: float, batch_size: int = 32) -> float:
  it = iter(pipeline.transition_dataset(store, batch_size, seed=0))
  for _ in range(5):
    next(it)
  n, t0 = 0, time.perf_counter()
  while time.perf_counter() - t0 < seconds:
    next(it)
    n += batch_size
  return n / (time.perf_counter() - t0)


def _ale_rate(steps: int) -> float:
  env = atari.AtariEnvironment("Breakout", seed=0)
  rng = np.random.default_rng(0)
  env.reset()
  t0 = time.perf_counter()
  for _ in range(steps):
    t = env.step(int(rng.integers(env.num_actions)))
    if t.is_last():
      env.reset()
  return steps / (time.perf_counter() - t0)


def run(quick: bool = False, *, num_frames: Optional[int] = None,
        seconds: Optional[float] = None, ale_steps: Optional[int] = None) -> dict:
  """The measurements above; the keyword arguments shrink them (tests)."""
  num_frames = num_frames or (50_000 if quick else 500_000)
  seconds = seconds or (1.0 if quick else 5.0)
  ale_steps = ale_steps or (500 if quick else 3000)
  rss0 = _rss_bytes()
  store = synthetic_store(num_frames)
  rss1 = _rss_bytes()
  out = dict(
      store_frames=store.num_frames,
      store_transitions=store.num_transitions,
      bytes_per_transition=round(store.bytes_per_transition, 1),
      bytes_per_frame=round(store.nbytes / store.num_frames, 1),
      stacked_transitions_per_s=round(_sampling_rate(store, seconds)),
      pipeline_transitions_per_s=round(_pipeline_rate(store, seconds)),
      ale_env_steps_per_s=round(_ale_rate(ale_steps)),
      cpu_count=os.cpu_count(),
      quick=quick,
  )
  if num_frames != 500_000:
    out["store_500k_frames_bytes"] = int(store.nbytes / store.num_frames * 500_000)
    out["store_500k_note"] = "extrapolated from a {}-frame store".format(num_frames)
  else:
    out["store_500k_frames_bytes"] = store.nbytes
    out["store_500k_rss_delta_bytes"] = rss1 - rss0 if rss0 > 0 else None
  out["store_500k_frames_gb"] = round(out["store_500k_frames_bytes"] / 1e9, 3)
  return out


if __name__ == "__main__":
  import json
  import sys
  import ccvl_tf  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  print(strict_json.dumps(run(quick="--quick" in sys.argv), indent=1))
