"""Whether two checkpoints hold the same network weights, across commits that renumber them.

  python tools/same_weights.py RUN_A/checkpoints/ckpt-17500 RUN_B/checkpoints/ckpt-17500

A learner's checkpoint keys its networks' tensors by position ('online/7/...'); a commit that
adds a tensor to a network (a constant stored as a variable) shifts the positions after it, so
checkpoint_digest (names and bytes) tells two such checkpoints apart even when every weight is
the same. This compares, per network ('online', 'target'), the tensors in position order after
leaving out those whose shape the other checkpoint's network does not have at all (printed, with
their first values), and prints, per network, how many tensors are bit-identical and the largest
absolute difference. Exit status 0 when every compared tensor is identical, 1 otherwise.
"""
from __future__ import annotations

import sys
from typing import Dict, List

import numpy as np

NETWORKS = ("online", "target")


def network_tensors(reader) -> Dict[str, List[np.ndarray]]:
  """{network: [tensor in position order]} of a tf.train.CheckpointReader's networks."""
  by_net: Dict[str, Dict[int, np.ndarray]] = {}
  for key in reader.get_variable_to_shape_map():
    parts = key.split("/")
    if parts[0] in NETWORKS and parts[1].isdigit() and "OPTIMIZER" not in key:
      by_net.setdefault(parts[0], {})[int(parts[1])] = np.asarray(reader.get_tensor(key))
  return {net: [t[i] for i in sorted(t)] for net, t in by_net.items()}


def compare(a: List[np.ndarray], b: List[np.ndarray]) -> dict:
  """Tensors of one network in two checkpoints: those whose shape the other lacks set aside
  ('only_a', 'only_b'), the rest paired in order; 'equal' counts bit-identical pairs."""
  shapes_a, shapes_b = {x.shape for x in a}, {x.shape for x in b}
  only_a = [x for x in a if x.shape not in shapes_b]
  only_b = [x for x in b if x.shape not in shapes_a]
  kept_a = [x for x in a if x.shape in shapes_b]
  kept_b = [x for x in b if x.shape in shapes_a]
  if [x.shape for x in kept_a] != [x.shape for x in kept_b]:
    raise ValueError(f"the networks' tensors do not pair in order: shapes "
                     f"{[x.shape for x in kept_a]} vs {[x.shape for x in kept_b]}")
  equal = sum(bool(np.array_equal(x, y)) for x, y in zip(kept_a, kept_b))
  max_diff = max((float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64))))
                  for x, y in zip(kept_a, kept_b) if x.size), default=0.0)
  return {"compared": len(kept_a), "equal": equal, "max_abs_diff": max_diff,
          "only_a": only_a, "only_b": only_b}


def main(argv) -> int:
  if len(argv) != 3:
    print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
    return 2
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  a, b = (network_tensors(tf.train.load_checkpoint(p)) for p in argv[1:])
  same = True
  for net in NETWORKS:
    if net not in a or net not in b:
      print(f"{net}: in {'neither' if net not in a and net not in b else 'one'} checkpoint")
      same = False
      continue
    r = compare(a[net], b[net])
    for side, path in (("only_a", argv[1]), ("only_b", argv[2])):
      for x in r[side]:
        print(f"{net}: only in {path}: shape {x.shape}, first values {x.ravel()[:5].tolist()}")
    print(f"{net}: {r['equal']} of {r['compared']} tensors bit-identical, largest |difference| "
          f"{r['max_abs_diff']:.3g}")
    same = same and r["equal"] == r["compared"]
  return 0 if same else 1


if __name__ == "__main__":
  sys.exit(main(sys.argv))
