"""`benchmarks.depthwise_pad`: a layer spec parses, and one small layer is measured in both
variants, each checked against the reference by the kernel bench."""

from __future__ import annotations

import pytest

from benchmarks.depthwise_pad import Layer, measure
from luminal.compiler.backends.cpu import simd, toolchain
from luminal.compiler.hardware import detect_cpu


def test_a_layer_spec_parses_or_is_refused() -> None:
    assert Layer.parse("96x112x112/2") == Layer(96, 112, 112, 2)
    assert str(Layer.parse("384x14x14")) == "384x14x14"
    with pytest.raises(SystemExit, match="'3x3' is not CxHxW"):
        Layer.parse("3x3")


@pytest.mark.skipif(
    not simd.isa_for(toolchain.feature_flags(detect_cpu())[1]).loadn, reason="no stencil here"
)
def test_both_variants_of_a_layer_are_measured() -> None:
    padded, unpadded = measure(Layer(8, 12, 20, 2), repeats=1)
    assert len(padded) == len(unpadded) == 1 and padded[0] > 0 and unpadded[0] > 0
