"""References: what luminal's results are checked and measured against.

    baselines  the one registry of external runtimes (ONNX Runtime, torch, torch.compile,
               OpenVINO, TVM, and plug-ins of the `luminal.baselines` entry-point group):
               timed by `luminal bench`, run once as an oracle by `luminal run --compare`
    oracle     `run_oracle`: one reference run of a registry entry (ONNX Runtime on its CPU
               provider, torch eager)
    parity     the one tolerance rule, with per-dtype defaults for each check (a model's
               outputs against an oracle; a kernel against the reference interpreter)

They are correctness and comparison references, not metering: the bench (`metering/`)
and the compiler's search both use them.
"""
