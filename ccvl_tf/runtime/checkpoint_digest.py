"""A checkpoint's weights as one hash: sha256 over every tensor (name and bytes, in name
order), leaving out the object graph and the Keras configs (JSON text, not weights).

Two trainings that should be bit-identical are compared by this digest (the reproducibility
tests, tools/determinism_cost.py).
"""
from __future__ import annotations

import hashlib

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np
import tensorflow as tf


def digest(path: str) -> str:
  """sha256 (hex) over the tensors of the checkpoint at ``path`` (a prefix such as
  ``.../ckpt-30``)."""
  reader = tf.train.load_checkpoint(path)
  out = hashlib.sha256()
  for key in sorted(reader.get_variable_to_shape_map()):
    if key.endswith("OBJECT_CONFIG_JSON") or key == "_CHECKPOINTABLE_OBJECT_GRAPH":
      continue
    out.update(key.encode())
    out.update(np.asarray(reader.get_tensor(key)).tobytes())
  return out.hexdigest()
