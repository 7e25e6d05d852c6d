"""Measurement: the A/B benchmark against the customer's baseline (`bench/`) and its signed
improvement reports (`report/`); the usage ledger next.  What results are checked against
(baselines, oracles, the parity rule) is `luminal.references`."""
