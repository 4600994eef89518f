"""Transitions.from_rlds: RLDS episodes (a tf.data.Dataset of episodes with nested 'steps'
datasets) read as the same transitions as from_arrays of the same steps, and each refused input
as one line naming the field. The episodes are built here with tf.data in RLDS's documented
structure (github.com/google-research/rlds README "Dataset Format"); the last test reads a
dataset written by RLDS's own writer (rlds.tfds.EpisodeWriter, TFDS format) where rlds and
tensorflow_datasets are installed. Apart from test_transitions.py because TensorFlow's import
alone takes most of this file's time.
"""
import ccvl_tf  # noqa: F401  (TF_USE_LEGACY_KERAS before TensorFlow)

import numpy as np
import pytest
import tensorflow as tf

from ccvl_tf.data.transitions import Transitions
from tests.test_transitions import (ACTIONS, OBS, REWARDS, assert_same, hand_made)

# The hand-made episodes of test_transitions.py in RLDS's form: each episode's steps, then an
# is_last step with the final observation whose action and reward are not valid (99, NaN).
# A and C end in a terminal state (is_terminal on the is_last step); B is truncated, its is_last
# step holding row 5, the s' of row 4.
EPISODES = [  # (observations, actions, rewards, terminated)
    (np.r_[OBS[0:3], [[-1, -1]]], np.r_[ACTIONS[0:3], 99], np.r_[REWARDS[0:3], np.nan], True),
    (OBS[3:6], np.r_[ACTIONS[3:5], 99], np.r_[REWARDS[3:5], np.nan], False),
    (np.r_[OBS[6:7], [[-2, -2]]], np.r_[ACTIONS[6:7], 99], np.r_[REWARDS[6:7], np.nan], True),
]


def step_arrays(obs, actions, rewards, terminated, **change):
  n = len(obs)
  steps = dict(observation=np.asarray(obs, np.float32), action=np.asarray(actions, np.int64),
               reward=np.asarray(rewards, np.float32), discount=np.ones(n, np.float32),
               is_first=np.arange(n) == 0, is_last=np.arange(n) == n - 1,
               is_terminal=(np.arange(n) == n - 1) & terminated)
  steps.update(change)
  return steps


def rlds_dataset(episodes):
  """A tf.data.Dataset of RLDS episodes: {'steps': tf.data.Dataset of step dicts}."""
  out = None
  for steps in episodes:
    ep = tf.data.Dataset.from_tensors({"steps": tf.data.Dataset.from_tensor_slices(steps)})
    out = ep if out is None else out.concatenate(ep)
  return out


def test_rlds_equals_the_same_steps_as_arrays():
  t = Transitions.from_rlds(rlds_dataset([step_arrays(*e) for e in EPISODES]))
  assert_same(t, hand_made())
  assert t.source == "rlds"


def _with(i, **change):
  steps = [step_arrays(*e) for e in EPISODES]
  steps[i].update({k: np.asarray(v, steps[i][k].dtype) if k in steps[i] else v
                   for k, v in change.items()})
  return steps


def _without(field):
  return [{k: v for k, v in step_arrays(*e).items() if k != field} for e in EPISODES]


WRONG = {
    "no is_terminal": (_without("is_terminal"), "steps",
                       "missing field(s) is_terminal: expected observation, action, reward, "
                       "is_first, is_last, is_terminal"),
    "never ends": (_with(1, is_last=[0, 0, 0]), "is_last",
                   "episode 1 never ends: its last step (2) is not is_last"),
    "early is_last": (_with(0, is_last=[0, 1, 0, 1]), "is_last",
                      "set at episode 0 step 1, before the episode's last step"),
    "is_terminal before the end": (_with(0, is_terminal=[0, 1, 0, 1]), "is_terminal",
                                   "set at episode 0 step 1, which is not is_last"),
    "no is_first": (_with(2, is_first=[0, 0]), "is_first",
                    "episode 2 step 0 is not marked is_first"),
    "action out of range": (_with(1, action=[1, 5, 99]), "action",
                            "expected integers >= 0"),
    "nan observation": (_with(1, observation=[[3, 30], [np.nan, 40], [5, 50]]), "observation",
                        "got nan at episode 1 step 1"),
}


@pytest.mark.parametrize("case", sorted(WRONG))
def test_rlds_wrong_input_is_one_line_naming_the_field(case):
  episodes, field, says = WRONG[case]
  with pytest.raises(ValueError) as e:
    Transitions.from_rlds(rlds_dataset(episodes), num_actions=None if case !=
                          "action out of range" else 3)
  message = str(e.value)
  assert "\n" not in message
  assert message.startswith("rlds: {}: ".format(field)), message
  if case == "action out of range":
    says = "expected integers in [0, 3) (num_actions=3), got 5 at episode 1 step 1"
  assert says in message, message


def test_rlds_refuses_other_structures():
  with pytest.raises(ValueError, match=r"^rlds: steps: expected each episode to be a dict "
                     r"with a 'steps' tf.data.Dataset"):
    Transitions.from_rlds(tf.data.Dataset.from_tensor_slices({"x": [1, 2]}))
  nested = [dict(step_arrays(*e), observation={"a": step_arrays(*e)["observation"]})
            for e in EPISODES]
  with pytest.raises(ValueError, match=r"^rlds: observation: expected one tensor per step"):
    Transitions.from_rlds(rlds_dataset(nested))


def test_rlds_written_by_rlds_episode_writer(tmp_path):
  """The episodes written to disk by RLDS's own writer (rlds.tfds.EpisodeWriter: TFDS
  format) and read back with tensorflow_datasets, as a user of an RLDS dataset would."""
  tfds = pytest.importorskip("tensorflow_datasets")
  episode_writer = pytest.importorskip("rlds.tfds.episode_writer")
  config = tfds.rlds.rlds_base.DatasetConfig(
      name="toy", observation_info=tfds.features.Tensor(shape=(2,), dtype=np.float32),
      action_info=tfds.features.Scalar(dtype=np.int64),
      reward_info=tfds.features.Scalar(dtype=np.float32),
      discount_info=tfds.features.Scalar(dtype=np.float32))
  writer = episode_writer.EpisodeWriter(data_directory=str(tmp_path), ds_config=config,
                                        max_episodes_per_file=10)
  for e in EPISODES:
    s = step_arrays(*e)
    writer.add_episode({"steps": [{k: v[i] for k, v in s.items()}
                                  for i in range(len(s["action"]))]})
  writer.close()
  episodes = tfds.builder_from_directory(str(tmp_path)).as_dataset(split="train",
                                                                    shuffle_files=False)
  assert_same(Transitions.from_rlds(episodes), hand_made())
  # The same directory by path: Transitions.from_tfds and ccvl_tf.fit's data argument.
  assert_same(Transitions.from_tfds(tmp_path), hand_made())
  from ccvl_tf.experiments import fit  # pylint: disable=g-import-not-at-top
  assert_same(fit.load_data(f"tfds:{tmp_path}"), hand_made())
  with pytest.raises(ValueError, match="not a TFDS dataset directory"):
    Transitions.from_tfds(tmp_path / "nothing")
