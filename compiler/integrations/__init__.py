"""Integrations that let luminal drop into habits users already have.

- `onnx_backend`: the ONNX Backend API (`onnx.backend.base.Backend`), which the ONNX
  conformance suite (`onnx.backend.test.BackendTest`) runs; `conformance` runs that suite
  and writes the per-op table.
- `torch_dynamo`: `torch.compile(model, backend="luminal")`.
- `session`: `luminal.InferenceSession`, shaped like ONNX Runtime's.

Like every library API, these compile without checking a license; only the CLI's
`luminal compile` does.
"""
