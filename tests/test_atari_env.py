"""ccvl_tf.envs.atari: Dopamine preprocessing on a few real ALE steps."""
import numpy as np
import pytest

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS)
from ccvl_tf.envs import atari


def test_unknown_game_lists_valid_names():
  with pytest.raises(ValueError) as e:
    atari.AtariEnvironment("Breakot")
  msg = str(e.value)
  assert "Breakot" in msg and "Breakout" in msg and "SpaceInvaders" in msg and "Pong" in msg


def test_rom_id_accepts_camel_and_snake_case():
  assert atari.rom_id("SpaceInvaders") == "space_invaders"
  assert atari.rom_id("space_invaders") == "space_invaders"
  assert atari.rom_id("Breakout") == "breakout"
  assert "MsPacman" in atari.valid_game_names()


def test_every_case_and_underscore_spelling_is_one_canonical_game():
  for spelling in ("breakout", "BREAKOUT", "Breakout", "bReAkOuT"):
    assert atari.canonical_game(spelling) == "Breakout"
  for spelling in ("SpaceInvaders", "space_invaders", "SPACEINVADERS", "Space-Invaders",
                   "spaceinvaders"):
    assert atari.canonical_game(spelling) == "SpaceInvaders"
  assert atari.rom_id("SPACE_INVADERS") == "space_invaders"
  assert atari.AtariEnvironment("pong").game == "Pong"
  with pytest.raises(ValueError, match=r"unknown Atari game 'Breakot'; valid names: .*Breakout"):
    atari.canonical_game("Breakot")


def test_area_resize_exact_cases_and_matches_tf_area():
  # 2x2 block means: [[0, 2], [4, 6]] -> 3 (exact area average).
  img = np.zeros((168, 168), np.uint8)
  img[0, 1], img[1, 0], img[1, 1] = 2, 4, 6
  out = atari.area_resize(img, 84, 84)
  assert out.shape == (84, 84) and out.dtype == np.uint8
  assert out[0, 0] == 3 and out[0, 1] == 0
  # Constant image stays constant at the real 210x160 -> 84x84 ratio.
  assert (atari.area_resize(np.full((210, 160), 77, np.uint8)) == 77).all()
  # Non-integer ratio (2.5 x 1.905): tf.image.resize(method='area') is the same
  # pixel-area average (float); ours rounds it. (PIL's BOX filter is not: it
  # point-samples the box at input pixel centres.)
  import tensorflow as tf
  rnd = np.random.default_rng(0).integers(0, 256, (210, 160)).astype(np.uint8)
  ours = atari.area_resize(rnd).astype(np.float32)
  ref = tf.image.resize(rnd[:, :, None], (84, 84), method="area").numpy()[:, :, 0]
  assert np.abs(ours - ref).max() <= 0.5 + 1e-3
  # Hand-worked first output pixel: rows 0,1 and half of row 2 (weights .4 .4 .2),
  # cols 0 and 0.905 of col 1 (weights 1/1.905, .905/1.905).
  wr, wc = np.array([.4, .4, .2]), np.array([1, 160 / 84 - 1]) / (160 / 84)
  assert ours[0, 0] == np.rint(wr @ rnd[:3, :2].astype(float) @ wc)


def test_specs_reset_and_stacking_on_real_steps():
  env = atari.AtariEnvironment("Breakout", seed=0)
  assert env.num_actions == 4 and env.action_set == [0, 1, 3, 4]  # minimal set
  assert env.observation_spec().shape == (84, 84, 4)
  assert env.observation_spec().dtype == np.uint8
  assert env.action_spec().dtype == np.int32 and env.action_spec().maximum == 3
  t0 = env.reset()
  assert t0.is_first() and t0.observation.dtype == np.uint8
  assert t0.observation.shape == (84, 84, 4)
  assert (t0.observation[..., :3] == 0).all() and t0.observation[..., 3].max() > 0
  prev = t0.observation
  for a in [1, 2, 3, 0, 2]:
    t = env.step(np.int32(a))
    assert t.observation.shape == (84, 84, 4) and t.observation.dtype == np.uint8
    assert t.reward.dtype == np.float32 and t.discount == 1.0
    np.testing.assert_array_equal(t.observation[..., :3], prev[..., 1:])  # oldest first
    prev = t.observation
  assert env.episode_steps == 5
  for bad in (4, -1):
    with pytest.raises(ValueError, match=r"action {} outside \[0, 4\) for Breakout$".format(bad)):
      env.step(bad)
  assert env.episode_steps == 5  # a refused action is no step


def test_frame_skip_and_max_pool_match_a_raw_ale():
  """Without sticky actions the env equals: act x4, max of frames 3 and 4, resize."""
  import ale_py
  import ale_py.roms
  env = atari.AtariEnvironment("Pong", seed=5, sticky_action_prob=0.0)
  env.reset()
  ale = ale_py.ALEInterface()
  ale.setLoggerMode(ale_py.LoggerMode.Error)
  ale.setInt("random_seed", 5)
  ale.setFloat("repeat_action_probability", 0.0)
  ale.loadROM(ale_py.roms.get_rom_path("pong"))
  ale.reset_game()
  minimal = ale.getMinimalActionSet()
  raw_total = 0
  for step, a in enumerate([2, 2, 3, 1, 0, 2, 2, 2, 4, 5] * 3):
    t = env.step(a)
    frames = []
    for _ in range(4):
      raw_total += ale.act(minimal[a])
      frames.append(ale.getScreenGrayscale())
    expected = atari.preprocess_frames(frames[2], frames[3])
    np.testing.assert_array_equal(t.observation[..., -1], expected)
  assert env.episode_raw_return == raw_total


def test_sticky_action_statistics():
  """Breakout paddle x (RAM 72) moves 12 px in a RIGHT step after NOOPs when all
  4 frames execute RIGHT; if the first frame repeats NOOP (prob 0.25) it moves
  <= 8 px. 400 trials: std of the fraction is 0.022."""
  def deltas(p):
    env = atari.AtariEnvironment("Breakout", seed=3, sticky_action_prob=p)
    env.reset()
    for _ in range(10):
      env.step(0)
    state = env.get_state()
    out = []
    for _ in range(400):
      env.set_state(state)
      env.step(0)
      env.step(0)
      x0 = int(env.ale.getRAM()[72])
      env.step(2)  # RIGHT
      out.append(int(env.ale.getRAM()[72]) - x0)
    return np.array(out), env
  d0, _ = deltas(0.0)
  assert (d0 == 12).all()
  d, env = deltas(atari.STICKY_ACTION_PROB)
  assert env.ale.getFloat("repeat_action_probability") == pytest.approx(0.25)
  frac = float(np.mean(d <= 8))
  assert 0.17 < frac < 0.33, frac


def test_rewards_clipped_but_raw_score_reported():
  env = atari.AtariEnvironment("SpaceInvaders", seed=0)
  env.reset()
  rng = np.random.default_rng(0)
  for _ in range(2000):
    t = env.step(int(rng.integers(env.num_actions)))
    if env.last_raw_reward > 1:
      break
  assert env.last_raw_reward > 1, "no alien shot in 2000 random steps"
  assert t.reward == np.float32(1.0)
  info = env.get_info()
  assert info["raw_reward"] == env.last_raw_reward
  assert info["episode_raw_return"] >= env.last_raw_reward


def test_truncation_cap_and_game_over_termination():
  assert atari.MAX_EPISODE_STEPS == 27_000
  env = atari.AtariEnvironment("Breakout", seed=0, max_episode_steps=5)
  env.reset()
  steps = [env.step(0) for _ in range(5)]
  assert [s.is_last() for s in steps] == [False] * 4 + [True]
  assert steps[-1].discount == 1.0 and env.get_info()["truncated"]
  assert env.step(0).is_first()  # stepping after LAST resets
  env = atari.AtariEnvironment("Breakout", seed=0)
  t = env.reset()
  rng = np.random.default_rng(1)
  n = 0
  while not t.is_last():
    t = env.step(int(rng.integers(4)))
    n += 1
    assert n < 5000
  assert t.discount == 0.0 and env.get_info()["game_over"]
  assert not env.get_info()["truncated"]
