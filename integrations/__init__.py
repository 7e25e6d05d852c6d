"""Integrations that let luminal drop into habits users already have.

These are consumers of the compiler, not a stage of it, so they sit beside `compiler/`
rather than inside it: each one turns a foreign API into `compile_model` and `load`.

- `onnx_backend`: the ONNX Backend API (`onnx.backend.base.Backend`), which the ONNX
  conformance suite (`onnx.backend.test.BackendTest`) runs; the runner of that suite is a
  test harness and lives in the repository's `tools/conformance/`, not in the product.
- `torch_dynamo`: `torch.compile(model, backend="luminal")`.
- `session`: `luminal.InferenceSession`, shaped like ONNX Runtime's.
- `build`: compile a lowered model straight to a loaded `Session` (what the three share).

Compiling needs a license entitling `compile` on the target, like `luminal compile`: the
check is `compile_model`'s own (`licensing/gate.py`), so these pass through it and are
refused with the CLI's message (a LicenseError, exit 3).  Loading an `.lmnl` artifact never
needs one.
"""
