"""Winograd F(m x m, 3x3) for 3x3 stride-1 convolutions over an already-padded input:
impl "winograd" (m=2, a=4) and "winograd4" (m=4, a=6), one generator, the transform
matrices per m as data (`_MATRICES`), unrolled without their zero terms.

    U[xi][c][n] = (G g[n][c] G^T)[xi]        once, at the first call (heap buffer)
    for each work item (R whole rows of mxm output tiles, TB tiles)      [thread pool]
        V[xi][c][tb] = (B^T d B)[xi]          d: the tile's axa input patch; per tile
                                              row, rows combined first (vectors)
        M[xi][tb][n] = sum_c V[xi][c][tb] U[xi][c][n]    a*a GEMMs, SIMD micro-kernel
        Y[.][tb][n]  = A^T M[.][tb][n] A      vectors along n
        out          = epilogue(Y)            in output order (bias, residual, ReLU)

a*a multiply-adds per tile and channel pair where the direct convolution does 9*m*m
(m=2: 16 vs 36; m=4: 36 vs 144), plus the transforms.  The weight transform runs once per library and weights blob (keyed on
the weights' address; a new address makes a new buffer and leaks the old one, which a
concurrent caller may still read), so the pipeline's weights blob does not change; it
costs a*a/9 of the 3x3 weights in heap memory.  A tile past the output's edge reads
zeros beyond the padded input and stores only its valid outputs.

With `Variant.unpad` (`unpad_legal`: X is a pad the kernel may skip, `Kernel.fold`) the
input transform builds each input row of its tile rows from the pad's source
(`padrows.padded_row`) instead of copying it from the pad, and the pad's kernel does not
run: ResNet-50 at batch 1 1.05x (docs/compiler.md).

`legal` recognizes the pattern from the contraction's loops and offsets alone: output
channel `n` (Y moves along it, X does not), two output positions whose X coefficients
each equal that of one reduced loop of size 3 (the window), at most one more output loop
(the batch: X moves along it, Y does not, no window loop pairs with it; each image's
tiles are work items of their own) and at most one more reduced loop (the input
channel).  Anything else (a stride, a dilation, a 1x1 or 7x7 window, a plan that swapped
the operands) is not offered.  Over a batch of 8 (same search, A/B): resnet18 1.25x,
resnet50 1.10x the model without it.  Measured on cnn (2 threads):
1.25-1.5x the generated code on every 3x3 stride-1 layer (56x56x64 to 7x7x512).
F(4x4) (work items of about 32 tiles, its buffers being 36/16 larger per tile) is
offered only where its transformed weights fit `MAX_WEIGHTS4`: 12-20% faster than F(2x2)
on cnn's 56x56x64 and 28x28x128 layers; slower and past the f32 tolerance beyond.  Its
error is 5-8x the direct convolution's on layers of 64 channels and more, so the search's
accuracy guard (`search.tuner.accuracy_limit`) refuses it there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from luminal.compiler.backends.cpu import cexpr, padrows
from luminal.compiler.backends.cpu.simd import Isa
from luminal.compiler.ir import DType
from luminal.compiler.schedule import Kernel, Schedule
from luminal.compiler.schedule.symbolic import Var

if TYPE_CHECKING:
    from luminal.compiler.backends.cpu.codegen import _KernelWriter


#: Largest thread-local transform buffer (bytes) a convolution may need to be offered.
MAX_BUFFER = 4 << 20

#: Output tile side m of each Winograd variant, F(m x m, 3x3).
TILE = {"winograd": 2, "winograd4": 4}

#: Largest transformed weights (bytes) F(4x4) is offered for: beyond, few tiles share
#: each weight (a weight-bandwidth-bound GEMM: 7x7x512 1.6x slower than F(2x2)) and the
#: f32 error of its larger transforms grows with the channels (14x14x256: 5e-4 absolute).
MAX_WEIGHTS4 = 4 << 20

#: About how many tiles a work item takes, per m (its buffers grow as (m+2)^2 per tile).
BLOCK = {2: 64, 4: 32}

_F = tuple[tuple[float, ...], ...]

#: (A^T, G, B^T) per tile side m: y = A^T [(G g G^T) * (B^T d B)] A.  m=2: points 0, +-1,
#: inf; m=4: 0, +-1, +-1/2, inf (well conditioned in f32; B^T rows scaled to small
#: integers, G rows by the inverse).
_MATRICES: dict[int, tuple[_F, _F, _F]] = {
    2: (
        ((1, 1, 1, 0), (0, 1, -1, -1)),
        ((1, 0, 0), (0.5, 0.5, 0.5), (0.5, -0.5, 0.5), (0, 0, 1)),
        ((1, 0, -1, 0), (0, 1, 1, 0), (0, -1, 1, 0), (0, 1, 0, -1)),
    ),
    4: (
        (
            (1, 1, 1, 1, 1, 0),
            (0, 1, -1, 0.5, -0.5, 0),
            (0, 1, 1, 0.25, 0.25, 0),
            (0, 1, -1, 0.125, -0.125, 1),
        ),
        (
            (1, 0, 0),
            (1 / 6, 1 / 6, 1 / 6),
            (1 / 6, -1 / 6, 1 / 6),
            (-4 / 3, -2 / 3, -1 / 3),
            (-4 / 3, 2 / 3, -1 / 3),
            (0, 0, 0.25),
        ),
        (
            (1, 0, -5, 0, 4, 0),
            (0, -1, -1, 4, 4, 0),
            (0, 1, -1, -4, 4, 0),
            (0, -1, -2, 1, 2, 0),
            (0, 1, -2, -1, 2, 0),
            (0, 1, 0, -5, 0, 4),
        ),
    ),
}


@dataclass(frozen=True)
class Conv3x3:
    n: Var  # output channel
    oh: Var  # outer output position
    ow: Var  # inner output position
    kh: Var  # window loop paired with oh
    kw: Var  # window loop paired with ow
    c: Var | None  # input channel (None: one channel)
    batch: Var | None = None  # image in a batch (None: one image)


def match(sched: Schedule, kernel: Kernel, m: int = 2) -> Conv3x3 | None:
    """The convolution's loops when `kernel` is a Winograd-able 3x3 convolution for
    F(m x m, 3x3)."""
    p = kernel.contraction
    if kernel.kind != "contraction" or p is None:
        return None
    g = sched.graph
    node = g.nodes[kernel.reduction if kernel.reduction is not None else kernel.node]
    cl = p.loops
    (xb, x), (yb, y) = cl.x, cl.y
    if not (
        node.dtype is DType.F32
        and sched.dtype(xb) is DType.F32
        and sched.dtype(yb) in (DType.F32, DType.F16, DType.BF16)
    ):
        return None
    n = p.n
    outs = [v for v in cl.loops if v not in cl.reduced and v != n]
    red = [v for v in cl.loops if v in cl.reduced]
    if len(outs) not in (2, 3) or len(red) not in (2, 3) or len(set(cl.loops)) != len(cl.loops):
        return None
    if x.coeff(n) != 0 or y.coeff(n) == 0 or any(y.coeff(o) != 0 for o in outs):
        return None
    if any(o.size < 2 for o in outs) or any(x.coeff(o) == 0 for o in outs):
        return None
    if cl.out.coeff(n) == 0 or any(cl.out.coeff(o) == 0 for o in outs):
        return None
    # each output position pairs with the one window loop X moves along alike; a third
    # output loop pairs with none: the batch (whole images, tiled one at a time)
    window = {o: [r for r in red if r.size == 3 and x.coeff(r) == x.coeff(o)] for o in outs}
    if any(len(ks) > 1 for ks in window.values()):
        return None
    spatial = [o for o in outs if window[o]]
    batch = [o for o in outs if not window[o]]
    if len(spatial) != 2 or len(batch) > 1:
        return None
    pairs = [window[o][0] for o in spatial]
    if pairs[0] == pairs[1] or x.coeff(spatial[0]) == x.coeff(spatial[1]):
        return None
    rest = [r for r in red if r not in pairs]
    c = rest[0] if rest else None
    if c is not None and (x.coeff(c) == 0 or y.coeff(c) == 0):
        return None
    # every term of the offsets is one of these loops
    known = {n, *outs, *red}
    for off in (x, y, cl.out):
        if any(not isinstance(a, Var) or a not in known for a, _ in off.terms):
            return None
    if any(y.coeff(k) == 0 for k in pairs) or cl.out.coeff(n) < 0:
        return None
    oh, ow = sorted(spatial, key=lambda v: -abs(x.coeff(v)))
    # thread-local buffers (input and product transforms) of at most ~4 MiB each
    cin = c.size if c is not None else 1
    th, tw = -(-oh.size // m), -(-ow.size // m)
    tiles = max(-(-(_rows_per_block(th, tw, r, BLOCK[m]) * tw) // r) * r for r in (4, 6, 8))
    if (m + 2) ** 2 * max(cin, n.size + 32) * tiles * 4 > MAX_BUFFER:
        return None
    if m > 2 and (m + 2) ** 2 * cin * n.size * 4 > MAX_WEIGHTS4:
        return None
    kh = pairs[spatial.index(oh)]
    kw = pairs[spatial.index(ow)]
    return Conv3x3(n, oh, ow, kh, kw, c, batch[0] if batch else None)


def legal(sched: Schedule, kernel: Kernel, impl: str = "winograd") -> bool:
    """An f32 3x3 stride-1 dilation-1 convolution over a padded input (see `match`)."""
    return match(sched, kernel, TILE[impl]) is not None


def unpad_legal(sched: Schedule, kernel: Kernel, impl: str = "winograd") -> bool:
    """Legal, and its input is a pad it may skip (`Kernel.fold`) read whole plane by
    plane: the variant then builds each padded row of its tile rows from the pad's source
    (`padrows.padded_row`, `Variant.unpad`) and the pad's kernel does not run."""
    conv = match(sched, kernel, TILE[impl])
    return conv is not None and _planes(sched, kernel, conv) is not None


def _planes(sched: Schedule, kernel: Kernel, conv: Conv3x3) -> tuple[int, int, int] | None:
    """(first plane, planes per channel, planes per image) of the pad that the unpadding
    variant reads, when X is the pad `kernel.fold` names, rows of its plane one after
    the other and every output position of it read (a convolution over exactly the pad)."""
    f, p = kernel.fold, kernel.contraction
    if f is None or p is None:
        return None
    xb, x = p.loops.x
    if xb != f.pad:
        return None
    hp, wp = sched.graph.nodes[f.pad].shape[-2:]
    hw = hp * wp
    c, bv = conv.c, conv.batch
    coeffs = (x.const, x.coeff(c) if c is not None else 0, x.coeff(bv) if bv is not None else 0)
    if (
        x.coeff(conv.ow) != 1
        or x.coeff(conv.oh) != wp
        or (conv.oh.size + 2, conv.ow.size + 2) != (hp, wp)
        or any(k % hw for k in coeffs)
    ):
        return None
    first, per_c, per_b = (k // hw for k in coeffs)
    return first, per_c, per_b


def write(w: _KernelWriter, out: list[str], isa: Isa) -> None:
    m = TILE[w.v.impl]
    conv = match(w.s, w.k, m)
    assert conv is not None, "winograd variant on a kernel it does not fit"
    p = w.k.contraction
    assert p is not None
    cl = p.loops
    (xb, x), (yb, y) = cl.x, cl.y
    py = w._pointer(yb)
    n, oh, ow, kh, kw, c = conv.n, conv.oh, conv.ow, conv.kh, conv.kw, conv.c
    K, OH, OW = n.size, oh.size, ow.size
    C = c.size if c is not None else 1
    AT, G, BT = _MATRICES[m]
    a = m + 2  # transformed tile side
    aa = a * a
    TH, TW = -(-OH // m), -(-OW // m)
    vw = max(isa.width, 1)
    if isa.name:
        mrw = 8 if vw == 16 else 6
        nrw = 2 * vw
    else:
        mrw, nrw = 4, 8
    R = _rows_per_block(TH, TW, mrw, BLOCK[m])
    TB = -(-(R * TW) // mrw) * mrw
    NB = -(-K // nrw)
    KP = NB * nrw
    items = -(-TH // R)  # work items per image
    bv = conv.batch
    images = bv.size if bv is not None else 1
    xc = x.coeff(c) if c is not None else 0
    xh, xw = x.coeff(oh), x.coeff(ow)
    yc = y.coeff(c) if c is not None else 0
    yh, yw, yn = y.coeff(kh), y.coeff(kw), y.coeff(n)
    name = w.name
    mk = _micro(w, isa, mrw, nrw, TB, KP, C)
    # ---- weight transform, once: u = G g G^T ---------------------------------------------
    rows_t = "\n".join(
        f"                    t[{i}][j] = {_comb(G[i], [f'r[{k}][j]' for k in range(3)])};"
        for i in range(a)
    )
    q_init = ", ".join(_comb(G[j], [f"t[i][{k}]" for k in range(3)]) for j in range(a))
    # A narrow (fp16/bf16) weight is widened as it is transformed: the transformed
    # weights are f32 in memory either way, the artifact's stay narrow.
    have = w.s.dtype(p.loops.y[0])
    gt = cexpr.ctype(have, "winograd weight")
    at = f"s[i * {yh} + j * {yw}]"
    load = at if have is DType.F32 else cexpr.cast(have, DType.F32, at)
    w.helpers.append(
        f"static float *_Atomic {name}_u;\n"
        f"static const void *_Atomic {name}_src;\n"
        f"static pthread_mutex_t {name}_mu = PTHREAD_MUTEX_INITIALIZER;\n"
        f"static const float *{name}_weights(const {gt} *g) {{\n"
        f"    float *u = atomic_load_explicit(&{name}_u, memory_order_acquire);\n"
        f"    if (u && atomic_load_explicit(&{name}_src, memory_order_acquire) == (const void *)g) return u;\n"
        f"    pthread_mutex_lock(&{name}_mu);\n"
        f"    u = atomic_load(&{name}_u);\n"
        f"    if (!u || atomic_load(&{name}_src) != (const void *)g) {{\n"
        f"        float *nu = 0;\n"
        f"        if (posix_memalign((void **)&nu, 64, sizeof(float) * {aa * C * KP})) nu = 0;\n"
        f"        if (nu) {{\n"
        f"            for (int64_t e = 0; e < {aa * C * KP}; e++) nu[e] = 0.0f;\n"
        f"            for (int64_t c = 0; c < {C}; c++)\n"
        f"            for (int64_t n = 0; n < {K}; n++) {{\n"
        f"                const {gt} *s = g + {y.const} + c * {yc} + n * {yn};\n"
        f"                float r[3][3], t[{a}][3];\n"
        f"                for (int i = 0; i < 3; i++) for (int j = 0; j < 3; j++) r[i][j] = {load};\n"
        f"                for (int j = 0; j < 3; j++) {{\n"
        f"{rows_t}\n"
        f"                }}\n"
        f"                for (int i = 0; i < {a}; i++) {{\n"
        f"                    const float q[{a}] = {{{q_init}}};\n"
        f"                    for (int j = 0; j < {a}; j++)\n"
        f"                        nu[(((i * {a} + j) * {NB} + n / {nrw}) * {C} + c) * {nrw} + n % {nrw}] = q[j];\n"
        f"                }}\n"
        f"            }}\n"
        f"            /* an older buffer may still be read by a concurrent caller: kept */\n"
        f"            atomic_store_explicit(&{name}_src, (const void *)g, memory_order_release);\n"
        f"            atomic_store_explicit(&{name}_u, nu, memory_order_release);\n"
        f"            u = nu;\n"
        f"        }}\n"
        f"    }}\n"
        f"    pthread_mutex_unlock(&{name}_mu);\n"
        f"    return u;\n"
        f"}}"
    )
    work = C * K * OH * OW * 9 * images
    i1 = "    "
    out.append(i1 + f"const float *U = {name}_weights({py});")
    out.append(i1 + "if (!U) return 1;")
    out.append(i1 + f"static _Thread_local float V[{aa * C * TB}] __attribute__((aligned(64)));")
    out.append(i1 + f"static _Thread_local float Mb[{aa * TB * KP}] __attribute__((aligned(64)));")
    out.append(
        i1 + f"static _Thread_local float Yb[{m * m * TB * KP}] __attribute__((aligned(64)));"
    )
    if images * items > 1 and w._parallel(work):
        w.pool = (str(images * items), "1")
        out.append(i1 + "for (int64_t it = lum_lo; it < lum_hi; it++) {")
    else:
        out.append(i1 + f"for (int64_t it = 0; it < {images * items}; it++) {{")
    i2 = i1 + "    "
    out.append(i2 + f"const int64_t t = it % {items};  /* the item within its image */")
    base = f"{x.const}"
    if bv is not None:
        out.append(i2 + f"const int64_t {bv.name} = it / {items};")
        base = f"{x.const} + {bv.name} * {x.coeff(bv)}"
    # ---- input transform B^T d B: per channel and tile row, rows combined first ---------
    WP = m * TW + 2  # input columns the tile row reads (past the input when OW % m != 0)
    stride = C * TB
    out.append(i2 + f"for (int64_t c = 0; c < {C}; c++) {{")
    out.append(i2 + f"    float *vc = V + c * {TB};")
    out.append(i2 + f"    for (int64_t r = 0; r < {R}; r++) {{")
    i4 = i2 + "        "
    out.append(i4 + f"const int64_t th = t * {R} + r;")
    out.append(i4 + f"if (th >= {TH}) break;")
    out.append(i4 + f"float e[{a}][{WP}];")
    out.append(i4 + f"float d[{a}][{WP}];")
    out.append(i4 + f"for (int i = 0; i < {a}; i++) {{")
    out.append(i4 + f"    if ({m} * th + i < {OH + 2}) {{")
    if w.v.unpad:  # the padded row built from the pad's source
        planes = _planes(w.s, w.k, conv)
        assert planes is not None and w.k.fold is not None, "unpad_legal"
        first, per_c, per_b = planes
        plane = f"{first} + c * {per_c}" + (f" + {bv.name} * {per_b}" if bv is not None else "")
        top = w.k.fold.widths(w.g)[0][0]
        out += padrows.padded_row(w, i4 + "        ", "d[i]", plane, f"{m} * th + i - {top}")
    else:
        px = w._pointer(xb)  # the pad (with `unpad` it has no buffer: its kernel is dropped)
        out.append(
            i4 + f"        const float *s = {px} + ({base} + c * {xc} + ({m} * th + i) * {xh});"
        )
        out.append(i4 + "        #pragma omp simd")
        out.append(i4 + f"        for (int64_t j = 0; j < {OW + 2}; j++) d[i][j] = s[j * {xw}];")
    for j in range(OW + 2, WP):
        out.append(i4 + f"        d[i][{j}] = 0.0f;")
    out.append(i4 + f"    }} else for (int64_t j = 0; j < {WP}; j++) d[i][j] = 0.0f;")
    out.append(i4 + "}")
    out.append(i4 + "#pragma omp simd")
    out.append(i4 + f"for (int64_t j = 0; j < {WP}; j++) {{")
    for i in range(a):
        out.append(i4 + f"    e[{i}][j] = {_comb(BT[i], [f'd[{k}][j]' for k in range(a)])};")
    out.append(i4 + "}")
    out.append(i4 + f"float *vr = vc + r * {TW};")
    out.append(i4 + f"for (int i = 0; i < {a}; i++) {{")
    out.append(i4 + "    const float *q = e[i];")
    out.append(i4 + f"    float *v0 = vr + (i * {a}) * {stride};")
    out.append(i4 + "    #pragma omp simd")
    out.append(i4 + f"    for (int64_t tw = 0; tw < {TW}; tw++) {{")
    qs = ", ".join(f"q{k} = q[{m} * tw + {k}]" for k in range(a))
    out.append(i4 + f"        const float {qs};")
    for j in range(a):
        out.append(
            i4 + f"        v0[{j * stride} + tw] = {_comb(BT[j], [f'q{k}' for k in range(a)])};"
        )
    out.append(i4 + "    }")
    out.append(i4 + "}")
    out.append(i2 + "    }")
    out.append(i2 + "}")
    # ---- a*a GEMMs -----------------------------------------------------------------------
    out.append(i2 + f"for (int64_t xi = 0; xi < {aa}; xi++)")
    out.append(i2 + f"for (int64_t nb = 0; nb < {NB}; nb++)")
    out.append(i2 + f"for (int64_t r0 = 0; r0 < {TB}; r0 += {mrw})")
    out.append(
        i2 + f"    {mk}(V + xi * {stride} + r0, U + (xi * {NB} + nb) * {C * nrw}, "
        f"Mb + (xi * {TB} + r0) * {KP} + nb * {nrw});"
    )
    # ---- output transform A^T M A (vectors along n), then the epilogue in output order --
    ys = TB * KP
    out.append(i2 + f"const int64_t used = ({TH} - t * {R} < {R} ? {TH} - t * {R} : {R}) * {TW};")
    out.append(i2 + "for (int64_t tb = 0; tb < used; tb++) {")
    out.append(i2 + f"    const float *mt = Mb + tb * {KP};")
    out.append(i2 + f"    float *yt = Yb + tb * {KP};")
    out.append(i2 + "    #pragma omp simd")
    out.append(i2 + f"    for (int64_t j = 0; j < {KP}; j++) {{")
    i4 = i2 + "        "
    for k in range(aa):
        out.append(i4 + f"const float q{k} = mt[{k * ys} + j];")
    for i in range(m):
        for col in range(a):
            expr = _comb(AT[i], [f"q{k * a + col}" for k in range(a)])
            out.append(i4 + f"const float s{i}_{col} = {expr};")
    for i in range(m):
        for jj in range(m):
            expr = _comb(AT[jj], [f"s{i}_{k}" for k in range(a)])
            out.append(i4 + f"yt[{(i * m + jj) * ys} + j] = {expr};")
    out.append(i2 + "    }")
    out.append(i2 + "}")
    out.append(i2 + f"for (int64_t {n.name} = 0; {n.name} < {K}; {n.name}++)")
    out.append(i2 + f"for (int64_t r = 0; r < used / {TW}; r++)")
    out.append(i2 + f"for (int dy = 0; dy < {m}; dy++) {{")
    out.append(i2 + f"    const int64_t {oh.name} = {m} * (t * {R} + r) + dy;")
    out.append(i2 + f"    if ({oh.name} >= {OH}) break;")
    out.append(i2 + f"    const float *yr = Yb + dy * {m * ys} + r * {TW * KP} + {n.name};")
    # the row's values gathered in output order first (loads and stores only), so that the
    # epilogue runs along the row in vectors: run on `yr` directly it was scalar, with a
    # strided read per element, a third of a 64-channel 56x56 layer's time
    out.append(i2 + f"    float row[{TW * m}] __attribute__((aligned(64)));")
    out.append(i2 + f"    for (int64_t tw = 0; tw < {TW}; tw++) {{")
    for jj in range(m):
        out.append(i2 + f"        row[tw * {m} + {jj}] = yr[{jj * ys} + tw * {KP}];")
    out.append(i2 + "    }")
    out.append(i2 + "    #pragma omp simd")
    out.append(i2 + f"    for (int64_t {ow.name} = 0; {ow.name} < {OW}; {ow.name}++) {{")
    w._store(out, len(i2) // 4 + 2, cl.out, f"row[{ow.name}]", "float")
    out.append(i2 + "    }")
    out.append(i2 + "}")
    out.append(i1 + "}")


def _comb(coefs: tuple[float, ...], terms: list[str]) -> str:
    """sum_k coefs[k] * terms[k] as C, zero terms left out."""
    parts: list[str] = []
    for co, t in zip(coefs, terms, strict=True):
        if co == 0:
            continue
        mag = abs(co)
        term = t if mag == 1 else f"{float(mag)!r}f * {t}"
        parts.append(("- " if co < 0 else "+ ") + term)
    if not parts:
        return "0.0f"
    s = " ".join(parts)
    return s[2:] if s.startswith("+ ") else "-" + s[2:]


def _rows_per_block(th: int, tw: int, mrw: int, cap: int = 64) -> int:
    """Tile rows per work item: whole rows (the input transform runs along them), about
    64 tiles or fewer, few padded tiles (a block is whole micro-tiles of `mrw`), and at
    least 4 items where the rows allow."""
    best, pick = -1.0, 1
    for r in range(1, th + 1):
        if r > 1 and r * tw > cap:
            break
        tb = -(-(r * tw) // mrw) * mrw
        items = -(-th // r)
        score = (r * tw / tb) * min(items, 4) / 4
        if score >= best:
            best, pick = score, r
    return pick


def _micro(w: _KernelWriter, isa: Isa, mrw: int, nrw: int, tb: int, kp: int, C: int) -> str:
    """m[r][j] = sum_c v[c][r] u[c][j] for mrw rows and nrw columns: v rows `tb` apart
    per c, u a packed panel of `nrw` per c, m rows `kp` apart.  A function of its own so
    the accumulators stay in registers (see gemm._micro)."""
    name = f"{w.name}_wmk"
    head = (
        f"static __attribute__((noinline, noclone)) void {name}("
        f"const float *v, const float *u, float *m) {{"
    )
    lines = [head]
    if isa.name:
        vw = isa.width
        nv = nrw // vw
        acc = [[f"c{i}_{j}" for j in range(nv)] for i in range(mrw)]
        for i in range(mrw):
            lines.append("    lum_vf " + ", ".join(f"{a} = LUM_VZERO()" for a in acc[i]) + ";")
        lines.append(f"    for (int64_t k = 0; k < {C}; k++, v += {tb}, u += {nrw}) {{")
        lines.append(
            "        const lum_vf "
            + ", ".join(f"b{j} = LUM_VLOAD(u + {j * vw})" for j in range(nv))
            + ";"
        )
        for i in range(mrw):
            fmas = " ".join(f"{acc[i][j]} = LUM_VFMA(a{i}, b{j}, {acc[i][j]});" for j in range(nv))
            lines.append(f"        const lum_vf a{i} = LUM_VBCAST(v[{i}]); {fmas}")
        lines.append("    }")
        for i in range(mrw):
            lines.append(
                "    "
                + " ".join(f"LUM_VSTORE(m + {i * kp + j * vw}, {acc[i][j]});" for j in range(nv))
            )
    else:
        lines.append(f"    float acc[{mrw}][{nrw}] = {{{{0}}}};")
        lines.append(f"    for (int64_t k = 0; k < {C}; k++, v += {tb}, u += {nrw})")
        lines.append(f"        for (int i = 0; i < {mrw}; i++)")
        lines.append(f"            for (int j = 0; j < {nrw}; j++) acc[i][j] += v[i] * u[j];")
        lines.append(f"    for (int i = 0; i < {mrw}; i++)")
        lines.append(f"        for (int j = 0; j < {nrw}; j++) m[i * {kp} + j] = acc[i][j];")
    lines.append("}")
    w.helpers.append("\n".join(lines))
    return name


__all__ = ["TILE", "Conv3x3", "legal", "match", "unpad_legal", "write"]
