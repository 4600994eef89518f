"""What every binary does with the paths and lists it is given, and with Ctrl-C, checked in one
shared place (ccvl_tf/runtime/config_flags.py: `from_flags`, `run`; the checks in
ccvl_tf/runtime/paths.py): an output path that cannot be written, a list flag with a repeated, empty
or unknown item, and an interrupt each end in one line naming the flag (or where the rerun
resumes)."""
import ast
import dataclasses
import glob
import importlib
import os
import re
import signal
import subprocess
import sys
import time
from typing import Sequence

import pytest

from absl import app
from absl import flags

from ccvl_tf.runtime import config_flags
from ccvl_tf.runtime.config_flags import setting
from tests import forked_binary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTDATA = os.path.join(ROOT, "testdata", "dqn_replay", "Breakout", "1", "replay_logs")
# PYTHONPATH: the binaries import this checkout's ccvl_tf, whatever is installed.
ENV = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="3",
           PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))

# Every run config a binary takes its flags from (docs/ARCHITECTURE.md, "Run configs and their
# flags"), as module:class.
BINARY_CONFIGS = [
    "ccvl_tf.experiments.offline.config:OfflineConfig",
    "ccvl_tf.experiments.offline.config:DiagnoseConfig",
    "ccvl_tf.experiments.offline.ablation:AblationConfig",
    "ccvl_tf.experiments.offline.demo_seeds:DemoSeedsConfig",
    "ccvl_tf.experiments.offline.default_dataset:CollectConfig",
    "ccvl_tf.experiments.online.config:OnlineConfig",
    "ccvl_tf.experiments.online.finetune_suite:FinetuneSuiteConfig",
    "ccvl_tf.experiments.compare.config:CompareConfig",
    "ccvl_tf.experiments.compare.alpha_sweep:AlphaSweepConfig",
    "ccvl_tf.experiments.score_export:EvaluateConfig",
    "ccvl_tf.experiments.gridworld.runner:Config",
    "ccvl_tf.data.minatar_datasets:BuildConfig",
    "ccvl_tf.bench:BenchmarkConfig",
    "ccvl_tf.bench.online_scaleout:ScaleoutConfig",
    "ccvl_tf.bench.gpu_check:GpuCheckConfig",
    "ccvl_tf.experiments.offline.headroom_eval:HeadroomConfig",
    "ccvl_tf.experiments.online.config:ServerConfig",
    "ccvl_tf.experiments.fit.settings:FitSettings",
    "ccvl_tf.data.gym_datasets:BuildConfig",
]
# Configs a binary takes flags from that hold an agent's settings only (no paths, no run).
# and configs that hold an input only (no output beside it).
AGENT_CONFIGS = ["ccvl_tf.agents.ccvl_bounds_agent:ExplorationConfig",
                 "ccvl_tf.experiments.fit.settings:DataSetting"]
OUTPUT_NAMES = {"output_dir": "dir", "root_dir": "dir", "output": "file", "checkpoint_dir": "dir"}
# The path settings a binary only reads (may be remote: gs://); every other path setting is an
# output, declared so and checked local and writable in config_flags.from_flags.
INPUT_PATHS = {"dataset_dir", "heldout_dir", "data_dir", "policy_dir", "compare_dir",
               "offline_dir", "dataset"}
_PATH_NAME = re.compile(r"(_dir|_dirs|_path|_file|^output\w*)$")
# Flags a binary defines itself (absl's DEFINE_*), outside a config: each neither a path nor a
# setting another binary shares. A new one belongs in a config, where its kind is declared.
OWN_FLAGS = {"reverb_server.py": {"port"},
             "finetune_online.py": {"prepare_gridworld_offline", "strategy"}}


def _binary_sources():
  return sorted(glob.glob(os.path.join(ROOT, "binaries", "*.py")))


def _aliases(tree):
  """{name: module path} of a binary's imports."""
  out = {}
  for node in ast.walk(tree):
    if isinstance(node, ast.ImportFrom) and node.module:
      for a in node.names:
        out[a.asname or a.name] = f"{node.module}.{a.name}"
    elif isinstance(node, ast.Import):
      for a in node.names:
        out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
  return out


def _binary_configs():
  """{binary: ['module:Class', ...]}: every config_flags.define(<module>.<Class>) of
  binaries/*.py, read from their source."""
  out = {}
  for path in _binary_sources():
    tree = ast.parse(open(path).read())
    aliases = _aliases(tree)
    for node in ast.walk(tree):
      if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
          and node.func.attr == "define" and isinstance(node.func.value, ast.Name)
          and node.func.value.id == "config_flags"):
        arg = node.args[0]
        out.setdefault(os.path.basename(path), []).append(
            f"{aliases[arg.value.id]}:{arg.attr}")
  return out


def test_every_config_a_binary_takes_flags_from_is_listed_here():
  """The checks below go over BINARY_CONFIGS: a binary's config missing there would escape
  them (gpu_check.py's and headroom.py's were)."""
  found = {c for configs in _binary_configs().values() for c in configs}
  assert found == set(BINARY_CONFIGS) | set(AGENT_CONFIGS), (
      sorted(found - set(BINARY_CONFIGS) - set(AGENT_CONFIGS)),
      sorted(set(BINARY_CONFIGS) | set(AGENT_CONFIGS) - found))


def test_every_path_setting_of_every_binary_is_an_output_or_a_named_input():
  """Before, reverb_server.py's --checkpoint_dir was a plain absl flag: ram://ck started a
  server (writing a local 'ram:/ck'), where every other output refuses a remote path."""
  unclassified = []
  for path in BINARY_CONFIGS + AGENT_CONFIGS:
    for f, spec in config_flags.flag_fields(_class(path)):
      if _PATH_NAME.search(f.name) and spec.output is None and f.name not in INPUT_PATHS:
        unclassified.append(f"{path}.{f.name}")
  assert not unclassified, (f"path settings neither declared output='dir'/'file' nor listed "
                            f"in INPUT_PATHS: {unclassified}")


def test_no_binary_defines_a_flag_of_its_own_but_the_listed_ones():
  own = {}
  for path in _binary_sources():
    for node in ast.walk(ast.parse(open(path).read())):
      if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
          and node.func.attr.startswith("DEFINE") and node.args
          and isinstance(node.args[0], ast.Constant)):
        own.setdefault(os.path.basename(path), set()).add(node.args[0].value)
  assert own == OWN_FLAGS, own


def test_a_remote_reverb_checkpoint_directory_is_refused_on_every_route(tmp_path, monkeypatch):
  from ccvl_tf.data import reverb_replay  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.online import config as online_config  # pylint: disable=g-import-not-at-top
  fv = flags.FlagValues()
  config_flags.define(online_config.ServerConfig, flag_values=fv)
  fv(["reverb_server.py", "--checkpoint_dir=ram://ck"])
  with pytest.raises(app.UsageError, match=r"^--checkpoint_dir ram://ck is a remote path; "
                                           r"outputs must go to a local directory"):
    config_flags.from_flags(online_config.ServerConfig, flag_values=fv)
  monkeypatch.chdir(tmp_path)
  with pytest.raises(ValueError, match=r"^the Reverb checkpoint directory ram://ck is a remote "
                                       r"path"):
    reverb_replay.start_server([], 0, "ram://ck")
  assert os.listdir(tmp_path) == []


def test_every_thread_setting_of_every_binary_is_bounded_before_anything_runs():
  """Before, train_offline.py --tf_threads=100000 hung after loading its data (the flag's
  bound was 2**31-1)."""
  from ccvl_tf.runtime import run_settings  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.offline import config as offline_config  # pylint: disable=g-import-not-at-top
  seen = []
  for path in BINARY_CONFIGS + AGENT_CONFIGS:
    cls = _class(path)
    for f, spec in config_flags.flag_fields(cls):
      if "threads" in f.name:
        seen.append(f.name)
        assert spec.upper_bound is not None and spec.upper_bound <= run_settings.MAX_THREADS, (
            path, f.name, spec.upper_bound)
        with pytest.raises(ValueError, match=rf"^--{f.name} must be an integer >= \d+ and "
                                             rf"<= {run_settings.MAX_THREADS}, got 100000$"):
          config_flags.check_values(cls, {f.name: 100000}, prefix="--")
  assert {"tf_threads", "threads_per_worker"} <= set(seen)
  with pytest.raises(ValueError, match=r"^--tf_threads must be an integer >= 0 and <= 1024, "
                                       r"got 100000$"):
    offline_config.OfflineConfig(tf_threads=100000, root_dir=str(ROOT) + "/no/such").validate()


def _class(path):
  module, name = path.split(":")
  return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("path", BINARY_CONFIGS)
def test_every_binarys_output_path_is_declared_so_and_checked_in_one_place(path):
  """Before, only train_offline.py and collect_dataset.py checked theirs: gridworld.py,
  evaluate.py, demo_seeds.py and compare.py gave 14-19-line OSError tracebacks."""
  cls = _class(path)
  outputs = {f.name: spec.output for f, spec in config_flags.flag_fields(cls)
             if f.name in OUTPUT_NAMES}
  assert outputs, f"{path} has no output path flag"
  for name, kind in outputs.items():
    assert kind == OUTPUT_NAMES[name], (path, name, kind)


@dataclasses.dataclass
class _Outputs:
  out: str = setting("", "A directory.", output="dir")
  report: str = setting("", "A file.", output="file")
  seeds: Sequence[str] = setting(("0", "1"), "Seeds.", kind="csv",
                                 parse=lambda t: tuple(x for x in str(t).split(",")))
  names: Sequence[str] = setting(("a",), "Names.", kind="list", flag_default=["a"])
  agents: Sequence[str] = setting(("bc",), "Agents.", kind="csv", parse=lambda t: _agents(t))


def _agents(text):
  for name in str(text).split(","):
    if name not in ("bc", "cql"):
      raise ValueError(f"--agents must be one of bc, cql, got {name!r}")
  return tuple(str(text).split(","))


def _from(*args):
  fv = flags.FlagValues()
  config_flags.define(_Outputs, flag_values=fv)
  fv(["prog", *args])
  return config_flags.from_flags(_Outputs, flag_values=fv)


def test_output_paths_that_cannot_be_written_are_one_usage_error_naming_the_flag(tmp_path):
  a_file = tmp_path / "a_file"
  a_file.write_text("x")
  cases = [
      ([f"--out={a_file}"], f"--out {a_file} is a file, not a directory"),
      ([f"--out={a_file}/sub"], f"--out {a_file}/sub: {a_file} is a file, so the directory "
                                f"cannot be created"),
      ([f"--out={tmp_path / ('b' * 300)}"], "--out: the path component 'bbbbbbbbbbbbbbbbbbbbbbbbb"
                                            "bbbbbbbbbbbb...' is 300 bytes long"),
      ([f"--report={tmp_path}"], f"--report {tmp_path} is a directory, not a file"),
      ([f"--report={a_file}/r.json"], f"--report {a_file}/r.json: {a_file} is a file, so the "
                                      f"directory cannot be created"),
  ]
  for args, message in cases:
    with pytest.raises(app.UsageError) as e:
      _from(*args)
    assert str(e.value).startswith(message), (args, str(e.value))
  cfg = _from(f"--out={tmp_path / 'new' / 'dir'}", f"--report={tmp_path / 'r.json'}")
  assert cfg.out == str(tmp_path / "new" / "dir") and not (tmp_path / "new").exists()


def test_list_flags_with_a_repeated_empty_or_unknown_item_are_one_usage_error():
  cases = [
      (["--seeds=0,0"], "--seeds=0,0 lists 0 more than once; give each once"),
      (["--seeds=0,,1"], "--seeds=0,,1 has an empty item (a stray comma)"),
      (["--seeds=0,1,"], "--seeds=0,1, has an empty item (a stray comma)"),
      (["--names=a,b,a"], "--names=a,b,a lists a more than once"),
      (["--agents=foo"], "--agents must be one of bc, cql, got 'foo'"),
  ]
  for args, message in cases:
    with pytest.raises(app.UsageError) as e:
      _from(*args)
    assert str(e.value) == message or str(e.value).startswith(message), (args, str(e.value))
  assert _from("--seeds=3,1", "--agents=bc,cql").seeds == ("3", "1")


def _run(binary, *args, cwd=ROOT, timeout=300):
  """`binary` on `args` in its own process (tests/forked_binary.py)."""
  return forked_binary.run(binary, args, cwd=cwd, env=ENV, timeout=timeout)


@pytest.mark.slow
@pytest.mark.parametrize("binary,args", [
    ("gridworld.py", []),
    ("evaluate.py", ["--policy_dir=/nonexistent", "--game=gridworld"]),
    ("demo_seeds.py", []),
    ("compare.py", []),
])
def test_a_binary_given_a_file_as_output_dir_says_so_in_one_line(binary, args, tmp_path):
  a_file = tmp_path / "a_file"
  a_file.write_text("x")
  r = _run(binary, f"--output_dir={a_file}", *args)
  assert r.returncode != 0
  assert r.stderr.strip().splitlines() == [
      f"{binary}: error: --output_dir {a_file} is a file, not a directory (--helpshort lists "
      f"the flags)"], r.stderr[-3000:]
  assert a_file.read_text() == "x"


@pytest.mark.slow
@pytest.mark.parametrize("binary,args,message", [
    ("demo_seeds.py", ["--seeds=0,0"], "--seeds=0,0 lists 0 more than once; give each once"),
    ("demo_seeds.py", ["--seeds=-1"], "--seeds must be integers >= 0, got '-1'"),
    ("train_offline.py", ["--reference_agents=foo"],
     "--reference_agents must be one of "),
])
def test_a_bad_list_flag_is_one_line_without_the_usage_text(binary, args, message, tmp_path):
  """Before: demo_seeds.py printed 21 lines of usage first, train_offline.py a 33-line
  traceback ending in the right ValueError."""
  r = _run(binary, f"--output_dir={tmp_path / 'o'}" if binary == "demo_seeds.py"
           else f"--root_dir={tmp_path / 'r'}", *args)
  assert r.returncode != 0
  lines = r.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith(f"{binary}: error: {message}"), r.stderr[-3000:]
  assert not (tmp_path / "o").exists() and not (tmp_path / "r").exists()


@pytest.mark.slow
def test_finetune_online_into_its_own_offline_run_is_refused_in_one_line(tmp_path):
  """--root_dir equal to --offline_dir: before, 13 lines ending in a dump of tf.Variable
  arrays (the offline checkpoint restored as the fine-tuning run's own)."""
  offline = tmp_path / "offline"
  (offline / "checkpoints").mkdir(parents=True)
  r = _run("finetune_online.py", f"--offline_dir={offline}", f"--root_dir={offline}/.")
  assert r.returncode != 0
  assert r.stderr.strip().splitlines() == [
      f"finetune_online.py: error: --root_dir {offline}/. is --offline_dir: the fine-tuning run "
      f"would write its checkpoints among the offline run's and resume from them as its own; "
      f"give another --root_dir (the offline run is only read) (--helpshort lists the flags)"], \
      r.stderr[-3000:]
  assert os.listdir(offline) == ["checkpoints"]


@pytest.mark.slow
def test_ctrl_c_during_training_is_one_line_naming_the_checkpoint_the_rerun_resumes_from(
    tmp_path):
  """SIGINT (what Ctrl-C sends) to train_offline.py while it trains: before, a 62-line
  KeyboardInterrupt traceback. The same command then resumes from the checkpoint named."""
  root = tmp_path / "run"
  args = [f"--dataset_dir={TESTDATA}", f"--root_dir={root}", "--num_steps=100000",
          "--reference_agents=none", "--batch_size=4", "--num_deltas=2", "--num_pairs=2",
          "--log_interval=1", "--checkpoint_interval=2", "--eval_interval=0",
          "--eval_episodes=1", "--eval_max_steps=10", "--num_grid_deltas=3"]
  # A test run started in the background (nohup, `cmd &` in a script) inherits SIGINT ignored,
  # and Python keeps an inherited ignore: the child gets SIGINT's default back, as an
  # interactive terminal would give it, so that Python installs its Ctrl-C handler.
  proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "binaries", "train_offline.py"),
                           *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=ENV, cwd=tmp_path,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
  try:
    deadline = time.time() + 300
    for line in proc.stdout:  # the first progress line after a checkpoint (step 2)
      if line.startswith("step 3/") or time.time() > deadline:
        break
    proc.send_signal(signal.SIGINT)
    try:
      _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
      proc.send_signal(signal.SIGUSR1)  # every thread's stack (config_flags.run), then kill
      time.sleep(5)
      proc.kill()
      _, err = proc.communicate()
      pytest.fail(f"no exit 120 s after SIGINT; its stderr and stacks:\n{err[-6000:]}")
  finally:
    if proc.poll() is None:
      proc.kill()
  assert proc.returncode == config_flags.INTERRUPTED_EXIT, err[-3000:]
  lines = err.strip().splitlines()
  assert len(lines) == 1, err[-3000:]
  ckpt = sorted((f for f in os.listdir(root / "checkpoints") if f.endswith(".index")),
                key=lambda f: int(f[5:-6]))[-1][:-6]
  assert lines[0].startswith("train_offline.py: interrupted (Ctrl-C): training stopped at "
                             "train step "), lines[0]
  assert lines[0].endswith(f"; the last checkpoint {root}/checkpoints/{ckpt} is intact: rerun "
                           f"the same command to resume from it"), lines[0]
  step = int(ckpt.split("-")[1])
  r = subprocess.run([sys.executable, os.path.join(ROOT, "binaries", "train_offline.py"),
                      *[a for a in args if not a.startswith("--num_steps")],
                      f"--num_steps={step + 2}"], capture_output=True, text=True, env=ENV,
                     cwd=tmp_path, timeout=600)
  assert r.returncode == 0, r.stderr[-3000:]
  assert f"Resumed from {root}/checkpoints/{ckpt} (train step {step})" in r.stdout


@pytest.mark.parametrize("binary", sorted(n for n in os.listdir(os.path.join(ROOT, "binaries"))
                                          if n.endswith(".py")))
def test_every_binarys_usage_text_prints_its_percent_signs(binary):
  """absl's usage text is the module docstring with each '%s' (also '% s') replaced by the
  program's path and each '%%' by '%': a bare '%' in "95% stratified" printed
  "95binaries/compare.pytratified". Every '%' of a docstring is written '%%'."""
  import ast  # pylint: disable=g-import-not-at-top
  with open(os.path.join(ROOT, "binaries", binary)) as f:
    doc = ast.get_docstring(ast.parse(f.read()), clean=False) or ""
  assert "%" not in doc.replace("%%", ""), (binary, doc)
  # absl's usage (absl/app.py): the docstring %-formatted with argv[0] per specifier.
  specifiers = doc.count("%") - 2 * doc.count("%%")
  assert doc % ((binary,) * specifiers) == doc.replace("%%", "%")


def test_a_setting_given_without_the_one_it_depends_on_is_refused_naming_both():
  """Before, train_offline.py --pool_swap_steps=3 without --pool_checkpoints was ignored and
  recorded as 3 in summary.json."""
  from ccvl_tf.experiments.offline import config as offline_config  # pylint: disable=g-import-not-at-top
  with pytest.raises(app.UsageError, match=r"^--pool_swap_steps=3 takes effect only with "
                                           r"--pool_checkpoints, which is off \(0\): give "
                                           r"--pool_checkpoints or leave --pool_swap_steps out$"):
    offline_config.config_from_args(["--pool_swap_steps=3"])
  cfg = offline_config.config_from_args(["--pool_swap_steps=3", "--pool_checkpoints=2"])
  assert (cfg.pool_swap_steps, cfg.pool_checkpoints) == (3, 2)
  assert offline_config.config_from_args([]).pool_checkpoints == 0  # the default: no partner
  # Every declared dependency names a setting of its own config.
  for path in BINARY_CONFIGS + AGENT_CONFIGS:
    fields = {f.name for f in dataclasses.fields(_class(path))}
    for f, spec in config_flags.flag_fields(_class(path)):
      assert spec.needs is None or spec.needs in fields, (path, f.name, spec.needs)
