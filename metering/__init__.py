"""Measurement: the A/B benchmark against the customer's baseline (`bench/`) and its signed
improvement reports (`report/`), the tamper-evident usage ledger (`ledger/`) and the usage
it records and bills (`usage/`).  What results are checked against
(baselines, oracles, the parity rule) is `luminal.references`."""
