"""ccvl_tf.runtime.machine: /proc/cpuinfo read by hand-written text, the one-line description."""
from ccvl_tf.runtime import machine

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Processor
flags\t\t: fpu sse2 avx2 avx512f avx512_vnni amx_tile

processor\t: 1
vendor_id\t: SomethingElse
model name\t: Another CPU
flags\t\t: fpu
"""


def test_parse_cpuinfo_reads_the_first_processor_and_the_kernel_flags_in_order():
  assert machine.parse_cpuinfo(CPUINFO) == {
      "model": "Intel(R) Xeon(R) Processor", "vendor": "GenuineIntel",
      "kernel_flags": ["avx2", "avx512f", "avx512_vnni", "amx_tile"]}
  assert machine.parse_cpuinfo("model name : X\n") == {"model": "X", "vendor": None,
                                                       "kernel_flags": None}


def test_cpu_without_proc_cpuinfo_falls_back_to_platform(tmp_path):
  c = machine.cpu(str(tmp_path / "missing"))
  assert c["vendor"] is None and c["kernel_flags"] is None


def test_record_and_describe(tmp_path):
  path = tmp_path / "cpuinfo"
  path.write_text(CPUINFO)
  r = machine.record(str(path))
  assert r["cpu"]["model"] == "Intel(R) Xeon(R) Processor"
  assert set(r["kernels"]) == set(machine.KERNEL_VARIABLES)
  r["kernels"]["ONEDNN_MAX_CPU_ISA"] = "AVX512_CORE"
  r["gpus"] = []
  assert machine.describe(r) == ("Intel(R) Xeon(R) Processor (avx2, avx512f, avx512_vnni, "
                                 "amx_tile; ONEDNN_MAX_CPU_ISA=AVX512_CORE)")
  r["cpu"]["kernel_flags"], r["gpus"] = [], ["NVIDIA H100"]
  assert machine.describe(r).endswith("(no AVX2 or later; ONEDNN_MAX_CPU_ISA=AVX512_CORE), "
                                      "GPUs: NVIDIA H100")
  assert machine.describe(None) == "unrecorded"


def test_every_module_that_saves_training_checkpoints_records_the_machine():
  """A training route with its own tf.train.CheckpointManager (outside runtime/training.py,
  whose `train` records every segment) must call training.record_machine too: a route that
  skips it leaves checkpoints whose machine nobody can tell."""
  import os
  root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ccvl_tf")
  makers, missing = [], []
  for d, _, names in os.walk(root):
    for n in names:
      if n.endswith(".py"):
        path = os.path.join(d, n)
        text = open(path).read()
        if "CheckpointManager(" in text:
          makers.append(os.path.relpath(path, root))
          if not path.endswith(os.path.join("runtime", "training.py")) and \
              "record_machine(" not in text:
            missing.append(os.path.relpath(path, root))
  assert os.path.join("runtime", "training.py") in makers and len(makers) >= 2, makers
  assert missing == [], missing
