"""Measurement code behind binaries/benchmark.py (no flags here; each module has `run()`)."""
