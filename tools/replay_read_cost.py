"""What the replay reader reads and caches, measured on synthetic data (docs/data.md, "What a
subset reads" and `ccvl_tf/data/store_cache.py`):

  .venv/bin/python tools/replay_read_cost.py reads [--subsets=1%,10%,initial2,all]
  .venv/bin/python tools/replay_read_cost.py cache [--frames=100000] [--random_frames]

`reads`: a run written by replay_writer (5 full checkpoints of 1,000 random 84x84 frames and
the final partial buffer) with its own subset table (1% = [10, null], 10% = [100, null],
initial2 = [null, 2], all), copied to ram:// (TensorFlow's in-memory file system, the code
path of gs://); per subset, its first use (nothing verified yet: the cache root is emptied
before each) counts the files opened and the bytes read through a counting tf.io.gfile.GFile.

`cache`: a frame store's arrays (the testdata's Breakout frames tiled to --frames, or random
bytes) put into the frame store cache and loaded back, both ways ($CCVL_STORE_CACHE
uncompressed and compressed): size on disk, write time, best of 3 load times (page cache warm).
Everything is written under a temporary directory and removed.
"""
import argparse
import collections
import gzip
import os
import shutil
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import ccvl_tf  # noqa: E402,F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
import numpy as np  # noqa: E402

from ccvl_tf.data import replay_files, replay_plan, replay_writer, store_cache  # noqa: E402

TESTDATA = os.path.join(ROOT, "testdata", "dqn_replay", "Breakout", "1", "replay_logs")
SUBSETS = {"1%": [10, None], "10%": [100, None], "initial2": [None, 2], "all": [None, None]}


def reads(subsets, tmp: str) -> None:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from ccvl_tf.data.frame_store import FrameStore  # pylint: disable=g-import-not-at-top
  os.environ[replay_files.CACHE_ENV] = os.path.join(tmp, "cache")
  run = os.path.join(tmp, "run")
  rng = np.random.default_rng(0)
  w = replay_writer.DopamineReplayWriter(run, replay_capacity=1000,
                                         metadata={"subsets": SUBSETS})
  for i in range(5 * 1000 - 20):
    w.add(rng.integers(0, 256, (84, 84), dtype=np.uint8), int(rng.integers(0, 4)), 0.0,
          i % 50 == 49)
  w.close()
  base = tf.io.gfile.GFile
  log = dict(opened=collections.Counter(), read=collections.Counter())

  class CountingGFile(base):

    def __init__(self, name, mode="r"):
      if "r" in mode:
        log["opened"][name] += 1
      super().__init__(name, mode)

    def read(self, n=-1):
      data = super().read(n)
      log["read"][self.name] += len(data)
      return data

  remote = "ram://replay_read_cost_{}".format(uuid.uuid4().hex)
  tf.io.gfile.makedirs(remote)
  for n in sorted(os.listdir(run)):
    with open(os.path.join(run, n), "rb") as f, base(remote + "/" + n, "wb") as g:
      g.write(f.read())
  tf.io.gfile.GFile = CountingGFile
  total = sum(tf.io.gfile.stat(remote + "/" + n).length for n in tf.io.gfile.listdir(remote))
  for subset in subsets:
    log["opened"].clear()
    log["read"].clear()
    shutil.rmtree(os.environ[replay_files.CACHE_ENV], ignore_errors=True)
    os.environ[store_cache.MODE_ENV] = store_cache.OFF
    t = time.time()
    store = FrameStore.from_replay(remote, subset, progress=lambda m: None)
    obs = [p for p in log["read"] if "observation" in p]
    print("subset {:9s} {:6,} frames: {} files opened ({} observation), {:.2f} of {:.2f} MB read "
          "(observation files: {:.2f} MB), {:.2f} s".format(
              subset, store.num_frames, len(log["opened"]), len(obs),
              sum(log["read"].values()) / 1e6, total / 1e6,
              sum(log["read"][p] for p in obs) / 1e6, time.time() - t))
  tf.io.gfile.GFile = base
  tf.io.gfile.rmtree(remote)


def cache(n: int, random_frames: bool, tmp: str) -> None:
  rng = np.random.default_rng(0)
  if random_frames:
    frames = rng.integers(0, 256, (n, 84, 84), dtype=np.uint8)
  else:
    real = np.concatenate([np.load(gzip.open(os.path.join(
        TESTDATA, "$store$_observation_ckpt.{}.gz".format(s)))) for s in range(3)])
    frames = np.concatenate([real] * -(-n // len(real)))[:n]
  arrays = dict(frames=frames, action=rng.integers(0, 4, n).astype(np.int32),
                reward=np.zeros(n, np.float32),
                terminal=(rng.random(n) < 0.01).astype(np.uint8),
                valid=np.arange(3, n - 1, dtype=np.int64))
  info, plan = replay_plan.select_plan(TESTDATA, "all")
  source = store_cache.source_record(info, "all", plan)
  key = store_cache.key_fields(TESTDATA, "all")
  for how in (store_cache.UNCOMPRESSED, store_cache.COMPRESSED):
    os.environ[store_cache.MODE_ENV] = how
    root = os.path.join(tmp, how)
    t = time.time()
    store_cache.put(key, store_cache.Cached(arrays, 4), source, root, lambda m: None)
    write = time.time() - t
    entry = store_cache.entry_dir(key, root)
    size = sum(os.path.getsize(os.path.join(entry, f)) for f in os.listdir(entry))
    best = float("inf")
    for _ in range(3):
      t = time.time()
      manifest = store_cache._read_manifest(entry)  # pylint: disable=protected-access
      got = store_cache.load_entry(entry, manifest)
      best = min(best, time.time() - t)
    assert all(np.array_equal(got.arrays[k], arrays[k]) for k in arrays)
    print("{:12s} {:,} {} frames ({:.1f} MB in memory): {:.1f} MB on disk, write {:.2f} s, "
          "load {:.2f} s".format(how, n, "random" if random_frames else "Breakout",
                                  sum(a.nbytes for a in arrays.values()) / 1e6, size / 1e6,
                                  write, best))
    shutil.rmtree(root)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("what", choices=("reads", "cache"))
  parser.add_argument("--subsets", default=",".join(SUBSETS))
  parser.add_argument("--frames", type=int, default=100_000)
  parser.add_argument("--random_frames", action="store_true")
  args = parser.parse_args(argv)
  unknown = [s for s in args.subsets.split(",") if s not in SUBSETS]
  if unknown:
    parser.error("--subsets: unknown {}; valid: {}".format(unknown, ", ".join(SUBSETS)))
  if args.frames < 4:
    parser.error("--frames must be >= 4, got {}".format(args.frames))
  tmp = tempfile.mkdtemp(prefix="replay_read_cost_")
  try:
    if args.what == "reads":
      reads(args.subsets.split(","), tmp)
    else:
      cache(args.frames, args.random_frames, tmp)
  finally:
    shutil.rmtree(tmp, ignore_errors=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
