"""Atari 2600 games through ``ale_py`` with the Dopamine / DQN-Replay preprocessing.

The paper's Table (App. "Atari hyperparameters"), as in Dopamine's
``atari_lib.AtariPreprocessing`` over gym's ``<Game>NoFrameskip-v0``:
  * sticky actions: ALE ``repeat_action_probability`` = 0.25 (per emulator frame);
  * frame skip 4: each agent action is repeated for 4 emulator frames, rewards
    summed, and the observation is the pixel-wise max of the last two frames;
  * greyscale (ALE's own luminance palette), resized 210x160 -> 84x84 with area
    interpolation (exact pixel-area averaging, as OpenCV ``INTER_AREA``, rounded);
  * 4 stacked frames, oldest first, the first state of an episode being
    [0, 0, 0, s_0] like Dopamine's agent (and the padded replay logs);
  * rewards clipped to [-1, 1] in the TimeStep (for learning); the raw game score
    is kept in ``last_raw_reward`` / ``episode_raw_return`` / ``get_info()``;
  * an episode ends at game over (termination, discount 0) or after 27,000 agent
    steps = 108k frames (truncation, discount 1);
  * the game's minimal action set; TF-Agents actions are indices into it.
No no-op starts and no life-loss terminals (Dopamine's defaults for these runs).
"""
from __future__ import annotations

import functools
import re
from typing import Dict, List, Optional

import numpy as np

from tf_agents.trajectories import time_step as ts
import ale_py
import ale_py.roms  # noqa: F401  pylint: disable=unused-import

from ccvl_tf.envs import episode

STICKY_ACTION_PROB = 0.25
FRAME_SKIP = 4
SCREEN_SIZE = 84
STACK_SIZE = 4
MAX_EPISODE_STEPS = 27_000


def _spelling_key(game: str) -> str:
  """A game name without case, '_', '-' or spaces: 'Space_Invaders' -> 'spaceinvaders' (no two
  of ale_py's ROM ids share one)."""
  return re.sub(r"[^a-z0-9]", "", str(game).lower())


@functools.lru_cache(maxsize=1)
def _rom_ids_by_key() -> Dict[str, str]:
  return {_spelling_key(r): r for r in ale_py.roms.get_all_rom_ids()}


def rom_id(game: str) -> str:
  """'Breakout' / 'breakout' / 'SpaceInvaders' / 'space_invaders' / 'SPACEINVADERS' -> ale_py
  ROM id ('space_invaders'): case, '_' and '-' do not matter. A name of no ROM: its snake_case
  spelling (check_game refuses it)."""
  found = _rom_ids_by_key().get(_spelling_key(game))
  if found is not None:
    return found
  snake = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", str(game).strip()).lower()
  return snake.replace("-", "_")


def _camel(rid: str) -> str:
  return "".join(p.capitalize() for p in rid.split("_"))


@functools.lru_cache(maxsize=1)
def valid_game_names() -> List[str]:
  """CamelCase names of the games whose ROMs ship with ale_py."""
  return sorted(_camel(r) for r in ale_py.roms.get_all_rom_ids())


def check_game(game: str) -> str:
  """The ale_py ROM id of `game` (any case); ValueError naming it and listing the valid
  names when there is no such ROM."""
  rid = rom_id(game)
  if rid not in ale_py.roms.get_all_rom_ids():
    raise ValueError("unknown Atari game {!r}; valid names: {}".format(
        game, ", ".join(valid_game_names())))
  return rid


def canonical_game(game: str) -> str:
  """The one spelling of an Atari game, whatever the case or underscores of `game`:
  'breakout', 'BREAKOUT' -> 'Breakout'; 'space_invaders' -> 'SpaceInvaders' (valid_game_names).
  Runs store it (summary.json, the run fingerprint, the default dataset's folder), so every
  spelling of a game names one dataset. ValueError (check_game) for an unknown game."""
  return _camel(check_game(game))


@functools.lru_cache(maxsize=8)
def _area_weights(n_in: int, n_out: int) -> np.ndarray:
  """[n_out, n_in] matrix: each output pixel's share of each input pixel
  (overlap length of [o*s, (o+1)*s) with [i, i+1), divided by s = n_in/n_out)."""
  scale = n_in / n_out
  w = np.zeros((n_out, n_in), np.float64)
  for o in range(n_out):
    lo, hi = o * scale, (o + 1) * scale
    for i in range(int(np.floor(lo)), min(int(np.ceil(hi)), n_in)):
      w[o, i] = max(0.0, min(hi, i + 1) - max(lo, i))
  w /= scale
  return w.astype(np.float32)


def area_resize(img: np.ndarray, height: int = SCREEN_SIZE, width: int = SCREEN_SIZE) -> np.ndarray:
  """Area-interpolated downscale of a 2-D uint8 image, rounded to uint8."""
  wr = _area_weights(img.shape[0], height)
  wc = _area_weights(img.shape[1], width)
  out = wr @ img.astype(np.float32) @ wc.T
  return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def preprocess_frames(frame_a: np.ndarray, frame_b: np.ndarray,
                      size: int = SCREEN_SIZE) -> np.ndarray:
  """Max over the last two greyscale frames, then area resize to size x size."""
  return area_resize(np.maximum(frame_a, frame_b), size, size)


class AtariEnvironment(episode.GameEnvironment):
  """One Atari game as a TF-Agents PyEnvironment (Dopamine preprocessing).

  observation: uint8 [84, 84, 4]; action: int32 scalar in [0, num_actions);
  reward: clipped float32 (``clip_rewards=False`` gives raw rewards).
  """

  def __init__(self, game: str, *, seed: int = 0,
               sticky_action_prob: float = STICKY_ACTION_PROB, frame_skip: int = FRAME_SKIP,
               screen_size: int = SCREEN_SIZE, stack_size: int = STACK_SIZE,
               max_episode_steps: Optional[int] = MAX_EPISODE_STEPS, clip_rewards: bool = True):
    super().__init__(handle_auto_reset=False)
    self.game = _camel(check_game(game))
    self._ale = ale_py.ALEInterface()
    self._ale.setLoggerMode(ale_py.LoggerMode.Error)
    self._ale.setInt("random_seed", int(seed) % (2**31 - 1))
    self._ale.setFloat("repeat_action_probability", float(sticky_action_prob))
    self._ale.setInt("frame_skip", 1)
    self._ale.setBool("color_averaging", False)
    self._ale.loadROM(ale_py.roms.get_rom_path(rom_id(game)))
    self._action_set = list(self._ale.getMinimalActionSet())
    h, w = self._ale.getScreenDims()
    self._buf = [np.zeros((h, w), np.uint8), np.zeros((h, w), np.uint8)]
    self._frame_skip = frame_skip
    self._size = screen_size
    self._stack = np.zeros((screen_size, screen_size, stack_size), np.uint8)
    self._init_game((screen_size, screen_size, stack_size), 255, len(self._action_set),
                    max_episode_steps, clip_rewards)

  # --- properties (the specs and num_actions: episode.GameEnvironment)
  @property
  def action_set(self) -> List[int]:
    """ALE action ids of the minimal action set (index = TF-Agents action)."""
    return [int(a.value) for a in self._action_set]

  @property
  def ale(self):
    """The underlying ``ale_py.ALEInterface`` (tests, RAM inspection)."""
    return self._ale

  @property
  def episode_steps(self) -> int:
    return self._steps

  def get_info(self) -> Dict[str, object]:
    return dict(raw_reward=self.last_raw_reward, episode_raw_return=self.episode_raw_return,
                episode_steps=self._steps, lives=int(self._ale.lives()),
                game_over=bool(self._ale.game_over()), truncated=self._truncated)

  def get_state(self):
    return self._ale.cloneState()

  def set_state(self, state) -> None:
    self._ale.restoreState(state)

  # --- dynamics
  def _observe(self) -> np.ndarray:
    frame = preprocess_frames(self._buf[0], self._buf[1], self._size)
    self._stack = np.roll(self._stack, -1, axis=-1)
    self._stack[..., -1] = frame
    return self._stack.copy()

  def _reset(self):
    self._ale.reset_game()
    self._ale.getScreenGrayscale(self._buf[0])
    self._buf[1].fill(0)  # Dopamine: max over (first frame, zeros)
    self._stack.fill(0)
    self._start_episode()
    return ts.restart(self._observe())

  def _step(self, action):
    if self._done:
      return self.reset()
    ale_action = self._action_set[self._action_index(action, self.game)]
    total = 0.0
    game_over = False
    for t in range(self._frame_skip):
      total += self._ale.act(ale_action)
      if self._ale.game_over():
        game_over = True
      # Keep the last two frames for the max (Dopamine fetches on the last two).
      if t >= self._frame_skip - 2:
        self._ale.getScreenGrayscale(self._buf[t - (self._frame_skip - 2)])
      if game_over:
        if t < self._frame_skip - 2:
          # Episode ended early: max over the final frame and itself.
          self._ale.getScreenGrayscale(self._buf[0])
          self._buf[1][...] = self._buf[0]
        break
    return episode.finish_step(self, total, game_over, self._observe())
