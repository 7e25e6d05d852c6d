"""Decompositions of framework operators into IR primitives, shared by every frontend.

`math` holds broadcasting arithmetic and activations, `contraction` matmul, einsum and
convolution, `windows` sliding windows and pooling, `norm` softmax and normalisations,
`shape` concatenation, splitting and other data movement.
"""
