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
