"""ccvl_tf/algorithm/networks.py: the Q-network contract, shared torso, features, validation, saving."""
import os

import ccvl_tf  # noqa: F401

import keras
import numpy as np
import pytest
import tensorflow as tf

from ccvl_tf.algorithm import networks

TINY_MLP = networks.QNetworkConfig(torso="mlp", mlp_units=(16,), n_cos=8, hidden_units=16)


def _frames(b, seed=0):
  return np.random.default_rng(seed).integers(0, 256, (b, 84, 84, 4), dtype=np.uint8)


@pytest.mark.parametrize("entry", ["features", "conv"])
def test_nature_contract_shapes(entry):
  net = networks.build_ccvl_network((84, 84, 4), np.uint8, 6,
                                    networks.QNetworkConfig(delta_entry=entry))
  obs = _frames(2)
  delta = np.array([[0.1, 0.5, 0.9], [0.2, 0.3, 0.4]], np.float32)      # [B=2, K=3]
  q = net.q_model({"observation": obs, "delta": delta})
  assert q.shape == (2, 3, 6) and q.dtype == tf.float32
  out = net.q_and_phi_model({"observation": obs, "delta": delta})
  assert out["q"].shape == (2, 3, 6) and out["phi"].shape == (2, 512)
  np.testing.assert_allclose(out["q"].numpy(), q.numpy(), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(net.phi_model({"observation": obs}).numpy(), out["phi"].numpy(),
                             rtol=1e-5, atol=1e-6)
  assert set(net.q_model.input.keys()) == {"observation", "delta"}
  assert net.phi_dim == 512


def test_iqn_placement_has_the_3136_wide_embedding():
  conv = networks.build_ccvl_network((84, 84, 4), np.uint8, 4,
                                     networks.QNetworkConfig(delta_entry="conv"))
  feat = networks.build_ccvl_network((84, 84, 4), np.uint8, 4, networks.QNetworkConfig())
  shapes = lambda n: {v.path.split("/")[0].split("_", 2)[-1]: tuple(v.shape)
                      for v in n.trainable_variables if v.path.endswith("kernel")}
  assert shapes(conv)["delta_embed"] == (64, 3136) and shapes(conv)["torso_dense"] == (3136, 512)
  # The default head: the product on the 512 torso features, then the output (no hidden layer).
  assert shapes(feat)["delta_embed"] == (64, 512) and "hidden" not in shapes(feat)
  assert shapes(feat)["q"] == (512, 4)


def test_each_delta_is_computed_independently_of_the_others():
  # Torso shared over K: Q at delta=0.3 must not depend on which other deltas are asked for.
  net = networks.build_ccvl_network((5,), np.float32, 3, TINY_MLP)
  obs = np.eye(5, dtype=np.float32)[:2]
  q3 = net.q_model({"observation": obs, "delta": np.array([[0.3, 0.7, 0.1]] * 2, np.float32)})
  q1 = net.q_model({"observation": obs, "delta": np.array([[0.3]] * 2, np.float32)})
  np.testing.assert_allclose(q3[:, :1].numpy(), q1.numpy(), rtol=1e-6, atol=1e-7)
  assert not np.allclose(q3[:, 0].numpy(), q3[:, 1].numpy())  # delta matters


def test_cosine_embedding_values():
  emb = networks.CosineEmbedding(3)(np.array([[0.5, 0.25]], np.float32)).numpy()
  # cos(pi * i * delta), i = 1..3
  np.testing.assert_allclose(emb[0, 0], np.cos(np.pi * np.array([1, 2, 3]) * 0.5), atol=1e-6)
  np.testing.assert_allclose(emb[0, 1], np.cos(np.pi * np.array([1, 2, 3]) * 0.25), atol=1e-6)


def test_torso_is_evaluated_once_per_state():
  net = networks.build_ccvl_network((84, 84, 4), np.uint8, 6, networks.QNetworkConfig())
  graph = tf.function(net.q_model).get_concrete_function(
      {"observation": tf.TensorSpec([None, 84, 84, 4], tf.uint8),
       "delta": tf.TensorSpec([None, None], tf.float32)}).graph
  convs = [op for op in graph.get_operations() if op.type == "Conv2D"]
  assert len(convs) == 3


@pytest.mark.parametrize("shape,dtype,torso,match", [
    ((84, 84), np.uint8, "nature", r"\(84, 84\)"),
    ((20, 20, 4), np.uint8, "nature", r"\(20, 20, 4\)"),
    ((84, 84, 4), np.float32, "nature", "float32"),
    ((3, 4), np.float32, "mlp", r"\(3, 4\)"),
    ((0,), np.float32, "mlp", r"\(0,\)"),
])
def test_bad_observation_specs_raise_naming_the_value(shape, dtype, torso, match):
  cfg = networks.QNetworkConfig(torso=torso, mlp_units=(4,))
  with pytest.raises(ValueError, match=match):
    networks.build_ccvl_network(shape, dtype, 4, cfg)


@pytest.mark.parametrize("cfg,match", [
    (networks.QNetworkConfig(torso="resnet"), "'resnet'"),
    (networks.QNetworkConfig(delta_entry="late"), "'late'"),
    (networks.QNetworkConfig(torso="mlp", delta_entry="conv"), "conv"),
    (networks.QNetworkConfig(n_cos=0), "n_cos"),
])
def test_bad_configs_raise(cfg, match):
  with pytest.raises(ValueError, match=match):
    networks.build_ccvl_network((8,), np.float32, 4, cfg)


def test_bad_num_actions_raise():
  with pytest.raises(ValueError, match="num_actions.*0"):
    networks.build_ccvl_network((8,), np.float32, 0, TINY_MLP)


def test_copy_weights_makes_identical_outputs():
  a = networks.build_ccvl_network((5,), np.float32, 3, TINY_MLP, name="a")
  b = networks.build_ccvl_network((5,), np.float32, 3, TINY_MLP, name="b")
  inputs = {"observation": np.eye(5, dtype=np.float32), "delta": np.full((5, 2), 0.4, np.float32)}
  assert not np.allclose(a.q_model(inputs).numpy(), b.q_model(inputs).numpy())
  networks.copy_weights(a, b)
  np.testing.assert_allclose(a.q_model(inputs).numpy(), b.q_model(inputs).numpy())


@pytest.mark.parametrize("head", networks.DELTA_HEADS)
def test_q_model_saves_and_reloads_as_savedmodel(tmp_path, head):
  net = networks.build_ccvl_network((5,), np.float32, 3, TINY_MLP, delta_head=head)
  inputs = {"observation": np.eye(5, dtype=np.float32)[:2],
            "delta": np.array([[0.2, 0.8]] * 2, np.float32)}
  expected = net.q_model(inputs).numpy()
  path = os.path.join(tmp_path, "q")
  net.q_model.export(path)  # Keras 3 -> SavedModel with a serving signature
  loaded = tf.saved_model.load(path)
  got = loaded.serve({k: tf.constant(v) for k, v in inputs.items()})
  np.testing.assert_allclose(got.numpy(), expected, rtol=1e-6)
  # And the native Keras format round-trips the custom layers.
  keras_path = os.path.join(tmp_path, "q.keras")
  net.q_model.save(keras_path)
  again = keras.models.load_model(keras_path)
  np.testing.assert_allclose(again(inputs).numpy(), expected, rtol=1e-6)


def test_same_shaped_layers_start_with_different_weights():
  # One Keras 3 initializer instance shared by layers gives same-shaped layers identical
  # initial kernels; each layer must get its own initializer.
  import keras as _keras
  _keras.utils.set_random_seed(0)
  net = networks.build_ccvl_network(
      (6,), "float32", 3,
      networks.QNetworkConfig(torso="mlp", mlp_units=(8, 8), n_cos=4, hidden_units=8))
  kernels = [v.numpy() for v in net.variables if v.shape == (8, 8) and "kernel" in v.path]
  assert len(kernels) >= 2
  for i in range(len(kernels)):
    for j in range(i + 1, len(kernels)):
      assert not np.allclose(kernels[i], kernels[j])


def test_flat_dense_is_dense_on_rank3_inputs_values_and_gradients():
  """FlatDense folds [B, K] before the matmul: same outputs and same kernel/bias gradients as
  keras.layers.Dense on [B, K, W] (sum over B and K of x^T dL/dy either way)."""
  rng = np.random.default_rng(0)
  x = tf.constant(rng.normal(size=(3, 5, 4)), tf.float32)                  # [B, K, W]
  flat = networks.FlatDense(2, activation="relu")
  dense = keras.layers.Dense(2, activation="relu")
  flat.build((None, None, 4))
  dense.build((None, None, 4))
  dense.set_weights(flat.get_weights())
  with tf.GradientTape(persistent=True) as tape:
    y_flat, y_dense = flat(x), dense(x)
    loss_flat = tf.reduce_sum(tf.square(y_flat - 0.1))
    loss_dense = tf.reduce_sum(tf.square(y_dense - 0.1))
  assert y_flat.shape == (3, 5, 2)
  np.testing.assert_allclose(y_flat.numpy(), y_dense.numpy(), rtol=1e-6, atol=1e-7)
  for g_f, g_d in zip(tape.gradient(loss_flat, flat.trainable_variables),
                      tape.gradient(loss_dense, dense.trainable_variables)):
    np.testing.assert_allclose(g_f.numpy(), g_d.numpy(), rtol=1e-5, atol=1e-6)
    assert float(tf.reduce_max(tf.abs(g_f))) > 0


# ---- the monotone delta head --------------------------------------------------------------------
def test_monotone_head_by_hand():
  # J = 2 pieces, A = 1: params (b, x_1, x_2) = (0.5, 0, log(e^2 - 1)) -> u = (log 2 / 2, 1).
  # Q(delta) = b + u_1 clip(2 delta, 0, 1) + u_2 clip(2 delta - 1, 0, 1):
  #   delta 0.25 -> 0.5 + 0.5 u_1 = 0.5 + log(2) / 4; delta 0.75 -> 0.5 + u_1 + 0.5 u_2
  #   = 1 + log(2) / 2.
  layer = networks.MonotoneDeltaHead(1, pieces=2)
  params = tf.constant([[0.5, 0.0, np.log(np.e ** 2 - 1)]], tf.float32)
  delta = tf.constant([[0.25, 0.75]])
  np.testing.assert_allclose(layer([params, delta]).numpy()[0, :, 0],
                             [0.5 + np.log(2) / 4, 1 + np.log(2) / 2], rtol=1e-6)
  # sign -1: ramps replaced by 1 - ramp: delta 0.25 -> b + 0.5 u_1 + u_2 = 1.5 + log(2) / 4;
  # delta 0.75 -> b + 0 u_1 + 0.5 u_2 = 1.0 (the reflection Q(0) + Q(1) - Q_up(delta)).
  down = networks.MonotoneDeltaHead(1, pieces=2, sign=-1)
  np.testing.assert_allclose(down([params, delta]).numpy()[0, :, 0],
                             [1.5 + np.log(2) / 4, 1.0], rtol=1e-6)
  # At delta 0.75 the ramps are (1, 0.5), so d Q / d x_j = ramp_j * sigmoid(x_j) / J:
  # x_1: 1 * 0.5 / 2 = 0.25; x_2: 0.5 * (1 - e^-2) / 2 (sigmoid(log(e^2 - 1)) = 1 - e^-2).
  with tf.GradientTape() as tape:
    tape.watch(params)
    q = layer([params, delta])[0, 1, 0]
  np.testing.assert_allclose(tape.gradient(q, params).numpy()[0],
                             [1.0, 0.25, 0.5 * (1 - np.exp(-2)) / 2], rtol=1e-5)


@pytest.mark.parametrize("head", ["monotone", "cosine_monotone"])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_monotone_head_is_monotone_in_delta_for_any_weights(sign, head):
  net = networks.build_ccvl_network((5,), np.float32, 4, TINY_MLP, delta_head=head,
                                    delta_sign=sign)
  rng = np.random.default_rng(0)
  for v in net.q_model.trainable_variables:  # arbitrary weights, large ones included
    v.assign(rng.normal(0, 3, v.shape).astype(np.float32))
  obs = rng.normal(size=(6, 5)).astype(np.float32)
  grid = np.sort(rng.uniform(1e-6, 1 - 1e-6, 200)).astype(np.float32)
  q = net.q_model({"observation": obs, "delta": np.tile(grid[None], (6, 1))}).numpy()
  steps = sign * np.diff(q, axis=1)                                  # [B, K-1, A]
  assert np.all(steps >= -1e-5), steps.min()
  assert np.max(steps) > 0  # not flat
  # phi(s) is the torso output, with no delta in it.
  out = net.q_and_phi_model({"observation": obs, "delta": np.tile(grid[None], (6, 1))})
  assert out["phi"].shape == (6, 16)


def test_monotone_head_needs_feature_entry_and_a_known_head():
  with pytest.raises(ValueError, match="delta_head='monotone' needs delta_entry='features'"):
    networks.build_ccvl_network((84, 84, 4), np.uint8, 3,
                                networks.QNetworkConfig(delta_entry="conv"),
                                delta_head="monotone")
  with pytest.raises(ValueError, match="'cosine_monotone' needs delta_entry='features'"):
    networks.build_ccvl_network((84, 84, 4), np.uint8, 3,
                                networks.QNetworkConfig(delta_entry="conv"),
                                delta_head="cosine_monotone")
  with pytest.raises(ValueError, match="delta_head must be one of"):
    networks.build_ccvl_network((5,), np.float32, 3, TINY_MLP, delta_head="spline")


def test_cosine_monotone_head_by_hand_and_its_gradients():
  """Q(s, a, delta) of the cosine-monotone head from its weights in numpy: at knot j / J the
  cosine head's raw output o_j = W_q (psi * relu(W_e cos(pi i j / J) + b_e)) + b_q (no hidden
  layer), Q(0) = o_0, Q(j / J) = o_0 + sum_{m <= j} softplus(o_m) / J, linear in between; the
  embedding's weights get a gradient (delta enters through IQN's embedding)."""
  cfg = networks.QNetworkConfig(torso="mlp", mlp_units=(6,), n_cos=4, hidden_units=0)
  net = networks.build_ccvl_network((3,), np.float32, 2, cfg, delta_head="cosine_monotone",
                                    name="cm")
  obs = np.array([[0.5, -1.0, 2.0], [1.0, 0.0, -0.5]], np.float32)
  deltas = np.array([[0.0, 1 / 16, 0.1, 1.0]] * 2, np.float32)  # 0.1: between knots 1 and 2
  q = net.q_model({"observation": obs, "delta": deltas}).numpy()         # [2, 4, 2]

  psi = net.torso_model({"observation": obs}).numpy()                    # [2, 6]
  layers = {layer.name: layer for layer in net.q_model.layers}
  w_e, b_e = [v.numpy() for v in layers["cm_delta_embed"].weights]       # [4, 6], [6]
  w_q, b_q = [v.numpy() for v in layers["cm_q"].weights]                 # [6, 2], [2]
  knots = np.arange(17) / 16.0                                           # J = 16
  cos = np.cos(np.pi * np.arange(1, 5)[None] * knots[:, None])           # [17, 4]
  eta = np.maximum(cos @ w_e + b_e, 0.0)                                 # [17, 6]
  o = (psi[:, None, :] * eta[None]) @ w_q + b_q                          # [2, 17, 2]
  values = o[:, :1] + np.concatenate(
      [np.zeros_like(o[:, :1]), np.cumsum(np.log1p(np.exp(o[:, 1:])) / 16, axis=1)], 1)
  np.testing.assert_allclose(q[:, 0], values[:, 0], rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(q[:, 1], values[:, 1], rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(q[:, 2], values[:, 1] + 0.6 * (values[:, 2] - values[:, 1]),
                             rtol=1e-5, atol=1e-6)                       # 0.1 = (1 + 0.6) / 16
  np.testing.assert_allclose(q[:, 3], values[:, 16], rtol=1e-5, atol=1e-6)

  with tf.GradientTape() as tape:
    out = net.q_model({"observation": obs, "delta": deltas})
    loss = tf.reduce_sum(out[:, 3] - out[:, 0])  # depends on delta only through the increments
  grads = tape.gradient(loss, layers["cm_delta_embed"].trainable_variables)
  assert all(g is not None and float(tf.reduce_max(tf.abs(g))) > 0 for g in grads)


def test_a_cosine_checkpoint_does_not_fit_the_cosine_monotone_head(tmp_path):
  """The two heads have the same trainable layers; the cosine-monotone head's knots weight
  makes a cosine head's checkpoint fail to restore into it instead of loading unnoticed."""
  cosine = networks.build_ccvl_network((5,), np.float32, 3, TINY_MLP, delta_head="cosine")
  both = networks.build_ccvl_network((5,), np.float32, 3, TINY_MLP,
                                     delta_head="cosine_monotone")
  assert [tuple(v.shape) for v in cosine.trainable_variables] == [
      tuple(v.shape) for v in both.trainable_variables]
  path = tf.train.Checkpoint(q=cosine.q_and_phi_model).save(str(tmp_path / "c"))
  with pytest.raises(AssertionError):
    tf.train.Checkpoint(q=both.q_and_phi_model).restore(path).assert_existing_objects_matched()
  again = networks.build_ccvl_network((5,), np.float32, 3, TINY_MLP, delta_head="cosine")
  tf.train.Checkpoint(q=again.q_and_phi_model).restore(path).assert_existing_objects_matched()
