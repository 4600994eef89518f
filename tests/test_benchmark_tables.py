"""The train-step and collection numbers in docs/results/benchmarks.md and docs/agent.md,
recomputed from the benchmark files they were written from (docs/results/*.json)."""
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "docs", "results")


def _load(name):
  with open(os.path.join(RESULTS, name)) as f:
    return json.load(f)


def _read(*parts):
  with open(os.path.join(ROOT, *parts)) as f:
    return f.read()


def test_agent_md_idle_table_is_the_idle_benchmark():
  c = _load("benchmark_train_step_idle.json")
  labels = {
      "ccvl_default": "**CCVL defaults** (N=8, M=2, monotone head, hidden 512, DR3 0.03, "
                      "linear counts)",
      "ccvl_no_dr3": "no DR3", "ccvl_no_dr3_no_counts": "no DR3, constant n(s)^-1",
      "ccvl_N1_M1_no_dr3": "N=1, M=1, no DR3", "ccvl_no_hidden": "hidden_units=0 (DR3 on)",
      "ccvl_no_hidden_no_dr3": "hidden_units=0, no DR3", "ccvl_N4_M4": "N=4, M=4",
      "ccvl_N8_M4": "N=8, M=4", "ccvl_N16_M2": "N=16, M=2",
      "ccvl_count_refresh_every_step": "counts inverse refreshed every step",
      "ccvl_cosine_head": "the IQN cosine head (the earlier default)",
      "ccvl_jit": "XLA `jit_compile=True`",
      "ccvl_delta_entry_conv": "delta_entry='conv' (cosine, IQN placement)"}
  doc = _read("docs", "agent.md")
  for key, label in labels.items():
    v = c["variants"][key]
    row = (f"| {label} | {v['train_step_ms']:.1f} | {v['ratio_over_dqn']:.2f} | "
           f"{v['ratio_over_dqn_dr3']:.2f} |")
    assert row in doc, row
  assert f"| DqnAgent | {c['train_step_ms']['dqn']:.1f} | 1 | |" in doc
  assert (f"| DqnAgent + DR3 | {c['train_step_ms']['dqn_dr3']:.1f} | "
          f"{c['ratio_dqn_dr3_over_dqn']:.2f} | 1 |") in doc


def test_benchmarks_md_train_step_table_is_the_three_runs():
  c, a, b = (_load(f"benchmark_train_step_{n}.json") for n in ("idle", "load_a", "load_b"))
  doc = _read("docs", "results", "benchmarks.md")
  ms = lambda r: r["train_step_ms"]
  var = lambda r, k, ratio: r["variants"][k][ratio]
  cells = [
      f"| {ms(c)['ccvl']:.1f} ms: **{c['ratio_ccvl_over_dqn']:.2f}x** DqnAgent "
      f"({ms(c)['dqn']:.1f} ms) | {ms(a)['ccvl']:.1f} / {ms(b)['ccvl']:.1f} ms: "
      f"**{a['ratio_ccvl_over_dqn']:.2f}x / {b['ratio_ccvl_over_dqn']:.2f}x** |",
      f"| **{c['ratio_ccvl_over_dqn_dr3']:.2f}x** ({ms(c)['dqn_dr3']:.1f} ms) | "
      f"**{a['ratio_ccvl_over_dqn_dr3']:.2f}x / {b['ratio_ccvl_over_dqn_dr3']:.2f}x** |",
      f"| {c['ratio_dqn_dr3_over_dqn']:.2f}x | {a['ratio_dqn_dr3_over_dqn']:.2f}x / "
      f"{b['ratio_dqn_dr3_over_dqn']:.2f}x |",
      f"| {var(c, 'ccvl_no_dr3', 'ratio_over_dqn'):.2f}x DqnAgent "
      f"({ms(c)['ccvl_no_dr3']:.1f} ms) | {var(a, 'ccvl_no_dr3', 'ratio_over_dqn'):.2f}x / "
      f"{var(b, 'ccvl_no_dr3', 'ratio_over_dqn'):.2f}x |",
      f"| {var(c, 'ccvl_no_hidden', 'ratio_over_dqn_dr3'):.2f}x DqnAgent + DR3 | "
      f"{var(a, 'ccvl_no_hidden', 'ratio_over_dqn_dr3'):.2f}x / "
      f"{var(b, 'ccvl_no_hidden', 'ratio_over_dqn_dr3'):.2f}x |",
      f"| {var(c, 'ccvl_cosine_head', 'ratio_over_dqn'):.2f}x DqnAgent | "
      f"{var(a, 'ccvl_cosine_head', 'ratio_over_dqn'):.2f}x / "
      f"{var(b, 'ccvl_cosine_head', 'ratio_over_dqn'):.2f}x |",
      f"| {var(c, 'ccvl_jit', 'ratio_over_dqn'):.2f}x DqnAgent | "
      f"{var(a, 'ccvl_jit', 'ratio_over_dqn'):.2f}x / {var(b, 'ccvl_jit', 'ratio_over_dqn'):.2f}x |",
      f"| {c['end_to_end']['loop_steps_per_s']:.1f} steps/s (bare step "
      f"{c['end_to_end']['step_only_steps_per_s']:.1f}) | "
      f"{a['end_to_end']['loop_steps_per_s']:.1f} / {b['end_to_end']['loop_steps_per_s']:.1f} "
      f"steps/s |"]
  for cell in cells:
    assert cell in doc, cell


def test_benchmarks_md_collection_numbers_are_the_idle_runs():
  rows = _load("vector_collection_idle.json")
  by = {env: [r["collection_seconds"] for r in rows if r["env"] == env]
        for env in ("vector", "sequential")}
  doc = " ".join(_read("docs", "results", "benchmarks.md").split())
  v, s = by["vector"], by["sequential"]
  assert (f"**{v[0]:.1f} / {v[1]:.1f} s (vector) against {s[0]:.1f} / {s[1]:.1f} s "
          f"(sequential)**") in doc
  lo, hi = min(s) / max(v), max(s) / min(v)
  assert f"{lo:.1f}-{hi:.1f}x" in doc
  # The rule for the default: faster in both repetitions.
  assert all(x < y for x, y in zip(v, s))


def test_benchmarks_md_algorithm1_defaults_row_is_its_file():
  """The section of the current defaults (Algorithm 1, monotone head, no hidden layer): its
  ratios and times from benchmark_train_step_algorithm1_load.json."""
  r = _load("benchmark_train_step_algorithm1_load.json")
  assert r["setup"]["ccvl_default_config"]["objective"] == "algorithm1"
  assert r["setup"]["ccvl_default_network"]["hidden_units"] == 0
  doc = _read("docs", "results", "benchmarks.md")
  ms, v = r["train_step_ms"], r["variants"]
  assert (f"| {ms['ccvl']:.1f} ms: **{r['ratio_ccvl_over_dqn']:.2f}x** DqnAgent "
          f"({ms['dqn']:.1f} ms) | <= 1.3x DqnAgent: met |") in doc
  assert r["ratio_ccvl_over_dqn"] <= 1.3 and r["ratio_ccvl_over_dqn_dr3"] <= 1.15
  assert (f"| the same against DqnAgent + DR3 | **{r['ratio_ccvl_over_dqn_dr3']:.2f}x** "
          f"({ms['dqn_dr3']:.1f} ms) | <= 1.15x: met |") in doc
  for label, key in (("... CCVL without DR3", "ccvl_no_dr3"),
                     ("... with the earlier 512-unit hidden layer of the head", "ccvl_hidden_512"),
                     ("... the 'bound' objective", "ccvl_bound"),
                     ("... the IQN cosine head", "ccvl_cosine_head")):
    assert f"| {label} | {v[key]['ratio_over_dqn']:.2f}x DqnAgent | |" in doc, label
