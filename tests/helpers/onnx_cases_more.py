"""More rows of the per-op table (`onnx_cases.CASES`): the ops added for the ONNX
conformance suite.  Same format: (id, op, inputs, attrs, const input indices, extra).
(GroupNormalization, MeanVarianceNormalization and STFT are left to the conformance suite:
onnx's shape inference gives this helper's one-node models no or wrong output types.)"""

from __future__ import annotations

from typing import Any

import numpy as np

R = np.random.default_rng(1)


def f(*shape: int, lo: float = -3.0, hi: float = 3.0) -> np.ndarray:
    return R.uniform(lo, hi, shape).astype(np.float32)


def i64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def ints(*shape: int, lo: int = -20, hi: int = 20, dtype: Any = np.int64) -> np.ndarray:
    return R.integers(lo, hi, shape).astype(dtype)


def u8(*shape: int) -> np.ndarray:
    return R.integers(0, 256, shape).astype(np.uint8)


def scalar(v: float, dtype: Any = np.float32) -> np.ndarray:
    return np.array(v, dtype=dtype)


UNIT = f(2, 3, lo=-0.95, hi=0.95)
X4 = f(1, 2, 5, 5)
# a shuffled permutation: distinct values, so arg-extremes and top-k have no ties
DISTINCT = (R.permutation(24).astype(np.float32) - 12).reshape(2, 3, 4)

# fmt: off
MORE_CASES: list[tuple[str, str, list[Any], dict[str, Any], tuple[int, ...], dict[str, Any]]] = [
    # activations, rounding, trigonometry
    ("selu", "Selu", [f(3, 4)], {"alpha": 1.5, "gamma": 1.1}, (), {}),
    ("celu", "Celu", [f(3, 4)], {"alpha": 2.0}, (), {}),
    ("thresholded-relu", "ThresholdedRelu", [f(3, 4)], {"alpha": 0.5}, (), {}),
    ("shrink", "Shrink", [f(3, 4)], {"bias": 0.5, "lambd": 1.0}, (), {}),
    ("mish", "Mish", [f(3, 4, lo=-12, hi=12)], {}, (), {}),
    ("swish", "Swish", [f(3, 4)], {"alpha": 0.7}, (), {"opset": 24}),
    ("prelu", "PRelu", [f(2, 3, 4), f(3, 1)], {}, (1,), {}),
    ("floor", "Floor", [f(3, 4, lo=-50, hi=50)], {}, (), {}),
    ("ceil", "Ceil", [f(3, 4, lo=-50, hi=50)], {}, (), {}),
    ("round", "Round", [np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.4, 2.6, 1e9], np.float32)], {}, (), {}),
    ("isnan", "IsNaN", [np.array([1.0, np.nan, -np.inf, 0.0], np.float32)], {}, (), {}),
    ("isinf-positive", "IsInf", [np.array([1.0, np.inf, -np.inf], np.float32)], {"detect_negative": 0}, (), {}),
    ("tan", "Tan", [f(3, 4, lo=-1.2, hi=1.2)], {}, (), {}),
    ("asin", "Asin", [UNIT], {}, (), {}),
    ("acos", "Acos", [UNIT], {}, (), {}),
    ("atan", "Atan", [f(3, 4, lo=-20, hi=20)], {}, (), {}),
    ("sinh", "Sinh", [f(3, 4)], {}, (), {}),
    ("cosh", "Cosh", [f(3, 4)], {}, (), {}),
    ("asinh", "Asinh", [f(3, 4, lo=-50, hi=50)], {}, (), {}),
    ("acosh", "Acosh", [f(3, 4, lo=1, hi=40)], {}, (), {}),
    ("atanh", "Atanh", [UNIT], {}, (), {}),
    ("mod-python", "Mod", [f(3, 4), f(3, 4, lo=0.5, hi=2)], {}, (), {"opset": 28}),
    ("pow-int-runtime", "Pow", [ints(6, lo=-3, hi=4), ints(6, lo=0, hi=9)], {}, (), {}),
    # bits
    ("bitshift-left", "BitShift", [ints(5, lo=0, hi=200, dtype=np.uint8), ints(5, lo=0, hi=8, dtype=np.uint8)], {"direction": "LEFT"}, (), {}),
    ("bitshift-right-u32", "BitShift", [ints(5, lo=0, hi=1 << 30, dtype=np.uint32), ints(5, lo=0, hi=31, dtype=np.uint32)], {"direction": "RIGHT"}, (), {}),
    ("bitwise-and", "BitwiseAnd", [ints(3, 4, dtype=np.int32), ints(3, 4, dtype=np.int32)], {}, (), {}),
    ("bitwise-or", "BitwiseOr", [ints(3, 4, dtype=np.int16), ints(4, dtype=np.int16)], {}, (), {}),
    ("bitwise-xor", "BitwiseXor", [u8(3, 4), u8(3, 4)], {}, (), {}),
    ("bitwise-not", "BitwiseNot", [ints(3, 4, dtype=np.int32)], {}, (), {}),
    ("add-uint32", "Add", [ints(4, lo=0, hi=1000, dtype=np.uint32), ints(4, lo=0, hi=1000, dtype=np.uint32)], {}, (), {}),
    ("f16-elementwise", "Tanh", [f(3, 4).astype(np.float16)], {}, (), {}),
    ("f16-matmul", "MatMul", [f(3, 8).astype(np.float16), f(8, 2).astype(np.float16)], {}, (), {}),
    # reductions, scans, arg-extremes, selection
    ("reduce-prod", "ReduceProd", [f(2, 3, 4, lo=0.5, hi=1.5), i64(1)], {}, (1,), {}),
    ("reduce-log-sum", "ReduceLogSum", [f(2, 3, 4, lo=0.1, hi=2), i64(0, 2)], {"keepdims": 0}, (1,), {}),
    ("argmax", "ArgMax", [DISTINCT], {"axis": 1}, (), {}),
    ("argmin-last", "ArgMin", [np.array([[1, 0, 0, 3]], np.float32)], {"axis": 1, "select_last_index": 1}, (), {}),
    ("cumsum", "CumSum", [f(3, 4), np.array(1, np.int64)], {}, (1,), {}),
    ("cumsum-exclusive-reverse", "CumSum", [f(5), np.array(0, np.int64)], {"exclusive": 1, "reverse": 1}, (1,), {}),
    ("topk", "TopK", [DISTINCT, i64(2)], {"axis": 2}, (1,), {"n_outputs": 2}),
    ("topk-smallest", "TopK", [DISTINCT, i64(3)], {"axis": 1, "largest": 0}, (1,), {"n_outputs": 2}),
    ("hardmax", "Hardmax", [DISTINCT], {"axis": 1}, (), {}),
    ("lp-normalization", "LpNormalization", [f(3, 4)], {"axis": 1, "p": 2}, (), {}),
    # indexing
    ("gather-elements", "GatherElements", [f(3, 4), np.array([[0, 2], [1, -1], [2, 0]], np.int64)], {"axis": 1}, (), {}),
    ("scatter-elements", "ScatterElements", [f(3, 4), np.array([[0], [2], [1]], np.int64), f(3, 1)], {"axis": 1}, (), {}),
    ("scatter-elements-add", "ScatterElements", [f(3, 4), np.array([[0, 0], [2, 1], [1, 1]], np.int64), f(3, 2)], {"axis": 1, "reduction": "add"}, (), {}),
    ("scatter-nd", "ScatterND", [f(4, 3), np.array([[1], [3]], np.int64), f(2, 3)], {}, (), {}),
    ("scatter-nd-max", "ScatterND", [f(4, 3), np.array([[1, 2], [3, 0]], np.int64), f(2)], {"reduction": "max"}, (), {}),
    ("gather-nd", "GatherND", [f(2, 3, 4), np.array([[[0, 1]], [[2, 3]]], np.int64)], {"batch_dims": 1}, (), {}),
    ("one-hot", "OneHot", [np.array([0, 3, -1, 1], np.int64), np.array(4, np.int64), np.array([0.5, 2.0], np.float32)], {"axis": 0}, (1,), {}),
    ("reverse-sequence", "ReverseSequence", [f(4, 3, 2), np.array([4, 1, 3], np.int64)], {"batch_axis": 1, "time_axis": 0}, (), {}),
    ("eye-like", "EyeLike", [f(3, 4)], {"k": 1}, (), {}),
    ("compress", "Compress", [f(3, 4), np.array([True, False, True])], {"axis": 0}, (1,), {}),
    # data movement
    ("pad-reflect", "Pad", [f(3, 4), i64(1, 2, 2, 1)], {"mode": "reflect"}, (1,), {}),
    ("pad-edge", "Pad", [f(3, 4), i64(0, 3, 2, 0)], {"mode": "edge"}, (1,), {}),
    ("pad-wrap", "Pad", [f(3, 4), i64(1, 1, 1, 1)], {"mode": "wrap"}, (1,), {"opset": 19}),
    ("depth-to-space", "DepthToSpace", [f(1, 8, 2, 3)], {"blocksize": 2, "mode": "CRD"}, (), {}),
    ("space-to-depth", "SpaceToDepth", [f(1, 2, 4, 6)], {"blocksize": 2}, (), {}),
    ("center-crop-pad", "CenterCropPad", [f(5, 4), i64(3, 6)], {}, (1,), {}),
    ("resize-linear", "Resize", [X4, None, np.array([1, 1, 1.6, 0.6], np.float32)], {"mode": "linear"}, (2,), {"opset": 19}),
    ("resize-nearest-sizes", "Resize", [X4, None, None, i64(1, 2, 8, 3)], {"mode": "nearest"}, (3,), {"opset": 19}),
    ("resize-cubic-align", "Resize", [X4, None, np.array([1, 1, 2, 2], np.float32)], {"mode": "cubic", "coordinate_transformation_mode": "align_corners"}, (2,), {"opset": 19}),
    # normalisations, pooling, convolution
    ("rms-normalization", "RMSNormalization", [f(2, 3, 4), f(4)], {"epsilon": 1e-4}, (1,), {"opset": 23}),
    ("instance-norm", "InstanceNormalization", [X4, f(2), f(2)], {}, (1, 2), {}),
    ("lrn", "LRN", [X4], {"size": 3, "alpha": 1e-3}, (), {}),
    ("layer-norm-stats", "LayerNormalization", [f(2, 5), f(5), f(5)], {}, (1, 2), {"n_outputs": 3}),
    ("batchnorm-training", "BatchNormalization", [f(2, 3, 4), f(3), f(3), f(3), f(3, lo=0.5, hi=2)], {"training_mode": 1}, (1, 2, 3, 4), {"n_outputs": 3}),
    ("conv-transpose", "ConvTranspose", [f(1, 2, 4, 4), f(2, 3, 3, 3)], {"strides": [2, 2], "pads": [1, 0, 1, 1], "output_padding": [1, 0]}, (1,), {}),
    ("conv-transpose-group", "ConvTranspose", [f(1, 4, 3), f(4, 1, 2)], {"group": 2, "dilations": [2]}, (1,), {}),
    ("lp-pool", "LpPool", [X4], {"kernel_shape": [2, 2], "p": 3, "strides": [2, 1]}, (), {}),
    ("global-lp-pool", "GlobalLpPool", [X4], {}, (), {}),
    ("maxpool-indices", "MaxPool", [X4], {"kernel_shape": [2, 2], "strides": [2, 2]}, (), {"n_outputs": 2}),
    ("grid-sample", "GridSample", [X4, f(1, 3, 2, 2, lo=-1.2, hi=1.2)], {"padding_mode": "border"}, (), {"opset": 20}),
    # attention, losses, recurrent, signal, quantization
    ("attention-causal", "Attention", [f(1, 2, 3, 4), f(1, 2, 5, 4), f(1, 2, 5, 4)], {"is_causal": 1}, (), {"opset": 23}),
    ("attention-gqa-3d", "Attention", [f(2, 3, 8), f(2, 4, 4), f(2, 4, 6)], {"q_num_heads": 4, "kv_num_heads": 2}, (), {"opset": 23}),
    ("rotary-embedding", "RotaryEmbedding", [f(1, 2, 3, 4), f(3, 2), f(3, 2), np.array([[0, 2, 1]], np.int64)], {}, (), {"opset": 23}),
    ("nll-loss", "NegativeLogLikelihoodLoss", [f(3, 5), np.array([1, 4, 0], np.int64), f(5, lo=0.1, hi=1)], {"reduction": "mean"}, (), {}),
    ("softmax-cross-entropy", "SoftmaxCrossEntropyLoss", [f(3, 5, 2), np.array([[1, 4], [0, 2], [3, 3]], np.int64)], {"ignore_index": 3}, (), {}),
    ("lstm", "LSTM", [f(3, 2, 4), f(1, 12, 4, lo=-1, hi=1), f(1, 12, 3, lo=-1, hi=1), f(1, 24, lo=-1, hi=1)], {"hidden_size": 3}, (1, 2, 3), {"n_outputs": 3}),
    ("gru-bidirectional", "GRU", [f(3, 2, 4), f(2, 9, 4, lo=-1, hi=1), f(2, 9, 3, lo=-1, hi=1)], {"hidden_size": 3, "direction": "bidirectional", "linear_before_reset": 1}, (1, 2), {"n_outputs": 2}),
    ("rnn-reverse", "RNN", [f(3, 2, 4), f(1, 3, 4, lo=-1, hi=1), f(1, 3, 3, lo=-1, hi=1)], {"hidden_size": 3, "direction": "reverse"}, (1, 2), {"n_outputs": 2}),
    ("dft", "DFT", [f(1, 6, 2), None, np.array(1, np.int64)], {}, (2,), {"opset": 20}),
    ("dft-onesided", "DFT", [f(2, 8, 1), None, np.array(1, np.int64)], {"onesided": 1}, (2,), {"opset": 20}),
    ("hann-window", "HannWindow", [np.array(8, np.int64)], {}, (0,), {"opset": 17}),
    ("quantize-linear", "QuantizeLinear", [f(3, 4), np.array([0.05, 0.1, 0.2], np.float32), np.array([10, 128, 200], np.uint8)], {"axis": 0}, (1, 2), {}),
    ("dequantize-linear", "DequantizeLinear", [ints(3, 4, lo=-128, hi=127, dtype=np.int8), scalar(0.1), np.array(-3, np.int8)], {}, (1, 2), {}),
    ("dynamic-quantize-linear", "DynamicQuantizeLinear", [f(3, 4)], {}, (), {"n_outputs": 3}),
    ("matmul-integer", "MatMulInteger", [u8(3, 4), u8(4, 2), np.array(12, np.uint8), np.array(7, np.uint8)], {}, (2, 3), {}),
    ("qlinear-matmul", "QLinearMatMul", [u8(2, 4), scalar(0.02), np.array(100, np.uint8), u8(4, 3), scalar(0.03), np.array(120, np.uint8), scalar(0.5), np.array(90, np.uint8)], {}, (1, 2, 4, 5, 6, 7), {}),
    # more ops: linear algebra, unpooling, image columns, n-grams, boxes
    ("det", "Det", [f(2, 3, 3)], {}, (), {}),
    ("einsum-diagonal", "Einsum", [f(2, 3, 3)], {"equation": "bii->bi"}, (), {}),
    ("max-unpool", "MaxUnpool", [f(1, 1, 2, 2), np.array([[[[0, 3], [9, 14]]]], np.int64)], {"kernel_shape": [2, 2], "strides": [2, 2]}, (), {}),
    ("col2im", "Col2Im", [f(1, 4, 9), i64(4, 4), i64(2, 2)], {"strides": [1, 1]}, (1, 2), {}),
    ("tfidf", "TfIdfVectorizer", [np.array([[1, 2, 3, 2, 1], [3, 3, 1, 2, 2]], np.int32)], {"mode": "TFIDF", "min_gram_length": 1, "max_gram_length": 2, "max_skip_count": 1, "ngram_counts": [0, 2], "ngram_indexes": [0, 1, 2], "pool_int64s": [1, 2, 2, 1], "weights": [0.5, 2.0, 1.5]}, (), {}),
    ("roi-align", "RoiAlign", [f(2, 2, 6, 6), np.array([[0.5, 0.5, 4.0, 3.5], [1.0, 0.0, 5.5, 5.0]], np.float32), np.array([0, 1], np.int64)], {"output_height": 2, "output_width": 3, "sampling_ratio": 2}, (1, 2), {}),
]
# fmt: on
