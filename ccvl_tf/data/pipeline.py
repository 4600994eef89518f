"""Stage 5 of the replay data pipeline (docs/data.md): tf.data pipelines of transition
batches sampled from a :class:`FrameStore`.

Each element is the "Transition batches" dict of docs/CONTRACTS.md:
  observation      uint8   [B, 84, 84, 4]   (store.observation_shape; MinAtar [B, 10, 10, C])
  action           int32   [B]
  reward           float32 [B]
  next_observation uint8   [B, 84, 84, 4]   (same)
  terminal         float32 [B]   (1.0 at a true episode end)

Batches are sampled uniformly with replacement (as Dopamine's replay) by numpy
code inside ``tf.numpy_function``, in parallel map calls, then prefetched. The
batch with number ``i`` comes from ``np.random.default_rng([seed, i])``, so a
pipeline is deterministic for a seed whatever the parallelism, and
``start_batch`` resumes a stream exactly (e.g. after restoring a checkpoint).

``pool_dataset`` is the same stream over a ``replay_pool.CheckpointPool``: batch ``i`` from
the pool's draw ``i // N``, each draw made current between the last batch of the previous
draw and the first of its own (one draw in memory), so it too resumes exactly;
``PoolBatches`` iterates it raising a failed draw's own error (the damaged file named).
"""
from __future__ import annotations

from typing import Dict, Optional

import numpy as np
import tensorflow as tf

from ccvl_tf.data.frame_store import FrameStore
from ccvl_tf.data.replay_pool import CheckpointPool

KEYS = ("observation", "action", "reward", "next_observation", "terminal")


def sample_batch(store: FrameStore, batch_size: int, seed: int, batch_number: int
                 ) -> Dict[str, np.ndarray]:
  """The numpy batch that ``transition_dataset`` yields as batch ``batch_number``."""
  rng = np.random.default_rng([int(seed), int(batch_number)])
  return store.sample(batch_size, rng)


def transition_dataset(store: FrameStore, batch_size: int = 32, *, seed: int = 0,
                       start_batch: int = 0, num_parallel_calls: Optional[int] = 2,
                       prefetch: int = tf.data.AUTOTUNE) -> tf.data.Dataset:
  """An infinite ``tf.data.Dataset`` of transition-batch dicts (see module doc)."""
  frame_shape = tuple(store.observation_shape)  # e.g. (84, 84, 4) or (10, 10, C)
  _map = _batch_map(lambda i: store, batch_size, seed, frame_shape)
  ds = tf.data.Dataset.counter(start=start_batch, dtype=tf.int64)
  ds = ds.map(_map, num_parallel_calls=num_parallel_calls or None, deterministic=True)
  return ds.prefetch(prefetch)


def _batch_map(store_of, batch_size: int, seed: int, frame_shape):
  """batch number -> the batch dict of ``sample_batch(store_of(i), ...)``, for Dataset.map."""

  def _np_sample(i):
    b = sample_batch(store_of(int(i)), batch_size, seed, int(i))
    return tuple(b[k] for k in KEYS)

  def _map(i):
    out = tf.numpy_function(_np_sample, [i],
                            [tf.uint8, tf.int32, tf.float32, tf.uint8, tf.float32],
                            stateful=False)
    shapes = [(batch_size,) + frame_shape, (batch_size,), (batch_size,),
              (batch_size,) + frame_shape, (batch_size,)]
    for t, s in zip(out, shapes):
      t.set_shape(s)
    return dict(zip(KEYS, out))
  return _map


def pool_dataset(pool: CheckpointPool, batch_size: int = 32, *, seed: int = 0,
                 start_batch: int = 0, num_parallel_calls: Optional[int] = 2,
                 prefetch: int = tf.data.AUTOTUNE) -> tf.data.Dataset:
  """``transition_dataset`` over a checkpoint pool: batch ``i`` is ``sample_batch`` of the
  pool's draw ``i // pool.swap_steps`` (module doc). One ``flat_map`` element per draw: its
  function makes the draw current (``pool.activate``) and returns that draw's batches, sampled
  in parallel; ``flat_map`` asks for the next draw only when every batch of this one has been
  sampled, so a swap never happens under a batch being sampled. A new stream on the pool
  (another call of this function) makes this one stale."""
  frame_shape = tuple(pool.observation_shape)
  n = pool.swap_steps
  stream = pool.open_stream()
  _map = _batch_map(lambda i: pool.store_for_batch(stream, i), batch_size, seed, frame_shape)

  def _activate(j):
    pool.activate(stream, int(j))
    return np.int64(j)

  def _draw_batches(j):
    j = tf.numpy_function(_activate, [j], tf.int64, stateful=True)
    j.set_shape(())
    first = tf.maximum(j * n, tf.constant(start_batch, tf.int64))
    ds = tf.data.Dataset.range(first, (j + 1) * n)
    return ds.map(_map, num_parallel_calls=num_parallel_calls or None, deterministic=True)

  ds = tf.data.Dataset.counter(start=start_batch // n, dtype=tf.int64).flat_map(_draw_batches)
  return ds.prefetch(prefetch)


class PoolBatches:
  """The batches of :func:`pool_dataset` (same arguments) as a Python iterator, whose failed
  draw raises what the pool raised (``pool.failure``: a DatasetError naming the draw and the
  damaged file, one line) instead of the tf.data error that carries it with both tracebacks.
  That error is dropped, and the dataset's iterator with it, before the pool's is raised: its
  traceback would hold the iterator, whose threads run Python (tf.numpy_function), alive until
  the interpreter's exit, which then stalls."""

  def __init__(self, pool: CheckpointPool, batch_size: int = 32, **kwargs):
    self._pool = pool
    self._it = iter(pool_dataset(pool, batch_size, **kwargs))

  def __iter__(self):
    return self

  def __next__(self) -> Dict[str, tf.Tensor]:
    if self._it is None:
      raise StopIteration
    try:
      return next(self._it)
    except tf.errors.OpError:
      failure = self._pool.failure
      if failure is None:
        raise
    self._it = None  # the pipeline stops here, in this thread
    raise failure.with_traceback(None)


def transition_spec(batch_size: Optional[int] = None, frame_shape=(84, 84, 4)):
  """The element_spec of ``transition_dataset`` (for tf.function signatures);
  ``frame_shape`` is the stacked state's shape (``store.observation_shape``)."""
  b = (batch_size,)
  return dict(observation=tf.TensorSpec(b + tuple(frame_shape), tf.uint8),
              action=tf.TensorSpec(b, tf.int32), reward=tf.TensorSpec(b, tf.float32),
              next_observation=tf.TensorSpec(b + tuple(frame_shape), tf.uint8),
              terminal=tf.TensorSpec(b, tf.float32))
