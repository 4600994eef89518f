"""The 8x8 lava gridworld of the paper's illustrative example (Sec. "Illustrative Example on
Gridworld", Fig. 1-2; after Fu et al. 2019).

More in docs/library.md "Module notes", `ccvl_tf/tabular/gridworld.py`.
"""
from __future__ import annotations

import dataclasses

import numpy as np

LAYOUT = (
    "........",
    "........",
    "..####..",
    "..####..",
    "..####..",
    ".#LLLL#.",
    "S......G",
    ".#LLLL#.",
)
# The layouts by name. 'long_favoured': the long route is optimal under the data's slip p = 0.3
# and the empirical model of the data prefers it (docs/gridworld_layout.md "Why a new layout");
# LAYOUT above stays it so every user of GridWorld() keeps its results.
# 'fig1': the layout docs/gridworld_layout.md's second rule took (candidate 19: the corridor's
# flanks at column 3 are walls, its other six flank cells lava): the short route is optimal at
# both slips, the data's goal arrivals come mostly from the long route's side, and tabular CQL
# at alpha 0.2 and 0.5 takes the long route on most datasets.
LAYOUTS = {
    "long_favoured": LAYOUT,
    "fig1": (
        "........",
        "........",
        "..####..",
        "..####..",
        "..####..",
        ".#L#LL#.",
        "S......G",
        ".#L#LL#.",
    ),
}
DEFAULT_EXPERIMENT_LAYOUT = "fig1"  # binaries/gridworld.py's default (its --layout flag)


def layout(name: str) -> tuple:
  """The rows of the layout called `name` (a key of LAYOUTS); ValueError naming the choices."""
  if name not in LAYOUTS:
    raise ValueError(f"layout must be one of {', '.join(sorted(LAYOUTS))}, got {name!r}")
  return LAYOUTS[name]


ACTION_NAMES = ("up", "right", "down", "left")
_MOVES = np.array([[-1, 0], [0, 1], [1, 0], [0, -1]])  # (d_row, d_col) per action

DATA_SLIP_PROB = 0.3
EVAL_SLIP_PROB = 0.15
GAMMA = 0.95
HORIZON = 100


@dataclasses.dataclass(frozen=True)
class GridWorld:
  """A tabular lava gridworld with its exact model.

  Attributes:
    slip_prob: p, the probability of moving in an unintended direction.
    gamma: the discount factor.
    horizon: the episode length cap (time-out).
    layout: rows of characters, see the module notes.
  """
  slip_prob: float = DATA_SLIP_PROB
  gamma: float = GAMMA
  horizon: int = HORIZON
  layout: tuple = LAYOUT

  def __post_init__(self):
    if not 0.0 <= self.slip_prob <= 1.0:
      raise ValueError(f"slip_prob must be in [0, 1], got {self.slip_prob!r}")
    if not 0.0 <= self.gamma < 1.0:
      raise ValueError(f"gamma must be in [0, 1), got {self.gamma!r}")
    if int(self.horizon) != self.horizon or self.horizon < 1:
      raise ValueError(f"horizon must be an integer >= 1, got {self.horizon!r}")
    widths = {len(r) for r in self.layout}
    if len(widths) != 1:
      raise ValueError(f"layout rows must have equal length, got lengths {sorted(widths)}")
    chars = set("".join(self.layout))
    if not chars <= set(".#LSG"):
      raise ValueError(f"layout may only contain '.#LSG', got {sorted(chars - set('.#LSG'))}")
    for c in "SG":
      if "".join(self.layout).count(c) != 1:
        raise ValueError(f"layout must contain exactly one {c!r}")
    P, R = self._build_model()
    object.__setattr__(self, "P", P)
    object.__setattr__(self, "R", R)

  # -- geometry -------------------------------------------------------------------------------
  @property
  def shape(self) -> tuple:
    return (len(self.layout), len(self.layout[0]))

  @property
  def num_states(self) -> int:
    return self.shape[0] * self.shape[1]

  @property
  def num_actions(self) -> int:
    return 4

  def cell(self, state: int) -> tuple:
    return divmod(int(state), self.shape[1])

  def state(self, row: int, col: int) -> int:
    return int(row) * self.shape[1] + int(col)

  def _cells(self, char: str) -> np.ndarray:
    return np.array([self.state(r, c) for r, row in enumerate(self.layout)
                     for c, ch in enumerate(row) if ch == char], dtype=np.int64)

  @property
  def start_state(self) -> int:
    return int(self._cells("S")[0])

  @property
  def goal_state(self) -> int:
    return int(self._cells("G")[0])

  @property
  def lava_states(self) -> np.ndarray:
    return self._cells("L")

  @property
  def wall_states(self) -> np.ndarray:
    return self._cells("#")

  @property
  def terminal_mask(self) -> np.ndarray:
    """[S] bool: entering these states ends an episode (goal and lava)."""
    m = np.zeros(self.num_states, bool)
    m[self.goal_state] = True
    m[self.lava_states] = True
    return m

  def one_hot(self, states) -> np.ndarray:
    """One-hot observations float32 [..., S] for integer states [...]."""
    return np.eye(self.num_states, dtype=np.float32)[np.asarray(states, np.int64)]

  # -- dynamics -------------------------------------------------------------------------------
  def _move(self, state: int, action: int) -> int:
    rows, cols = self.shape
    r, c = self.cell(state)
    nr, nc = r + _MOVES[action][0], c + _MOVES[action][1]
    if not (0 <= nr < rows and 0 <= nc < cols) or self.layout[nr][nc] == "#":
      return state
    return self.state(nr, nc)

  def _build_model(self):
    S, A = self.num_states, self.num_actions
    P = np.zeros((S, A, S))
    R = np.zeros((S, A, S))
    terminal = self.terminal_mask
    goal = self.goal_state
    for s in range(S):
      for a in range(A):
        if terminal[s] or self.layout[s // self.shape[1]][s % self.shape[1]] == "#":
          P[s, a, s] = 1.0  # absorbing (goal, lava) or unreachable (wall): self-loop, reward 0
          continue
        for d in range(A):
          prob = 1.0 - self.slip_prob if d == a else self.slip_prob / 3.0
          P[s, a, self._move(s, d)] += prob
        R[s, a, goal] = 1.0  # +1 for arriving at the goal
    return P, R

  def sample_next_states(self, states, actions, rng: np.random.Generator) -> np.ndarray:
    """Vectorized s' ~ P(.|s, a) for integer arrays `states`, `actions` of one shape."""
    states = np.asarray(states, np.int64)
    actions = np.asarray(actions, np.int64)
    cdf = np.cumsum(self.P[states, actions], axis=-1)  # [..., S]
    u = rng.random(states.shape)[..., None]
    return np.minimum((u > cdf).sum(-1), self.num_states - 1)

  def reward(self, states, actions, next_states) -> np.ndarray:
    return self.R[np.asarray(states), np.asarray(actions), np.asarray(next_states)]

  def route_cells(self, policy, max_steps: int | None = None) -> list:
    """The cells the deterministic policy visits from the start when no slip happens."""
    s, path = self.start_state, [self.start_state]
    for _ in range(max_steps or self.num_states):
      if self.terminal_mask[s]:
        break
      nxt = self._move(s, int(policy[s]))
      if nxt == s:
        break
      s = nxt
      path.append(s)
    return path

  def route_name(self, policy) -> str:
    """'short' if the no-slip route of `policy` runs beside the lava to the goal, 'long' if it
    reaches the goal without ever standing next to lava, otherwise 'other' (lava, or stuck)."""
    path = self.route_cells(policy)
    if path[-1] != self.goal_state:
      return "other"
    lava = set(self.lava_states.tolist())
    beside = any(self._move(s, d) in lava for s in path for d in range(4))
    return "short" if beside else "long"

  def render(self) -> str:
    return "\n".join(" ".join(row) for row in self.layout)
