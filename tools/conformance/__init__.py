"""The ONNX conformance suite through luminal's ONNX backend: a test harness, not product.

    python -m tools.conformance --expected tests/conformance/expected_failures.toml \
        --json build/conformance.json

It lives outside the installed package because it only drives the product from outside
(`luminal.integrations.onnx_backend`, as any ONNX backend is driven) and needs the suite
data that the `onnx` package ships.  `runner` runs the cases and writes the table;
`roundoff` takes the second look that tells round-off (`imprecise`) from a wrong answer.
"""
