"""ccvl_tf/algorithm/fused_adam.py: the fused kernel reproduces Keras 3 Adam's update (values, slots
and iterations over several steps), falls back where it would not, and resumes either way."""
import ccvl_tf  # noqa: F401

import keras
import numpy as np
import tensorflow as tf

from ccvl_tf.algorithm import fused_adam


def _vars(seed):
  rng = np.random.default_rng(seed)
  return [keras.Variable(rng.normal(size=(3, 4)).astype(np.float32)),
          keras.Variable(rng.normal(size=(4,)).astype(np.float32))]


def _grads(step):
  rng = np.random.default_rng(100 + step)
  return [tf.constant(rng.normal(size=(3, 4)), tf.float32),
          tf.constant(rng.normal(size=(4,)), tf.float32)]


def test_fused_equals_apply_gradients_over_steps():
  a, b = _vars(0), _vars(0)
  opt_a = keras.optimizers.Adam(learning_rate=0.05, epsilon=3.125e-4)
  opt_b = keras.optimizers.Adam(learning_rate=0.05, epsilon=3.125e-4)
  opt_a.build(a)
  opt_b.build(b)
  assert fused_adam.supports_fused(opt_a)
  fused = tf.function(lambda g: fused_adam.apply(opt_a, g, a))
  for step in range(5):
    fused(_grads(step))
    opt_b.apply_gradients(zip(_grads(step), b))
  for x, y in zip(a, b):
    np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-5, atol=1e-6)  # float32 rounding
  for x, y in zip(opt_a.variables, opt_b.variables):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=1e-7)
  assert int(opt_a.iterations) == 5


def test_first_step_by_hand():
  """t = 1: m = (1 - b1) g, v = (1 - b2) g^2, alpha = lr sqrt(1 - b2) / (1 - b1), so
  w -= alpha m / (sqrt(v) + eps) = lr g / (|g| + eps / sqrt(1 - b2))."""
  w = keras.Variable(np.array([1.0, -2.0], np.float32))
  opt = keras.optimizers.Adam(learning_rate=0.1, epsilon=1e-3)
  opt.build([w])
  g = np.array([0.5, -0.02], np.float32)
  fused_adam.apply(opt, [tf.constant(g)], [w])
  expected = np.array([1.0, -2.0]) - 0.1 * g / (np.abs(g) + 1e-3 / np.sqrt(1 - 0.999))
  np.testing.assert_allclose(w.numpy(), expected, rtol=1e-5)


def test_none_gradient_leaves_variable_and_slots():
  a = _vars(1)
  opt = keras.optimizers.Adam(learning_rate=0.05)
  opt.build(a)
  before = a[1].numpy().copy()
  fused_adam.apply(opt, [_grads(0)[0], None], a)
  np.testing.assert_array_equal(a[1].numpy(), before)
  assert int(opt.iterations) == 1


def test_falls_back_where_the_kernel_is_not_keras_update():
  for opt in (keras.optimizers.Adam(amsgrad=True), keras.optimizers.Adam(clipnorm=1.0),
              keras.optimizers.Adam(weight_decay=0.01),
              keras.optimizers.Adam(learning_rate=keras.optimizers.schedules.ExponentialDecay(
                  0.1, 10, 0.5)),
              keras.optimizers.SGD(0.1)):
    assert not fused_adam.supports_fused(opt), opt
  # The fallback still updates (amsgrad through apply_gradients).
  a, b = _vars(2), _vars(2)
  opt_a, opt_b = keras.optimizers.Adam(0.05, amsgrad=True), keras.optimizers.Adam(0.05,
                                                                                  amsgrad=True)
  opt_a.build(a)
  opt_b.build(b)
  for step in range(3):
    fused_adam.apply(opt_a, _grads(step), a)
    opt_b.apply_gradients(zip(_grads(step), b))
  for x, y in zip(a, b):
    np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-6)
