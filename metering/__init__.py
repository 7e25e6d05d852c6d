"""Measurement: output parity and oracles, the A/B benchmark against the customer's
baseline (`bench/`) and its signed improvement reports (`report/`); the usage ledger next."""
