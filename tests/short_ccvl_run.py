"""The short CCVL run of tests/test_short_run_regression.py, trained one of two ways, each in its
own process (run as a script, not collected by pytest):

  python tests/short_ccvl_run.py binary OUT_DIR
      train_offline.py's path: its flags (FLAGS), `config_from_flags`, `runner.setup` and
      `runner.train` (no export, diagnostics or results table); checkpoint OUT_DIR/run/
      checkpoints/ckpt-<STEPS>.
  python tests/short_ccvl_run.py library OUT_DIR [NUM_STEPS]
      the same agent built and trained through the library alone: the frame store, the batch
      sampler, CCVLAgent with every setting of CCVLConfig and QNetworkConfig spelled out, one
      train_on_batch per batch; no flags, presets, registry, config resolution or training
      loop, for NUM_STEPS steps (default STEPS). Writes OUT_DIR/metrics.json (each step's scalar
      metrics), OUT_DIR/checkpoints/ckpt-<NUM_STEPS> and, after REFERENCE_STEPS steps,
      OUT_DIR/reference_steps/ckpt-<REFERENCE_STEPS>.
  python tests/short_ccvl_run.py reference
      the library's run under the binaries' kernel pinning, its first REFERENCE_STEPS steps'
      REFERENCE_METRICS written to REFERENCE with this machine's CPU identity. Only for a
      deliberate change of what the run trains (a new default, a new loss), never to make
      the test pass after a refactor.

Both fix the CPU kernels before TensorFlow loads as the binaries do (tf_setup.pin_cpu_kernels:
a value the environment sets wins, so a caller can run either under another kernel setting).
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTDATA = os.path.join(ROOT, "testdata", "dqn_replay", "Breakout", "1", "replay_logs")
STEPS = 150
SEED = 100
BATCH_SIZE = 32
NUM_TRANSITIONS = 2489   # the testdata's transitions (subset all): |D| of the count estimate
REFERENCE = os.path.join(ROOT, "testdata", "short_ccvl_run_reference.json")
# The first target period (the target network is first copied after step 50); later steps
# are left out: other CPUs' kernels make them part (tests/test_short_run_regression.py).
REFERENCE_STEPS = 50
REFERENCE_METRICS = ("loss", "td_term", "q_data", "regularizer_term", "cql_gap")

# The demo preset's CCVL (what `make demo` trains) with every agent setting given, so that a
# later change of a default or of the preset does not move the binary's run while the
# library's stays; a target period the run reaches.
FLAGS = [
    "--game=Breakout", "--subset=all", f"--seed={SEED}", "--tf_threads=2",
    "--deterministic=false", f"--batch_size={BATCH_SIZE}", f"--num_steps={STEPS}",
    f"--checkpoint_interval={STEPS}", "--log_interval=50", "--summary_interval=50",
    "--eval_interval=0", "--eval_episodes=1", "--eval_max_steps=20", "--eval_env=sequential",
    "--num_grid_deltas=4", "--reference_agents=none", "--default_dataset_steps=50000",
    "--default_dataset_policy=auto", "--default_dataset_env=auto", "--behaviour_epsilon=0.25",
    "--agent=ccvl", "--preset=demo", "--alpha=1", "--learning_rate=1e-3",
    "--adam_epsilon=3.125e-4", "--dr3_coef=0", "--target_update_period=50", "--num_deltas=8",
    "--num_pairs=2", "--policy_delta=0.5", "--objective=algorithm1", "--gap=logsumexp",
    "--delta_head=monotone", "--gap_weight=0", "--support_threshold=0",
    "--bonus_counts=state", "--count_normalization=batch", "--count_ridge=1e-3",
    "--count_ridge_mode=relative", "--count_weight=linear", "--delta_weight=sqrt_log",
    "--td_loss=huber", "--belief_resample=episode"]


def cpu_identity() -> str:
  """The CPU's model name and the instruction-set flags oneDNN dispatches on."""
  model, flags = "unknown CPU", set()
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        key, _, value = line.partition(":")
        if key.strip() == "model name" and model == "unknown CPU":
          model = value.strip()
        elif key.strip() == "flags" and not flags:
          flags = set(value.split())
  except OSError:
    pass
  shown = [f for f in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile")
           if f in flags]
  return f"{model} ({', '.join(shown) or 'no AVX2'})"


def _pin_kernels():
  import ccvl_tf  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  from ccvl_tf.runtime import quiet  # pylint: disable=g-import-not-at-top
  quiet.quiet_start()
  from ccvl_tf.experiments import tf_setup  # pylint: disable=g-import-not-at-top
  tf_setup.pin_cpu_kernels()
  return tf_setup


def binary(out_dir: str) -> None:
  tf_setup = _pin_kernels()
  sys.path.insert(0, os.path.join(ROOT, "binaries"))
  import train_offline  # pylint: disable=g-import-not-at-top  (defines the binary's flags)
  from absl import flags  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.offline import config, runner  # pylint: disable=g-import-not-at-top
  flags.FLAGS(["train_offline.py", f"--dataset_dir={TESTDATA}",
               f"--root_dir={os.path.join(out_dir, 'run')}", *FLAGS])
  cfg = train_offline.config_from_flags()
  tf_setup.configure_tensorflow(cfg.tf_threads, cfg.deterministic)
  runner.train(runner.setup(config.resolve(cfg), print), print)


def library(out_dir: str, num_steps: int = STEPS) -> None:
  tf_setup = _pin_kernels()
  tf_setup.configure_tensorflow(2, False)
  import keras  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tf_agents.specs import tensor_spec  # pylint: disable=g-import-not-at-top
  from tf_agents.trajectories import time_step as ts  # pylint: disable=g-import-not-at-top
  from ccvl_tf.agents import ccvl_agent  # pylint: disable=g-import-not-at-top
  from ccvl_tf.algorithm import networks  # pylint: disable=g-import-not-at-top
  from ccvl_tf.algorithm.readings import paper  # pylint: disable=g-import-not-at-top
  from ccvl_tf.data import frame_store, pipeline  # pylint: disable=g-import-not-at-top

  store = frame_store.FrameStore.from_replay(TESTDATA, "all", num_actions=4)
  assert store.num_transitions == NUM_TRANSITIONS, store.num_transitions
  config = ccvl_agent.CCVLConfig(
      gamma=0.99, learning_rate=1e-3, adam_epsilon=3.125e-4, target_update_period=50,
      collect_epsilon=0.01, seed=SEED, td_loss="huber", huber_kappa=1.0, dr3_coef=0.0,
      num_deltas=8, num_pairs=2, alpha=1.0, reading=paper.Paper(), delta_head="monotone",
      count_ridge=1e-3, count_ridge_mode="relative", count_normalization="batch",
      count_decay=0.999,
      count_refresh_period=100, policy_delta=0.5, belief_resample="episode", jit_compile=False)
  network = networks.QNetworkConfig(
      torso="nature", mlp_units=(256, 256), torso_units=512, n_cos=64, hidden_units=0,
      delta_entry="features", phi_delta=0.5)
  observation = tensor_spec.BoundedTensorSpec((84, 84, 4), tf.uint8, 0, 255)
  action = tensor_spec.BoundedTensorSpec((), tf.int64, 0, 3)
  keras.utils.set_random_seed(SEED)  # the initial weights
  agent = ccvl_agent.CCVLAgent(ts.time_step_spec(observation), action, config=config,
                               network_config=network, dataset_size=float(NUM_TRANSITIONS))

  def save(directory, step):  # as the training loop saves: one save of a fresh manager
    tf.train.CheckpointManager(agent.make_checkpoint(), os.path.join(out_dir, directory),
                               max_to_keep=1).save(checkpoint_number=step)

  steps = []
  for i in range(num_steps):
    metrics = agent.train_on_batch(pipeline.sample_batch(store, BATCH_SIZE, SEED, i))
    steps.append({k: float(np.asarray(v)) for k, v in metrics.items()
                  if np.asarray(v).size == 1 and k not in ("step", "finite")})
    if i + 1 == REFERENCE_STEPS:
      save("reference_steps", i + 1)
  save("checkpoints", num_steps)
  with open(os.path.join(out_dir, "metrics.json"), "w") as f:
    json.dump(steps, f)


def reference() -> None:
  import tempfile  # pylint: disable=g-import-not-at-top
  for name in ("TF_ENABLE_ONEDNN_OPTS", "ONEDNN_MAX_CPU_ISA"):
    os.environ.pop(name, None)  # the binaries' pinning
  with tempfile.TemporaryDirectory() as out_dir:
    library(out_dir, REFERENCE_STEPS)
    with open(os.path.join(out_dir, "metrics.json")) as f:
      steps = json.load(f)
  from ccvl_tf.experiments import tf_setup  # pylint: disable=g-import-not-at-top
  record = {"cpu": cpu_identity(), "kernels": tf_setup.cpu_kernels_in_force(), "tf_threads": 2,
            "steps": REFERENCE_STEPS,
            "metrics": {k: [s[k] for s in steps] for k in REFERENCE_METRICS}}
  text = json.dumps(record, indent=1)
  for k in REFERENCE_METRICS:  # one line per metric
    text = text.replace(json.dumps(record["metrics"][k], indent=1).replace("\n", "\n  "),
                        json.dumps(record["metrics"][k]))
  with open(REFERENCE, "w") as f:
    f.write(text + "\n")


if __name__ == "__main__":
  if sys.argv[1] == "reference":
    reference()
  elif sys.argv[1] == "binary":
    binary(sys.argv[2])
  else:
    library(sys.argv[2], *[int(n) for n in sys.argv[3:4]])
