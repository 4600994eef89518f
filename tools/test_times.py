"""Where the test suite's time goes: reads the output of `pytest --durations=0` and prints the
slowest tests and the time per file and per kind of work (markdown tables, as in BUILD.md).

  .venv/bin/python -m pytest tests -n 2 --dist worksteal --durations=0 > /tmp/t.log
  .venv/bin/python tools/test_times.py /tmp/t.log [--top=30]

A test's time is its setup, call and teardown together (a module fixture's work is charged to
the first test that uses it). The kind is the file's main work, read from its code: starting
the binaries (end-to-end runs, refusals, kills and restarts), fresh TensorFlow-only processes
that load exported SavedModels, rliable's bootstraps recomputing the committed results tables,
or work in the pytest process (training steps, tracing, datasets, exact solutions). With
workers (-n 2) the times add up to more than the wall clock: they are per test, on whichever
worker ran it.
"""
import argparse
import collections
import re
import sys

BINARY_RUNS = {
    "test_alpha_sweep.py", "test_benchmark.py", "test_binary_inputs.py",
    "test_collect_dataset.py", "test_compare.py", "test_compare_ray.py", "test_config_flags.py",
    "test_default_dataset.py", "test_demo_seeds.py", "test_diagnose_binary.py",
    "test_evaluate_binary.py", "test_finetune_minatar.py", "test_finetune_own_data.py",
    "test_fit.py", "test_forked_binary.py", "test_gpu_check.py", "test_gridworld_binary.py",
    "test_headroom.py", "test_pool_resume.py", "test_reverb_port.py", "test_untaken_settings.py",
    "test_minatar_datasets.py", "test_offline_reproducibility.py", "test_online.py",
    "test_online_deterministic.py", "test_online_scaleout.py", "test_quiet_start.py",
    "test_readme_commands.py", "test_reverb_faults.py", "test_run_lock.py",
    "test_short_run_regression.py", "test_strict_json.py", "test_train_offline.py",
    "test_train_offline_resume.py", "test_training_faults.py", "test_worker_lifetime.py"}
FRESH_TF_PROCESSES = {"test_tf_agents_loaders.py", "test_policy_export.py", "test_support.py",
                      "test_compute.py", "test_quickstart.py"}
BOOTSTRAPS = {"test_results_tables.py"}
KINDS = ["binary runs (subprocess or forked)", "fresh TensorFlow-only processes",
         "rliable bootstraps of the results tables", "in the pytest process"]
_LINE = re.compile(r"^([\d.]+)s (setup|call|teardown)\s+(\S+)")


def kind(file_name):
  if file_name in BINARY_RUNS:
    return KINDS[0]
  if file_name in FRESH_TF_PROCESSES:
    return KINDS[1]
  if file_name in BOOTSTRAPS:
    return KINDS[2]
  return KINDS[3]


def read(lines):
  """{test id: seconds} from `--durations=0` lines (times under 5 ms are not listed)."""
  per_test = collections.Counter()
  for line in lines:
    m = _LINE.match(line)
    if m:
      per_test[m.group(3)] += float(m.group(1))
  return per_test


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("log", help="a file holding pytest's --durations=0 output")
  parser.add_argument("--top", type=int, default=30)
  args = parser.parse_args(argv)
  with open(args.log, encoding="utf-8", errors="replace") as f:
    lines = f.read().splitlines()
  per_test = read(lines)
  if not per_test:
    sys.exit(f"test_times.py: error: {args.log} holds no --durations lines")
  total = sum(per_test.values())
  summary = [l for l in lines if re.search(r"\d+ passed", l)]
  if summary:
    print(summary[-1].strip("= "))
  print(f"\nsum of test times {total:.0f} s over {len(per_test)} tests\n")
  print(f"| {args.top} slowest tests | s |\n| --- | --- |")
  for name, t in per_test.most_common(args.top):
    print(f"| `{name}` | {t:.1f} |")
  per_kind, per_file = collections.Counter(), collections.Counter()
  for name, t in per_test.items():
    file_name = name.split("::")[0].rsplit("/", 1)[-1]
    per_kind[kind(file_name)] += t
    per_file[file_name] += t
  print("\n| kind | s | share |\n| --- | --- | --- |")
  for k in KINDS:
    print(f"| {k} | {per_kind[k]:.0f} | {100 * per_kind[k] / total:.0f}% |")
  print("\n| file | s |\n| --- | --- |")
  for name, t in per_file.most_common(15):
    print(f"| `{name}` | {t:.1f} |")


if __name__ == "__main__":
  main()
