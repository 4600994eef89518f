"""tools/same_weights.py: network tensors compared across a renumbering (hand-made checkpoints)."""
import numpy as np
import pytest

from tools import same_weights


def test_compare_sets_aside_a_shape_the_other_lacks_and_pairs_the_rest():
  w, b, knots = np.arange(6.0).reshape(2, 3), np.ones(3), np.linspace(0, 1, 17)
  r = same_weights.compare([w, b], [w, knots, b])
  assert (r["compared"], r["equal"], r["max_abs_diff"]) == (2, 2, 0.0)
  assert r["only_a"] == [] and len(r["only_b"]) == 1 and r["only_b"][0].shape == (17,)
  moved = b.copy()
  moved[1] += 0.25
  r = same_weights.compare([w, b], [w, knots, moved])
  assert (r["equal"], r["max_abs_diff"]) == (1, 0.25)


def test_compare_refuses_tensors_that_do_not_pair_in_order():
  with pytest.raises(ValueError, match="do not pair in order"):
    same_weights.compare([np.ones(2), np.ones(3)], [np.ones(3), np.ones(2)])


def test_main_on_checkpoints_renumbered_by_an_added_constant(tmp_path, capsys):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  def save(name, arrays):
    nets = {net: [tf.Variable(x) for x in arrays] for net in same_weights.NETWORKS}
    return tf.train.Checkpoint(**nets).write(str(tmp_path / name))

  w, b = np.arange(6.0, dtype=np.float32).reshape(2, 3), np.ones(3, np.float32)
  knots = np.linspace(0, 1, 17).astype(np.float32)
  old = save("old", [w, b])
  assert same_weights.main(["same_weights", old, save("new", [w, knots, b])]) == 0
  out = capsys.readouterr().out
  assert "online: 2 of 2 tensors bit-identical" in out and "shape (17,)" in out
  assert same_weights.main(["same_weights", old, save("moved", [w, knots, b * 2])]) == 1
  assert "target: 1 of 2 tensors bit-identical, largest |difference| 1" in capsys.readouterr().out
