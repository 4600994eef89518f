"""Smoke runs of binaries/train_offline.py: real-format testdata and the default dataset path,
checkpoints, summaries, exported SavedModels (run in a fresh TF-only process and compared step
for step with the policies rebuilt here from the checkpoint), resume."""
import json
import os
import subprocess
import sys

import pytest
from tests import forked_binary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "binaries", "train_offline.py")
TESTDATA = os.path.join(ROOT, "testdata", "dqn_replay", "Breakout", "1", "replay_logs")
TINY = ["--reference_agents=none", "--batch_size=4", "--num_deltas=2", "--num_pairs=2",
        "--log_interval=2",
        "--checkpoint_interval=2", "--summary_interval=1", "--eval_episodes=1",
        "--eval_max_steps=30", "--num_grid_deltas=3"]


def _run(args, cwd, fresh=False):
  """train_offline.py run on `args` in its own process (tests/forked_binary.py; `fresh`: a
  subprocess start of its own, as a user's)."""
  return forked_binary.run("train_offline.py", args, cwd=cwd, fresh=fresh)


def _in_process_policies(root):
  """The run's two exported policies rebuilt here: a CCVLAgent of the run's settings (the TINY
  flags; Nature torso) restored from its latest checkpoint with assert_consumed(), then the
  adaptive policy (K = 3, the belief temperature and seed of the run, Atari reward clip 1) and
  Fixed-CCVL at the run's selected delta, both read from summary.json."""
  import numpy as np
  import tensorflow as tf
  from tf_agents.specs import tensor_spec
  from tf_agents.trajectories import time_step as ts

  from ccvl_tf.agents import ccvl_agent
  from ccvl_tf.algorithm import networks, policies
  from ccvl_tf.envs import atari

  summary = json.loads((root / "summary.json").read_text())
  env = atari.AtariEnvironment("Breakout", seed=0)
  tss = ts.time_step_spec(tensor_spec.from_spec(env.observation_spec()))
  aspec = tensor_spec.from_spec(env.action_spec())
  cfg = ccvl_agent.CCVLConfig(num_deltas=2, num_pairs=2, seed=0)
  agent = ccvl_agent.CCVLAgent(tss, aspec, cfg, networks.QNetworkConfig(torso="nature"),
                               dataset_size=float(summary["num_transitions"]))
  before = agent.q_values(np.zeros([1, 84, 84, 4], np.uint8), 0.5).numpy()
  path = tf.train.latest_checkpoint(str(root / "checkpoints"))
  agent.make_checkpoint().restore(path).assert_consumed()
  assert int(agent.train_step_counter.numpy()) == summary["step"]
  assert not np.allclose(agent.q_values(np.zeros([1, 84, 84, 4], np.uint8), 0.5), before)
  adaptive = policies.ConfidenceAdaptivePolicy(
      tss, aspec, agent.q_network, num_grid_deltas=3, gamma=cfg.gamma,
      temperature=summary["belief_temperature"], seed=0, reward_clip=1.0,
      resample=cfg.belief_resample)
  fixed = policies.FixedDeltaPolicy(tss, aspec, agent.q_network, delta=summary["fixed_delta"])
  return {"policy": adaptive, "policy_fixed": fixed}


def _assert_exports_equal_in_process_policies(root, work_dir):
  """Both SavedModels, run in a fresh TensorFlow-only process on 7 steps of 2 streams of random
  frames (with rewards and episode ends), act, choose deltas and carry state exactly as the
  policies rebuilt in this process."""
  import numpy as np
  from tests import policy_compare
  frames = np.random.default_rng(0).integers(0, 256, (7, 2, 84, 84, 4), dtype=np.uint8)
  data = policy_compare.time_steps(frames)
  built = _in_process_policies(root)
  child = policy_compare.saved_policy_steps(root, list(built), data, work_dir)
  for name, policy in built.items():
    # rtol 1e-3 on the log-belief: the belief temperature is now set from held-out Bellman
    # errors (~1e-2 here), so float32 graph-vs-eager differences of the squared errors are
    # divided by T and the log-beliefs reach the hundreds (measured: 1.6e-4 relative). Actions
    # and chosen deltas are still compared bit-exactly.
    policy_compare.assert_same_steps(child, policy_compare.in_process_steps(policy, data), name,
                                     rtol=1e-3)
  actions = np.concatenate([child[f"policy/action/{i}"] for i in range(7)])
  assert np.all((actions >= 0) & (actions < 4))   # Breakout's minimal action set has 4 actions


@pytest.mark.slow
def test_train_on_testdata_then_resume(tmp_path):
  root = tmp_path / "run"
  r = _run([f"--dataset_dir={TESTDATA}", f"--root_dir={root}", "--num_steps=4", *TINY], tmp_path,
           fresh=True)  # the binary's end-to-end run as a user starts it
  assert r.returncode == 0, r.stderr[-3000:]
  assert "steps/s" in r.stdout and "ETA" in r.stdout and "loss=" in r.stdout
  assert "[eval] step 4" in r.stdout
  ckpts = sorted(f for f in os.listdir(root / "checkpoints") if f.endswith(".index"))
  assert ckpts == ["ckpt-2.index", "ckpt-4.index"]
  assert any(f.startswith("events.out.tfevents") for f in os.listdir(root / "summaries" / "train"))
  assert (root / "eval.csv").read_text().startswith("step,")
  for d in ("policy", "policy_fixed"):
    assert (root / d / "saved_model.pb").exists()
    # The game the exports were trained in, which evaluate.py and collect_dataset.py check.
    assert json.loads((root / d / "ccvl_policy.json").read_text()) == {
        "game": "Breakout", "action_set": [0, 1, 3, 4]}
  summary = json.loads((root / "summary.json").read_text())
  assert summary["step"] == 4 and summary["game"] == "Breakout"
  assert 0 < summary["fixed_delta"] < 1 and len(summary["bellman_errors"]) == 3
  # The settings in force, not only the flags given: the defaults of CCVLConfig (the paper's
  # Algorithm 1, the cosine-monotone head, the batch-normalized linear count) and the TINY
  # flags.
  resolved = summary["learner_settings"]
  assert summary["config"]["ccvl_options"] == {}
  assert (resolved["agent_config"], resolved["objective"], resolved["delta_head"],
          resolved["count_weight"], resolved["count_normalization"]) == (
              "CCVLConfig", "algorithm1", "cosine_monotone", "linear", "batch")
  assert (resolved["num_deltas"], resolved["num_pairs"], resolved["num_grid_deltas"]) == (2, 2, 3)
  assert resolved["network"]["torso"] == "nature"
  _assert_exports_equal_in_process_policies(root, tmp_path)

  # A second invocation with more steps resumes at the saved step (with op determinism on: a
  # setting that may change on resume, recorded in summary.json).
  r2 = _run([f"--dataset_dir={TESTDATA}", f"--root_dir={root}", "--num_steps=6",
             "--deterministic", *TINY], tmp_path)
  assert r2.returncode == 0, r2.stderr[-3000:]
  assert json.loads((root / "summary.json").read_text())["config"]["deterministic"] is True
  assert "train step 4" in r2.stdout and "Training from step 4 to 6" in r2.stdout
  assert json.loads((root / "summary.json").read_text())["resumed_from"] == 4


# Runs train_offline.py with the SaveV2 of checkpoint ckpt-<FULL_AT> failing as a full disk
# does, after writing its shard into ckpt-<FULL_AT>_temp/ (the fault, injected; the binary is
# unchanged).
DISK_FULL = """
import os, runpy, sys
sys.path.insert(0, {root!r})
import ccvl_tf
from ccvl_tf.runtime import quiet
from ccvl_tf.experiments import tf_setup
quiet.quiet_start()
tf_setup.pin_cpu_kernels()  # as train_offline.py does, before this wrapper loads TensorFlow
import tensorflow as tf
from tensorflow.python.ops import io_ops
real = io_ops.save_v2
def save_v2(prefix, *args, **kwargs):
  out = real(prefix, *args, **kwargs)
  path = prefix.numpy().decode()
  if "ckpt-{step}_temp" in path:
    raise tf.errors.ResourceExhaustedError(
        None, None, path + "/part-00000-of-00001.data-00000-of-00001.tempstate1; No space left "
        "on device [Op:SaveV2]")
  return out
io_ops.save_v2 = save_v2
sys.argv = [{bin!r}] + sys.argv[1:]
runpy.run_path({bin!r}, run_name="__main__")
"""


@pytest.mark.slow
def test_disk_full_is_one_line_and_the_rerun_resumes_from_the_last_good_checkpoint(tmp_path):
  root = tmp_path / "run"
  script = tmp_path / "disk_full.py"
  script.write_text(DISK_FULL.format(root=ROOT, bin=BIN, step=4))
  args = [f"--dataset_dir={TESTDATA}", f"--root_dir={root}", "--num_steps=4", *TINY]
  env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="3")
  r = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                     env=env, cwd=tmp_path, timeout=600)
  assert r.returncode == 1
  ckpt = root / "checkpoints"
  assert r.stderr.strip().splitlines() == [
      f"train_offline.py: error: could not write {ckpt}/ckpt-4: No space left on device "
      f"[Op:SaveV2]; the last good checkpoint {ckpt}/ckpt-2 is intact: free space (or make the "
      f"path writable) and rerun the same command to resume from it"], r.stderr[-3000:]
  assert sorted(os.listdir(ckpt)) == ["checkpoint", "ckpt-2.data-00000-of-00001",
                                      "ckpt-2.index", "fingerprint.json", "machines.json"]
  r2 = _run(args, tmp_path)
  assert r2.returncode == 0, r2.stderr[-3000:]
  assert f"Resumed from {ckpt}/ckpt-2 (train step 2)" in r2.stdout
  assert json.loads((root / "summary.json").read_text())["step"] == 4


@pytest.mark.slow
def test_default_dataset_is_collected_once_and_cached(tmp_path):
  root = tmp_path / "run"
  args = [f"--root_dir={root}", "--num_steps=2", "--default_dataset_steps=300", *TINY]
  r = _run(args, tmp_path)
  assert r.returncode == 0, r.stderr[-3000:]
  assert "No --dataset_dir given: collecting a default dataset of 300 transitions" in r.stdout
  assert (root / "default_dataset" / "Breakout" / "COMPLETE").exists()
  r2 = _run([*args[:1], "--num_steps=3", *args[2:]], tmp_path)
  assert r2.returncode == 0, r2.stderr[-3000:]
  assert "Using the cached default dataset" in r2.stdout


BAD_FLAGS = [
    (["--game=NotAGame"], "valid"),
    (["--agent=dqn9"], "--agent must be one of"),
    (["--alpha=-1"], "--alpha must be a finite number >= 0"),
    (["--num_pairs=0"], "--num_pairs must be an integer >= 1"),
    (["--dataset_dir=/nonexistent/replay_logs"], "does not exist"),
    ([f"--dataset_dir={os.path.join(ROOT, 'README.md')}"], "README.md is a file, not a directory"),
    (["--learning_rate=inf"], "flag --learning_rate=inf: inf is not a finite number >= 1e-12"),
    (["--alpha=nan"], "flag --alpha=nan: nan is not a finite number"),
    (["--batch_size=1000000000"], "--batch_size=1000000000 is larger than the default dataset"),
    (["--default_dataset_steps=10000000", "--batch_size=5000000"],
     "--batch_size=5000000 (about 1.01 MB per transition in a train step, --num_deltas=8) "
     "needs about 5034.10 GB, but only"),
    (["--root_dir=" + "a" * 300], "--root_dir: the path component "
     "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...' is 300 bytes long, longer than the file "
     "system allows"),
    ([f"--dataset_dir={TESTDATA}", "--batch_size=5000"],
     "--batch_size=5000 (about 1.01 MB per transition in a train step, --num_deltas=8) needs "
     f"at least 5,000 transitions, but {TESTDATA} holds 2,489"),
]


@pytest.fixture(scope="module")
def bad_flag_runs(tmp_path_factory):
  """train_offline.py on each command line of BAD_FLAGS, each in its own process and
  directory."""
  runs = []
  for flags, _ in BAD_FLAGS:
    cwd = tmp_path_factory.mktemp("bad_flags")
    runs.append(_run([f"--root_dir={cwd / 'r'}", *flags], cwd))
  return runs


@pytest.mark.slow
@pytest.mark.parametrize("flags,match", BAD_FLAGS)
def test_bad_flags(flags, match, bad_flag_runs):
  r = bad_flag_runs[BAD_FLAGS.index((flags, match))]
  assert r.returncode != 0
  assert match in r.stderr, r.stderr[-2000:]
  # The error alone (absl's parse errors add one line pointing at --helpshort), not after
  # the help text.
  assert len(r.stderr.strip().splitlines()) <= 2, r.stderr[-2000:]
  assert "Traceback" not in r.stderr


def test_helpshort_lists_the_flags_a_user_sets_and_helpfull_every_flag(tmp_path):
  """--helpshort: the binary's usage and the flags of its SHORT_FLAGS, in at most 60 lines;
  the advanced settings (the agents' and the run's other flags) only under --helpfull."""
  short = _run(["--helpshort"], tmp_path)
  lines = short.stdout.splitlines()
  assert len(lines) <= 60, short.stdout
  for name in ("game", "root_dir", "dataset_dir", "subset", "agent", "preset", "alpha",
               "num_steps", "seed", "eval_episodes", "reference_agents", "tf_threads"):
    assert any(line.startswith(f"  --{name}:") for line in lines), name
  for name in ("count_gram", "learning_rate", "num_deltas", "reading", "eval_interval"):
    assert f"--{name}:" not in short.stdout, name
  full = _run(["--helpfull"], tmp_path).stdout
  assert "Advanced settings (--helpfull only):" in full
  for name in ("count_gram", "learning_rate", "num_deltas", "reading", "eval_interval",
               "game", "alpha"):
    assert f"  --{name}:" in full, name


@pytest.mark.slow
def test_dataset_of_another_games_action_count(tmp_path):
  # The testdata is Breakout (4 actions) with the writer's ccvl_dataset.json; Pong has 6.
  r = _run([f"--dataset_dir={TESTDATA}", f"--root_dir={tmp_path / 'r'}", "--game=Pong",
            "--num_steps=1", *TINY], tmp_path)
  assert r.returncode != 0
  assert "train_offline.py: error:" in r.stderr and "Traceback" not in r.stderr
  assert ("records a dataset of another game or format: the game Breakout, but this run's game "
          "is Pong; the action set (ALE action ids) [0, 1, 3, 4], but Pong's is "
          "[0, 1, 3, 4, 11, 12]") in r.stderr
  assert not (tmp_path / "r" / "checkpoints").exists()


@pytest.mark.slow
def test_dataset_of_another_game_with_the_same_action_count_is_refused_before_loading(tmp_path):
  """A copy of the testdata recorded as Atlantis (4 actions like Breakout, ALE ids 0, 1, 11,
  12): before, only the action count was compared and the run trained to the end."""
  import shutil
  data = tmp_path / "replay_logs"
  shutil.copytree(TESTDATA, data)
  record = json.loads((data / "ccvl_dataset.json").read_text())
  record.update(game="Atlantis", action_set=[0, 1, 11, 12])
  (data / "ccvl_dataset.json").write_text(json.dumps(record))
  r = _run([f"--dataset_dir={data}", f"--root_dir={tmp_path / 'r'}", "--game=breakout",
            "--num_steps=1", *TINY], tmp_path)
  assert r.returncode != 0
  last = r.stderr.strip().splitlines()[-1]
  assert last.startswith(f"train_offline.py: error: {data / 'ccvl_dataset.json'} records a "
                         f"dataset of another game or format: the game Atlantis, but this run's "
                         f"game is Breakout; the action set"), last
  assert "Traceback" not in r.stderr and "Loading" not in r.stdout
  assert not (tmp_path / "r").exists()  # refused: --root_dir left as it was (absent)


@pytest.mark.slow
def test_corrupt_observation_file_is_refused_naming_it(tmp_path):
  """Four bytes flipped inside the compressed observation file of a copy of the testdata."""
  import shutil
  from tests import test_replay_verify
  data = tmp_path / "replay_logs"
  shutil.copytree(TESTDATA, data)
  path = data / "$store$_observation_ckpt.0.gz"
  blob = bytearray(path.read_bytes())
  for i in range(4):
    blob[test_replay_verify.OBS_FLIP_OFFSET + i] ^= 0xFF
  path.write_bytes(bytes(blob))
  r = _run([f"--dataset_dir={data}", f"--root_dir={tmp_path / 'r'}", "--num_steps=20",
            "--reference_agents=none"], tmp_path)
  assert r.returncode != 0
  last = r.stderr.strip().splitlines()[-1]
  assert last.startswith("train_offline.py: error: ") and f"{path} is corrupt: CRC" in last, last
  assert "Traceback" not in r.stderr
  # Refused while loading, after taking --root_dir's lock: the directory it made is gone again.
  assert not (tmp_path / "r").exists()


def test_presets_resolve_under_the_flags_and_reach_the_fingerprint():
  """--preset gives the training settings; a flag given explicitly wins; the resolved settings
  (not the flags) are in the run fingerprint, so a run cannot silently resume under another
  preset; the settings reach the agent's config."""
  from ccvl_tf.experiments.offline import config as offline_lib  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments import agent_registry  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.offline import presets  # pylint: disable=g-import-not-at-top
  with pytest.raises(ValueError, match="--learning_rate must be > 0"):
    offline_lib.OfflineConfig(agent_values={"learning_rate": 0.0}).validate()
  with pytest.raises(ValueError, match="--target_update_period must be an integer >= 1"):
    offline_lib.OfflineConfig(agent_values={"target_update_period": 0}).validate()
  with pytest.raises(ValueError, match="--preset must be one of demo, paper, got 'fast'"):
    offline_lib.OfflineConfig(preset="fast").validate()
  with pytest.raises(ValueError, match="--reference_agents must be one of"):
    offline_lib.parse_reference_agents("bc,sac")
  assert offline_lib.parse_reference_agents("bc, cql,bc") == ("bc", "cql")
  assert offline_lib.parse_reference_agents("none") == ()

  # The paper preset: alpha 0.1 (what train_offline always used), the agents' own training
  # defaults, and for CCVL the paper's reading (section 5: Algorithm 1, the IQN cosine head,
  # the raw linear n(s)^-1, 1/2 x^2 TD, no support head).
  overrides = lambda cfg, agent: offline_lib.resolve(cfg).learners[agent].overrides  # noqa: E731
  # The paper preset trains no reference agent; given, they train at its settings.
  paper_cfg = lambda **kw: offline_lib.OfflineConfig(  # noqa: E731
      preset="paper", reference_agents=("bc", "cql"), **kw)
  paper = overrides(paper_cfg(), "ccvl")
  # Only where the paper's literal reading differs from CCVL's default reading (Algorithm 1,
  # reading 'paper', is both's).
  reading = {"delta_head": "cosine", "td_loss": "squared", "count_normalization": "none"}
  assert paper == {"alpha": 0.1, **reading}
  given = overrides(
      paper_cfg(agent_values={"alpha": 2.0, "learning_rate": 2.5e-4}), "ccvl")
  assert given == {"alpha": 2.0, "learning_rate": 2.5e-4, **reading}
  assert overrides(paper_cfg(), "cql") == {"alpha": 0.1}
  assert overrides(paper_cfg(), "bc") == {}
  demo = overrides(offline_lib.OfflineConfig(preset="demo"), "cql")
  # The demo preset's CQL settings, as docs/budget.md's rule 2 (lr x2) and docs/demo_alpha.md's
  # rule 1 (alpha 3) chose them.
  assert demo == {"alpha": 3.0, "learning_rate": 1e-3, "dr3_coef": 0.0}
  ccvl_demo = overrides(offline_lib.OfflineConfig(preset="demo"), "ccvl")
  # ... and CCVL's are CQL's own: docs/ladder.md's rule chose the default that learns at them.
  assert ccvl_demo == {"alpha": 3.0, "learning_rate": 1e-3, "dr3_coef": 0.0}
  assert "Preset demo" in presets.describe("demo", "ccvl", {})
  assert "Preset paper" in presets.describe("paper", "ccvl", {}) and "alpha=0.1" in \
      presets.describe("paper", "ccvl", {})

  fingerprints = lambda cfg: {  # noqa: E731
      name: plan.fingerprint
      for name, plan in offline_lib.resolve(cfg).with_dataset({}, 10).learners.items()}
  a = fingerprints(paper_cfg())["ccvl"]
  b = fingerprints(paper_cfg(agent_values={"learning_rate": 2.5e-4,
                                           "target_update_period": 500}))["ccvl"]
  ref = fingerprints(paper_cfg())["bc"]
  assert a["alpha"] == 0.1 and a["preset"] == "paper" and "learning_rate" not in a
  assert b["learning_rate"] == 2.5e-4 and b["target_update_period"] == 500
  assert ref["agent"] == "bc" and "alpha" not in ref
  settings = agent_registry.make_settings(learning_rate=2.5e-4, target_update_period=500, alpha=0.1,
                                       adam_epsilon=1e-8, dr3_coef=0.0, dataset_size=10.0)
  from ccvl_tf.experiments import agent_registry  # pylint: disable=g-import-not-at-top
  cfg = agent_registry.get_agent_spec("ccvl").resolve(settings).agent_config
  assert cfg.learning_rate == 2.5e-4 and cfg.target_update_period == 500
  assert cfg.adam_epsilon == 1e-8 and cfg.dr3_coef == 0.0


@pytest.mark.slow
def test_reference_agents_are_trained_beside_and_tabulated(tmp_path):
  """--reference_agents=bc,cql: each is trained the same number of steps in
  root/reference/<agent> (its own checkpoints and fingerprint), exported, and a row of the
  results table (random, BC, CQL, CCVL (adaptive), Fixed-CCVL, in that order)."""
  root = tmp_path / "run"
  tiny = [a for a in TINY if not a.startswith("--reference_agents")]
  r = _run([f"--dataset_dir={TESTDATA}", f"--root_dir={root}", "--num_steps=2",
            "--eval_interval=0", "--reference_agents=bc,cql", "--preset=paper", *tiny], tmp_path)
  assert r.returncode == 0, r.stderr[-3000:]
  assert "Preset paper" in r.stdout and "Reference agent bc: training 2 steps" in r.stdout
  for name in ("bc", "cql"):
    ref = root / "reference" / name
    assert (ref / "policy" / "saved_model.pb").exists()
    assert json.loads((ref / "policy" / "ccvl_policy.json").read_text())["game"] == "Breakout"
    assert sorted(f for f in os.listdir(ref / "checkpoints") if f.endswith(".index")) == \
        ["ckpt-2.index"]
    assert json.loads((ref / "checkpoints" / "fingerprint.json").read_text())["agent"] == name
  summary = json.loads((root / "summary.json").read_text())
  assert [row["policy"] for row in summary["results_table"]] == [
      "random", "BC", "CQL", "CCVL (adaptive)", "Fixed-CCVL"]
  assert summary["references"]["CQL"]["settings"] == {"alpha": 0.1}
  assert summary["settings"]["alpha"] == 0.1 and summary["settings"]["delta_head"] == "cosine"
  assert summary["references"]["BC"]["step"] == 2
  # The paper preset's settings in force, for the learner and each reference.
  assert summary["learner_settings"]["delta_head"] == "cosine"
  assert summary["references"]["CQL"]["learner_settings"]["agent_config"] == "CQLConfig"
  assert summary["references"]["CQL"]["learner_settings"]["alpha"] == 0.1
  # The phase times: printed as a table at the end, kept in summary.json.
  assert "Phase times (wall clock):" in r.stdout and "| training bc |" in r.stdout
  for phase in ("training ccvl", "training bc", "training cql", "export bc", "diagnostics",
                "evaluation: CCVL (adaptive), for the diagnostics and the table",
                "evaluation: random", "evaluation: Fixed-CCVL", "total"):
    assert summary["phase_times"][phase] >= 0.0, phase


def test_a_summary_config_of_the_flat_shape_gives_the_same_config_and_fingerprint():
  """summary.json's 'config' keeps the agent settings by name (alpha, num_deltas, ...,
  ccvl_options), as run directories made before the agent settings were one dict; reading
  it back gives the same config, record and run fingerprint."""
  from ccvl_tf.experiments.offline import config as offline_lib  # pylint: disable=g-import-not-at-top
  cfg = offline_lib.OfflineConfig(preset="paper", agent_values={
      "alpha": 2.0, "num_deltas": 2, "objective": "bound", "learning_rate": 1e-4})
  saved = json.loads(json.dumps(offline_lib.record(cfg)))
  assert saved["alpha"] == 2.0 and saved["num_deltas"] == 2 and saved["num_pairs"] == 2
  assert saved["dr3_coef"] is None and saved["ccvl_options"] == {"objective": "bound"}
  again = offline_lib.from_record(saved)
  assert json.loads(json.dumps(offline_lib.record(again))) == saved

  fingerprint = lambda c: offline_lib.resolve(c).with_dataset({}, 10).learner.fingerprint  # noqa: E731
  assert fingerprint(again) == fingerprint(cfg)
