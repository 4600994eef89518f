"""A property-based net over the records the binaries read: each field of an offline run's
summary.json (what fine-tuning starts from) and of the checkpoints' fingerprint.json removed,
retyped or set to a non-finite, negative, huge or foreign value is either refused in one line
naming the file, or leaves the result the same -- never a changed result without a word.
Seeded (derandomized) and bounded, so the same examples run every time."""
import copy
import json
import math
import os

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ccvl_tf.experiments.online import config as online_config
from ccvl_tf.experiments.online import start as online_start
from ccvl_tf.runtime import training

# A train_offline.py CCVL run's summary.json (the keys fine-tuning reads) and the fingerprint
# its checkpoints were stored with.
SUMMARY = {"game": "Breakout", "agent": "ccvl", "num_transitions": 49999,
           "belief_temperature": 0.0227, "settings": {"alpha": 3.0, "learning_rate": 0.001},
           "config": {"ccvl_options": {"delta_head": "cosine_monotone"}, "num_deltas": 8,
                      "num_pairs": 2},
           "learner_settings": {"delta_head": "cosine_monotone"},
           "exported_policies": {"policy": "policy"}}
FINGERPRINT = {"game": "Breakout", "agent": "ccvl", "num_transitions": 49999, "alpha": 3.0,
               "ccvl_options": {"delta_head": "cosine_monotone"}, "num_deltas": 8,
               "num_pairs": 2, "seed": 0}
VALUES = [None, "x", "Atlantis", [], {}, True, float("nan"), float("inf"), -float("inf"), -1,
          0, 1e300]  # removed, retyped, non-finite, negative or zero, huge, foreign


def _paths(d, prefix=()):
  out = []
  for k, v in d.items():
    out.append(prefix + (k,))
    if isinstance(v, dict):
      out += _paths(v, prefix + (k,))
  return out


def _mutate(record, path, value, remove):
  out = copy.deepcopy(record)
  node = out
  for k in path[:-1]:
    node = node[k]
  if remove:
    del node[path[-1]]
  else:
    node[path[-1]] = value
  return out


def _write(root, summary, fingerprint):
  ckpt = root / "checkpoints"
  ckpt.mkdir(parents=True, exist_ok=True)
  (ckpt / "ckpt-10.index").write_bytes(b"")
  (ckpt / training.STATE_FILE).write_text('model_checkpoint_path: "ckpt-10"\n')
  # json.dumps writes NaN / Infinity as the lenient JSON a hand edit may leave.
  (ckpt / training.FINGERPRINT).write_text(json.dumps(fingerprint))
  (root / "summary.json").write_text(json.dumps(summary))


def _outcome(root):
  """What fine-tuning takes from the offline run: the learner's offline settings, the
  exploration belief's temperature, alpha and |D|."""
  cfg = online_config.OnlineConfig(game="Breakout", offline_dir=str(root),
                                   root_dir=str(root) + "_online")
  cfg, summary = online_start.resolve_config(cfg, log=lambda s: None)
  alpha, size = online_start.alpha_and_dataset_size(summary, cfg)
  return (json.dumps(cfg.offline_settings, sort_keys=True, default=str),
          cfg.exploration.belief_temperature, alpha, size)


def _same(a, b):
  return all((x == y) or (isinstance(x, float) and isinstance(y, float)
                          and math.isnan(x) and math.isnan(y)) for x, y in zip(a, b))


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
  root = tmp_path_factory.mktemp("base") / "off"
  root.mkdir()
  _write(root, SUMMARY, FINGERPRINT)
  return _outcome(root)


@settings(max_examples=120, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from(["summary", "fingerprint"]), data=st.data())
def test_every_field_is_refused_naming_the_file_or_changes_nothing(tmp_path_factory, baseline,
                                                                   which, data):
  record = SUMMARY if which == "summary" else FINGERPRINT
  path = data.draw(st.sampled_from(_paths(record)), label="field")
  remove = data.draw(st.booleans(), label="remove")
  value = None if remove else data.draw(st.sampled_from(VALUES), label="value")
  changed = _mutate(record, path, value, remove)
  root = tmp_path_factory.mktemp("case") / "off"
  root.mkdir()
  _write(root, changed if which == "summary" else SUMMARY,
         changed if which == "fingerprint" else FINGERPRINT)
  try:
    got = _outcome(root)
  except ValueError as e:
    msg = str(e)
    assert "\n" not in msg, msg
    named = (f"{root}/summary.json", f"{root}/checkpoints/fingerprint.json")
    assert any(n in msg for n in named), (which, path, value, remove, msg)
    return
  assert _same(got, baseline), (which, path, value, remove, got, baseline)


# ------------------------------------------------------------------ ccvl_dataset.json

TESTDATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "testdata", "dqn_replay", "Breakout", "1", "replay_logs")
BREAKOUT = dict(game="Breakout", action_set=[0, 1, 3, 4], observation_shape=(84, 84, 4))


def _load(replay_dir):
  """What a run reads from a replay directory: its record checked against Breakout's
  (dataset_record.check), then the frame store (every array of it)."""
  from ccvl_tf.data import dataset_record
  from ccvl_tf.data import frame_store
  from ccvl_tf.data import replay_source
  source = replay_source.replay_source(str(replay_dir))
  dataset_record.check(source, **BREAKOUT)
  store = frame_store.FrameStore.from_replay(source, "all", num_actions=4)
  return {k: v.tobytes() for k, v in store.arrays().items()}


@pytest.fixture(scope="module")
def dataset_baseline():
  return json.load(open(os.path.join(TESTDATA, "ccvl_dataset.json"))), _load(TESTDATA)


@settings(max_examples=80, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_dataset_record_field_is_refused_naming_the_file_or_changes_nothing(
    tmp_path_factory, dataset_baseline, data):
  import shutil
  record, baseline = dataset_baseline
  path = data.draw(st.sampled_from(_paths(record)), label="field")
  remove = data.draw(st.booleans(), label="remove")
  value = None if remove else data.draw(st.sampled_from(VALUES), label="value")
  d = tmp_path_factory.mktemp("data") / "replay_logs"
  shutil.copytree(TESTDATA, d)
  (d / "ccvl_dataset.json").write_text(json.dumps(_mutate(record, path, value, remove)))
  try:
    got = _load(str(d))
  except ValueError as e:  # DatasetError is a ValueError
    msg = str(e)
    assert str(d / "ccvl_dataset.json") in msg, (path, value, remove, msg)
    return
  assert got == baseline, (path, value, remove)


# ------------------------------------------------------------------ online_config.json

# What a record field may be set to that no run writes: removed, retyped, non-finite, null,
# negative, huge (an integer past int64, one past int32, a float near its largest). Zero is
# left out: a valid setting of many fields (no evaluation, no offline data), not a corruption.
FOREIGN = [None, "x", [], {}, True, float("nan"), float("inf"), -1, 2**63, 2**40, 1e300]
PATHS = ("root_dir", "offline_dir", "offline_states")


@pytest.fixture(scope="module")
def online_record():
  return online_config.OnlineConfig(game="gridworld", offline_dir="off", root_dir="r").record()


@settings(max_examples=120, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_online_config_field_is_refused_naming_the_file_or_changes_nothing(
    tmp_path_factory, online_record, data):
  """online_config.json is what an actor (and a resumed learner) runs by: a field that no run
  writes is refused naming the file, never read as a default or a foreign value."""
  key = data.draw(st.sampled_from(sorted(online_record)), label="field")
  remove = data.draw(st.booleans(), label="remove")
  # A path is any string: "x" is a foreign value only for the other fields.
  foreign = [v for v in FOREIGN if not (key in PATHS and isinstance(v, str))]
  if isinstance(online_record[key], bool):  # True is a setting of a boolean, not foreign
    foreign = [v for v in foreign if not isinstance(v, bool)]
  value = None if remove else data.draw(st.sampled_from(foreign), label="value")
  changed = _mutate(online_record, (key,), value, remove)
  path = tmp_path_factory.mktemp("online") / "online_config.json"
  path.write_text(json.dumps(changed))
  try:
    got = online_config.OnlineConfig.read_record(str(path)).record()
  except ValueError as e:
    assert str(e).startswith(str(path)) and "\n" not in str(e), (key, value, remove, str(e))
    return
  assert json.dumps(got, sort_keys=True, default=str) == json.dumps(
      online_record, sort_keys=True, default=str), (key, value, remove)


# ------------------------------------------------------------------ replay bookkeeping arrays

def _write_array(path, value):
  import gzip
  import numpy as np
  with gzip.open(path, "wb") as f:
    np.save(f, np.asarray(value), allow_pickle=False)


@settings(max_examples=60, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_bookkeeping_value_is_refused_naming_the_file_or_changes_nothing(
    tmp_path_factory, dataset_baseline, data):
  """A checkpoint's add_count or invalid_range set to another count (the cursor moved, a
  wrapped count, zero, negative, huge) or another slot list, with and without the writer's
  record: refused naming a file of the directory, or the same transitions read."""
  import shutil
  import numpy as np
  _, baseline = dataset_baseline
  suffix = data.draw(st.sampled_from([0, 1, 2]), label="suffix")
  name = data.draw(st.sampled_from(["add_count", "invalid_range"]), label="array")
  if name == "add_count":
    value = np.int64(data.draw(st.sampled_from(
        [0, 1, 544, 545, 546, 998, 999, 1000, 1545, 1999, 2000, 2545, 2999, 10**12, -1]),
        label="value"))
  else:
    start = data.draw(st.sampled_from([0, 1, 542, 543, 544, 545, 997, 998, 999]), label="start")
    value = (np.arange(start, start + 5) % 1000).astype(np.int64)
  without_record = data.draw(st.booleans(), label="without_record")
  d = tmp_path_factory.mktemp("book") / "replay_logs"
  shutil.copytree(TESTDATA, d)
  _write_array(d / f"{name}_ckpt.{suffix}.gz", value)
  if without_record:
    os.remove(d / "ccvl_dataset.json")
  try:
    from ccvl_tf.data import frame_store
    store = frame_store.FrameStore.from_replay(str(d), "all", num_actions=4)
  except ValueError as e:
    assert str(d) in str(e) and "\n" not in str(e), (suffix, name, value, str(e))
    return
  got = {k: v.tobytes() for k, v in store.arrays().items()}
  assert got == baseline, (suffix, name, value, without_record)


def test_every_online_config_field_and_foreign_value(tmp_path, online_record):
  """Every field of online_config.json with every FOREIGN value (and removed), not a sample:
  each is refused in one line naming the file, or reads back as the record written."""
  path = tmp_path / "online_config.json"
  accepted = []
  for key in sorted(online_record):
    for value, remove in [(None, True)] + [(v, False) for v in FOREIGN]:
      if key in PATHS and isinstance(value, str):
        continue
      if isinstance(value, bool) and isinstance(online_record[key], bool):
        continue  # True is a setting of a boolean field, not a foreign value
      path.write_text(json.dumps(_mutate(online_record, (key,), value, remove)))
      try:
        got = online_config.OnlineConfig.read_record(str(path)).record()
      except ValueError as e:
        assert str(e).startswith(str(path)) and "\n" not in str(e), (key, value, str(e))
        continue
      if json.dumps(got, sort_keys=True, default=str) != json.dumps(
          online_record, sort_keys=True, default=str):
        accepted.append((key, value, remove))
  assert not accepted, f"accepted with another result: {accepted}"
