"""Op coverage: every op kind classified by the frontend's own lowering, and compile naming
every unsupported op at once."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from luminal.compiler.frontend.coverage import Coverage, OpCoverage, OpStatus, Reason
from luminal.compiler.frontend.onnx import analyze, lower
from luminal.compiler.frontend.onnx_ops.context import DataDependent
from luminal.compiler.ir import interpreter
from luminal.errors import UnsupportedOp
from tests.helpers.onnx_cases import node_model

F = TensorProto.FLOAT


def _vi(name: str, shape: list[int] | None = None, dtype: int = F) -> onnx.ValueInfoProto:
    if shape is None:
        return helper.make_empty_tensor_value_info(name)
    return helper.make_tensor_value_info(name, dtype, shape)


def mixed_model() -> onnx.ModelProto:
    """Two NonZero (no lowering), a Unique (no lowering), a custom-domain op feeding a Relu,
    a Resize with an attribute value luminal refuses, and an Add that lowers.  It passes
    onnx's checker and strict shape inference, so it also goes through the CLI."""
    nodes = [
        helper.make_node("NonZero", ["x"], ["nz1"], name="nz_a"),
        helper.make_node("NonZero", ["x"], ["nz2"], name="nz_b"),
        helper.make_node("Unique", ["x"], ["uq"], name="uniq", sorted=1),
        helper.make_node("Foo", ["x"], ["foo_out"], domain="com.acme", name="foo"),
        helper.make_node("Relu", ["foo_out"], ["relu_out"], name="after_foo"),
        helper.make_node(
            "Resize",
            ["x", "", "scales"],
            ["rs"],
            name="rs",
            coordinate_transformation_mode="tf_half_pixel_for_nn",
        ),
        helper.make_node("Add", ["x", "x"], ["sum"], name="ok_add"),
    ]
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    outs = [_vi(o) for o in ("nz1", "nz2", "uq", "rs", "sum")] + [_vi("relu_out", [1, 1, 2, 2])]
    graph = helper.make_graph(nodes, "mixed", [_vi("x", [1, 1, 2, 2])], outs, [scales])
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.acme", 1)]
    )
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model)


def supported_model() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Add", ["x", "x"], ["s"], name="add"),
        helper.make_node("Relu", ["s"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(nodes, "ok", [_vi("x", [2, 3])], [_vi("y", [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _by_label(coverage: Coverage) -> dict[str, OpCoverage]:
    return {o.kind.label(): o for o in coverage.ops}


def test_every_op_kind_is_classified_with_its_reason() -> None:
    analysis = analyze(mixed_model(), {})
    assert analysis.model is None  # refused ops: no IR model
    ops = _by_label(analysis.coverage)
    assert set(ops) == {"NonZero", "Unique", "com.acme.Foo", "Relu", "Resize", "Add"}

    nz = ops["NonZero"]
    assert (nz.count, nz.status, nz.nodes) == (2, OpStatus.UNSUPPORTED, ("nz_a", "nz_b"))
    assert [(f.reason, f.detail, f.nodes) for f in nz.findings] == [
        (Reason.NO_LOWERING, "not supported", ("nz_a", "nz_b"))
    ]
    assert ops["Unique"].findings[0].reason is Reason.NO_LOWERING
    foo = ops["com.acme.Foo"]
    assert foo.kind.domain == "com.acme" and foo.kind.opset == 1
    assert foo.findings[0].reason is Reason.CUSTOM_DOMAIN
    assert "custom domain 'com.acme'" in foo.reason()
    resize = ops["Resize"]
    assert resize.status is OpStatus.UNSUPPORTED and resize.kind.opset == 18
    assert resize.findings[0].reason is Reason.VALUES
    assert "tf_half_pixel_for_nn" in resize.reason()
    # downstream of the custom op: not reached, and not called unsupported
    relu = ops["Relu"]
    assert relu.status is OpStatus.NOT_REACHED
    assert relu.findings[0].reason is Reason.BLOCKED and "'foo'" in relu.reason()
    assert ops["Add"].status is OpStatus.SUPPORTED and not ops["Add"].findings

    cov = analysis.coverage
    assert [o.kind.label() for o in cov.refused] == ["NonZero", "Resize", "Unique", "com.acme.Foo"]
    assert cov.summary().startswith(
        "4 of 6 op types unsupported: NonZero, Resize, Unique, com.acme.Foo; 1 not reached"
    )
    # what did lower is still described
    assert [s.name for s in analysis.inputs] == ["x"]
    assert [s.name for s in analysis.outputs] == ["sum"]


def test_compile_names_every_unsupported_op_at_once() -> None:
    with pytest.raises(UnsupportedOp) as caught:
        lower(mixed_model(), {})
    text = str(caught.value)
    assert text.startswith("unsupported ops (4 kinds, 5 nodes): "), text
    for fragment in (
        "NonZero (nodes nz_a, nz_b: not supported)",
        "Unique (node uniq: not supported)",
        "com.acme.Foo (node foo: custom domain 'com.acme' is not supported)",
        "Resize (node rs: ",
        "tf_half_pixel_for_nn",
    ):
        assert fragment in text, (fragment, text)
    assert "Relu" not in text and "Add" not in text  # blocked and supported ops are not named


def test_one_unsupported_op_keeps_its_own_message() -> None:
    model = node_model("NonZero", [np.zeros((2, 5), np.float32)])
    with pytest.raises(UnsupportedOp) as caught:
        lower(model, {})
    assert str(caught.value) == "op NonZero, node 'nonzero_node', opset 18: not supported"


def test_unread_attributes_are_their_own_reason() -> None:
    # an attribute the lowering never reads (onnx's checker would refuse this one; the
    # frontend, given a model in memory, must still refuse it rather than ignore it)
    node = helper.make_node("Relu", ["x"], ["y"], name="odd_relu", alpha_beta=1)
    graph = helper.make_graph([node], "g", [_vi("x", [2])], [_vi("y", [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    relu = _by_label(analyze(model, {}).coverage)["Relu"]
    assert relu.status is OpStatus.UNSUPPORTED
    assert relu.findings[0].reason is Reason.ATTRIBUTES
    assert relu.reason() == "node odd_relu: attribute(s) ['alpha_beta'] not supported"


def test_a_supported_model_is_all_supported_and_still_lowers() -> None:
    analysis = analyze(supported_model(), {})
    assert analysis.coverage.complete
    assert analysis.coverage.summary() == "all 2 op types supported"
    assert {o.kind.label(): o.count for o in analysis.coverage.ops} == {"Add": 1, "Relu": 1}
    assert analysis.model is not None
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    (y,) = interpreter.run(analysis.model.graph, {"x": x}).values()
    np.testing.assert_array_equal(y, np.maximum(x + x, 0))


def test_subgraphs_and_local_functions_are_counted_and_classified() -> None:
    """An If on a constant: the taken branch's ops are classified, the other branch's are
    never lowered; a model-local function is expanded, and a refused op in its body is
    named under its own op while the call is not reached."""
    then_branch = helper.make_graph(
        [helper.make_node("NonZero", ["x"], ["t"], name="nz_in_then")], "then", [], [_vi("t")]
    )
    else_branch = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["e"], name="neg_in_else")], "else", [], [_vi("e")]
    )
    twice = helper.make_function(
        "local",
        "Twice",
        ["a"],
        ["b"],
        [helper.make_node("Add", ["a", "a"], ["b"], name="add")],
        [helper.make_opsetid("", 18)],
    )
    uniq = helper.make_function(
        "local",
        "Uniq",
        ["a"],
        ["b"],
        [helper.make_node("Unique", ["a"], ["b"], name="u")],
        [helper.make_opsetid("", 18)],
    )
    cond = numpy_helper.from_array(np.array(True), "cond")
    nodes = [
        helper.make_node(
            "If",
            ["cond"],
            ["if_out"],
            name="branch",
            then_branch=then_branch,
            else_branch=else_branch,
        ),
        helper.make_node("Twice", ["x"], ["tw"], domain="local", name="call_twice"),
        helper.make_node("Uniq", ["x"], ["uq"], domain="local", name="call_uniq"),
    ]
    graph = helper.make_graph(
        nodes, "g", [_vi("x", [4])], [_vi("if_out"), _vi("tw", [4]), _vi("uq")], [cond]
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("local", 1)],
        functions=[twice, uniq],
    )
    ops = _by_label(analyze(model, {}).coverage)
    assert ops["NonZero"].status is OpStatus.UNSUPPORTED
    assert ops["NonZero"].nodes == ("nz_in_then",)
    assert ops["If"].status is OpStatus.NOT_REACHED
    assert "its body has refused node 'nz_in_then'" in ops["If"].reason()
    assert ops["Neg"].status is OpStatus.NOT_REACHED  # the branch not taken
    assert ops["Neg"].findings[0].reason is Reason.NOT_LOWERED
    assert ops["local.Twice"].status is OpStatus.SUPPORTED  # expanded through its body
    assert ops["Add"].status is OpStatus.SUPPORTED and ops["Add"].count == 1
    assert ops["Unique"].status is OpStatus.UNSUPPORTED
    assert ops["local.Uniq"].status is OpStatus.NOT_REACHED


def test_a_local_function_lowers_like_its_body() -> None:
    twice = helper.make_function(
        "local",
        "Twice",
        ["a"],
        ["b"],
        [helper.make_node("Add", ["a", "a"], ["b"])],
        [helper.make_opsetid("", 18)],
    )
    node = helper.make_node("Twice", ["x"], ["y"], domain="local", name="t")
    graph = helper.make_graph([node], "g", [_vi("x", [3])], [_vi("y", [3])])
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("local", 1)],
        functions=[twice],
    )
    onnx.checker.check_model(model)
    loaded = lower(model, {})
    x = np.array([1, -2, 3], np.float32)
    (y,) = interpreter.run(loaded.graph, {"x": x}).values()
    np.testing.assert_array_equal(y, 2 * x)


def test_data_dependent_still_raises_for_specialization_but_is_reported() -> None:
    """compile keeps raising DataDependent at once (the ONNX backend specializes on it);
    the analysis records it as its own reason."""
    model = node_model(
        "Reshape", [np.zeros((2, 3), np.float32), np.array([3, 2], np.int64)], opset=18
    )
    with pytest.raises(DataDependent):
        lower(model, {})
    reshape = _by_label(analyze(model, {}).coverage)["Reshape"]
    assert reshape.status is OpStatus.UNSUPPORTED
    assert reshape.findings[0].reason is Reason.DATA_DEPENDENT


def test_an_initializer_of_an_unsupported_type_blocks_its_consumers() -> None:
    words = numpy_helper.from_array(np.array(["a", "b"], dtype=object), "words")
    nodes = [
        helper.make_node("Identity", ["words"], ["w"], name="ident"),
        helper.make_node("Relu", ["x"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes, "g", [_vi("x", [2])], [_vi("w", [2], TensorProto.STRING), _vi("y", [2])], [words]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    cov = analyze(model, {}).coverage
    assert [p.detail for p in cov.problems] == [
        "initializer 'words' has element type STRING, which is not supported"
    ]
    ops = _by_label(cov)
    assert ops["Identity"].status is OpStatus.NOT_REACHED
    assert "initializer 'words'" in ops["Identity"].reason()
    assert ops["Relu"].status is OpStatus.SUPPORTED
    assert not cov.complete and "STRING" in cov.summary()
    with pytest.raises(UnsupportedOp, match="initializer 'words' has element type STRING"):
        lower(model, {})


def test_opset_out_of_range_marks_every_default_domain_op() -> None:
    model = supported_model()
    model.opset_import[0].version = 6
    cov = analyze(model, {}).coverage
    assert {o.status for o in cov.ops} == {OpStatus.UNSUPPORTED}
    assert all(o.findings[0].reason is Reason.OPSET for o in cov.ops)
    assert "opset 6 is outside the supported range" in cov.ops[0].reason()
