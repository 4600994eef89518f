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
"""
from __future__ import annotations

from typing import Dict, Optional

import numpy as np
import tensorflow as tf

from ccvl_tf.data.frame_store import FrameStore

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

  def _np_sample(i):
    b = sample_batch(store, batch_size, seed, int(i))
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

  ds = tf.data.Dataset.counter(start=start_batch, dtype=tf.int64)
  ds = ds.map(_map, num_parallel_calls=num_parallel_calls or None, deterministic=True)
  return ds.prefetch(prefetch)


def transition_spec(batch_size: Optional[int] = None, frame_shape=(84, 84, 4)):
  """The element_spec of ``transition_dataset`` (for tf.function signatures);
  ``frame_shape`` is the stacked state's shape (``store.observation_shape``)."""
  b = (batch_size,)
  return dict(observation=tf.TensorSpec(b + tuple(frame_shape), tf.uint8),
              action=tf.TensorSpec(b, tf.int32), reward=tf.TensorSpec(b, tf.float32),
              next_observation=tf.TensorSpec(b + tuple(frame_shape), tf.uint8),
              terminal=tf.TensorSpec(b, tf.float32))
