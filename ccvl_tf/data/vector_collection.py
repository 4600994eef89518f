"""Collecting a uniformly random policy's dataset on N environments side by side.

`collect_random(env, num_steps, writer, seed)` is `replay_writer.collect` with a uniformly random
policy, run on a vector environment (`ccvl_tf.evaluation.atari_vector.AtariVectorEnvironment`:
ale_py's own C++ vector environment with the Atari protocol of ccvl_tf/envs/atari.py), and writes
the same format: Dopamine's (latest single frame before the action, action, clipped reward,
terminal) with terminal = 1 at every episode end (game over, or `max_episode_steps` agent steps).
The replay file is one stream of whole episodes, so each copy's transitions are held until its
episode ends and then written in the order the episodes end (copy index breaks ties); only the last
episode of the stream is cut (no terminal flag) when `num_steps` is reached.

The dataset depends on `seed` and the number of copies, not on the number of worker threads
(every copy steps once per call, each with its own ALE seed and action stream). It is another
sample of the same behaviour policy than the sequential collection's (other ALE and action
streams), so the two paths give different files for the same seed.
"""
from __future__ import annotations

import time
from typing import Callable, List, Optional

import numpy as np

# The environment a collection runs on (duck-typed, see AtariVectorEnvironment): num_envs,
# num_actions, max_episode_steps, reset(seeds [N]) -> observations [N, H, W, S] (oldest frame
# first), step(actions [N]) -> (observations, raw rewards [N], ended [N], terminated [N]) where
# `ended` means the copy's episode ended in this step and its next step is the autoreset (its
# action ignored, the first observation of a new episode returned).

# Per copy: playing; draining (our agent-step cap ended its episode, the copy itself ends it in
# its next step); waiting for the autoreset.
_PLAY, _DRAIN, _WAIT = 0, 1, 2


def copy_seeds(seed: int, num_envs: int):
  """(ALE seeds int64 [N] in [0, 2^31 - 1), action generators [N]) of a collection seeded
  `seed` on N copies; mixed by numpy's SeedSequence, so seeds s and s + 1 share no stream."""
  root = np.random.SeedSequence([int(seed), 0xC011EC7])
  ale, actions = root.spawn(2)
  ale_seeds = (ale.generate_state(int(num_envs), np.uint32) % np.uint32(2**31 - 1))
  return ale_seeds.astype(np.int64), [np.random.default_rng(s)
                                      for s in actions.spawn(int(num_envs))]


def collect_random(env, num_steps: int, writer, seed: int, *,
                   progress: Optional[Callable[[dict], None]] = None,
                   progress_every: int = 1000) -> dict:
  """Adds `num_steps` transitions of a uniformly random policy on the N copies of `env` to
  `writer` (a replay_writer.DopamineReplayWriter), whole episodes in the order they end.

  Returns {'steps', 'episodes' (complete episodes written), 'episode_returns' (their raw
  scores, in written order), 'seconds', 'agent_steps' (steps taken over all copies, the
  transitions still held at the end included)}.
  """
  if int(num_steps) != num_steps or num_steps < 1:
    raise ValueError(f"num_steps must be an integer >= 1, got {num_steps!r}")
  n, cap = int(env.num_envs), int(env.max_episode_steps)
  ale_seeds, rngs = copy_seeds(seed, n)
  obs = env.reset(ale_seeds)                                   # [N, H, W, S]
  held: List[list] = [[] for _ in range(n)]                    # per copy: (frame, a, r, term)
  raw_return = np.zeros(n)
  mode = np.full(n, _PLAY)
  written, returns, agent_steps = 0, [], 0
  t0, next_report = time.time(), progress_every

  def write(transitions) -> None:
    nonlocal written
    for frame, action, reward, terminal in transitions:
      writer.add(frame, action, reward, terminal)
    written += len(transitions)

  while True:
    # Stop when one copy holds enough for the rest of the stream: its episode, cut, goes last.
    longest = max(range(n), key=lambda j: (len(held[j]), -j))
    if len(held[longest]) >= num_steps - written:
      write(held[longest][:num_steps - written])
      break
    actions = np.array([int(rng.integers(env.num_actions)) for rng in rngs])  # [N]
    next_obs, rewards, ended, _ = env.step(actions)
    finished = []
    for j in range(n):
      if mode[j] == _WAIT:        # this step was the autoreset: a new episode starts
        mode[j] = _PLAY
        continue
      if mode[j] == _DRAIN:       # the copy ends the episode our cap already ended
        if ended[j]:
          mode[j] = _WAIT
        continue
      raw_return[j] += rewards[j]
      at_cap = len(held[j]) + 1 >= cap
      done = bool(ended[j]) or at_cap
      held[j].append((obs[j, ..., -1].copy(), int(actions[j]),
                      float(np.clip(rewards[j], -1.0, 1.0)), done))
      agent_steps += 1
      if done:
        finished.append(j)
        mode[j] = _WAIT if ended[j] else _DRAIN
    obs = next_obs
    for j in finished:
      room = num_steps - written
      episode, held[j] = held[j], []
      if len(episode) > room:   # the stream ends inside this episode: cut, no terminal
        write(episode[:room])
        break
      write(episode)
      returns.append(float(raw_return[j]))
      raw_return[j] = 0.0
    if written >= num_steps:
      break
    if progress is not None and written >= next_report:
      el = time.time() - t0
      progress(dict(step=written, num_steps=num_steps, steps_per_s=written / max(el, 1e-9),
                    eta_s=(num_steps - written) * el / max(written, 1), episodes=len(returns),
                    mean_return=float(np.mean(returns)) if returns else None))
      next_report = (written // progress_every + 1) * progress_every
  if progress is not None:
    el = time.time() - t0
    progress(dict(step=written, num_steps=num_steps, steps_per_s=written / max(el, 1e-9),
                  eta_s=0.0, episodes=len(returns),
                  mean_return=float(np.mean(returns)) if returns else None))
  return dict(steps=written, episodes=len(returns), episode_returns=returns,
              seconds=time.time() - t0, agent_steps=agent_steps)
