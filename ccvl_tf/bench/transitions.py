"""Own-data benchmark (data/transitions.py): memory per transition of a vector ``Transitions``
and the speed of its batches.

``python -m ccvl_tf.bench.transitions [--transitions=100000] [--batch_size=256] [--seconds=5]``
makes CartPole-shaped data (4 float observations, 2 actions; episodes of 10 to 500 steps, a
fifth of them cut by a time limit, the rest terminated) as per-step arrays, reads it with
``Transitions.from_arrays`` and prints one JSON object:

  transitions, episodes, stored_observations   N, E, M (M = N + the timed-out episodes)
  bytes_per_transition       Transitions.nbytes / N (observations + the per-transition arrays)
  nbytes                     Transitions.nbytes
  from_arrays_s              checking and deriving the transitions from the step arrays
  fingerprint_s              Transitions.fingerprint()
  batches_per_s              next() of Transitions.batches(batch_size, seed) in one thread
  transitions_per_s          batches_per_s x batch_size
  save_npz_s, from_npz_s     the .npz round trip (a temporary file)
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

from ccvl_tf.data.transitions import Transitions
from ccvl_tf.runtime import strict_json


def cartpole_steps(num_transitions: int, seed: int = 0) -> dict:
  """Per-step arrays of CartPole-shaped episodes (module doc) holding about
  ``num_transitions`` transitions."""
  rng = np.random.default_rng(seed)
  lengths, total = [], 0
  while total < num_transitions:
    lengths.append(int(rng.integers(10, 501)))
    total += lengths[-1]
  lengths = np.array(lengths)
  timed_out = rng.random(lengths.size) < 0.2
  t = int(lengths.sum())
  ends = np.cumsum(lengths) - 1
  terminals, timeouts = np.zeros(t, np.float32), np.zeros(t, np.float32)
  terminals[ends[~timed_out]] = 1
  timeouts[ends[timed_out]] = 1
  return dict(observations=rng.normal(size=(t, 4)).astype(np.float32),
              actions=rng.integers(0, 2, t), rewards=np.ones(t, np.float32),
              terminals=terminals, timeouts=timeouts)


def run(num_transitions: int = 100_000, batch_size: int = 256, seconds: float = 5.0) -> dict:
  """The measurements of the module doc."""
  steps = cartpole_steps(num_transitions)
  t0 = time.perf_counter()
  data = Transitions.from_arrays(**steps, source="cartpole-shaped")
  from_arrays_s = time.perf_counter() - t0
  t0 = time.perf_counter()
  data.fingerprint()
  fingerprint_s = time.perf_counter() - t0
  stream = data.batches(batch_size, seed=0)
  for _ in range(10):
    next(stream)
  n, t0 = 0, time.perf_counter()
  while time.perf_counter() - t0 < seconds:
    next(stream)
    n += 1
  batches_per_s = n / (time.perf_counter() - t0)
  with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "data.npz")
    t0 = time.perf_counter()
    data.save_npz(path)
    save_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    Transitions.from_npz(path)
    load_s = time.perf_counter() - t0
  return dict(
      transitions=data.num_transitions, episodes=data.num_episodes,
      stored_observations=int(data.observations.shape[0]),
      bytes_per_transition=round(data.nbytes / data.num_transitions, 1), nbytes=data.nbytes,
      from_arrays_s=round(from_arrays_s, 4), fingerprint_s=round(fingerprint_s, 4),
      batch_size=batch_size, batches_per_s=round(batches_per_s, 1),
      transitions_per_s=round(batches_per_s * batch_size), save_npz_s=round(save_s, 4),
      from_npz_s=round(load_s, 4), cpu_count=os.cpu_count())


def main(argv=None) -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--transitions", type=int, default=100_000)
  p.add_argument("--batch_size", type=int, default=256)
  p.add_argument("--seconds", type=float, default=5.0)
  a = p.parse_args(argv)
  print(strict_json.dumps(run(a.transitions, a.batch_size, a.seconds), indent=1))


if __name__ == "__main__":
  main()
