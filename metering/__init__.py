"""Measurement: output parity and oracles today; benchmarks, reports and the usage ledger next."""
