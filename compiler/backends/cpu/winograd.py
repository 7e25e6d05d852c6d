"""Winograd F(2x2, 3x3) for 3x3 stride-1 convolutions over an already-padded input.

    U[xi][c][n] = (G g[n][c] G^T)[xi]        once, at the first call (heap buffer)
    for each work item (R whole rows of 2x2 output tiles, TB tiles)      [thread pool]
        V[xi][c][tb] = (B^T d B)[xi]          d: the tile's 4x4 input patch; per input
                                              row pair, columns combined first (vectors)
        M[xi][tb][n] = sum_c V[xi][c][tb] U[xi][c][n]    16 GEMMs, SIMD micro-kernel
        Y[.][tb][n]  = A^T M[.][tb][n] A      vectors along n
        out          = epilogue(Y)            in output order (bias, residual, ReLU)

16 multiply-adds per tile and channel pair where the direct convolution does 36, plus
the transforms.  The weight transform runs once per library and weights blob (keyed on
the weights' address; a new address makes a new buffer and leaks the old one, which a
concurrent caller may still read), so the pipeline's weights blob does not change; it
costs 16/9 of the 3x3 weights in heap memory.  A tile past an odd output's edge reads
zeros beyond the padded input and stores only its valid outputs.

`legal` recognizes the pattern from the contraction's loops and offsets alone: output
channel `n` (Y moves along it, X does not), two output positions whose X coefficients
each equal that of one reduced loop of size 3 (the window), and at most one more reduced
loop (the input channel).  Anything else (a batch, a stride, a dilation, a 1x1 or 7x7
window, a plan that swapped the operands) is not offered.  Measured on cnn (2 threads):
1.25-1.5x the generated code on every 3x3 stride-1 layer (56x56x64 to 7x7x512).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from luminal.compiler.backends.cpu.simd import Isa
from luminal.compiler.ir import DType
from luminal.compiler.schedule import Kernel, Schedule
from luminal.compiler.schedule.symbolic import Var

if TYPE_CHECKING:
    from luminal.compiler.backends.cpu.codegen import _KernelWriter


#: Largest thread-local transform buffer (bytes) a convolution may need to be offered.
MAX_BUFFER = 4 << 20


@dataclass(frozen=True)
class Conv3x3:
    n: Var  # output channel
    oh: Var  # outer output position
    ow: Var  # inner output position
    kh: Var  # window loop paired with oh
    kw: Var  # window loop paired with ow
    c: Var | None  # input channel (None: one channel)


def match(sched: Schedule, kernel: Kernel) -> Conv3x3 | None:
    """The convolution's loops when `kernel` is a Winograd-able 3x3 convolution."""
    p = kernel.contraction
    if kernel.kind != "contraction" or p is None:
        return None
    g = sched.graph
    node = g.nodes[kernel.reduction if kernel.reduction is not None else kernel.node]
    cl = p.loops
    (xb, x), (yb, y) = cl.x, cl.y
    if not (
        node.dtype is DType.F32 and sched.dtype(xb) is DType.F32 and sched.dtype(yb) is DType.F32
    ):
        return None
    n = p.n
    outs = [v for v in cl.loops if v not in cl.reduced and v != n]
    red = [v for v in cl.loops if v in cl.reduced]
    if len(outs) != 2 or len(red) not in (2, 3) or len(set(cl.loops)) != len(cl.loops):
        return None
    if x.coeff(n) != 0 or y.coeff(n) == 0 or any(y.coeff(o) != 0 for o in outs):
        return None
    if any(o.size < 2 for o in outs) or any(x.coeff(o) == 0 for o in outs):
        return None
    if cl.out.coeff(n) == 0 or any(cl.out.coeff(o) == 0 for o in outs):
        return None
    pairs = []
    for o in outs:
        ks = [r for r in red if r.size == 3 and x.coeff(r) == x.coeff(o)]
        if len(ks) != 1:
            return None
        pairs.append(ks[0])
    if pairs[0] == pairs[1] or x.coeff(outs[0]) == x.coeff(outs[1]):
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
    oh, ow = sorted(outs, key=lambda v: -abs(x.coeff(v)))
    # thread-local buffers (input and product transforms) of at most ~4 MiB each
    cin = c.size if c is not None else 1
    th, tw = -(-oh.size // 2), -(-ow.size // 2)
    tiles = max(-(-(_rows_per_block(th, tw, r) * tw) // r) * r for r in (4, 6, 8))
    if 16 * max(cin, n.size + 32) * tiles * 4 > MAX_BUFFER:
        return None
    kh = pairs[outs.index(oh)]
    kw = pairs[outs.index(ow)]
    return Conv3x3(n, oh, ow, kh, kw, c)


def legal(sched: Schedule, kernel: Kernel) -> bool:
    """An f32 3x3 stride-1 dilation-1 convolution over a padded input (see `match`)."""
    return match(sched, kernel) is not None


def write(w: _KernelWriter, out: list[str], isa: Isa) -> None:
    conv = match(w.s, w.k)
    assert conv is not None, "winograd variant on a kernel it does not fit"
    p = w.k.contraction
    assert p is not None
    cl = p.loops
    (xb, x), (yb, y) = cl.x, cl.y
    px, py = w._pointer(xb), w._pointer(yb)
    n, oh, ow, kh, kw, c = conv.n, conv.oh, conv.ow, conv.kh, conv.kw, conv.c
    K, OH, OW = n.size, oh.size, ow.size
    C = c.size if c is not None else 1
    TH, TW = -(-OH // 2), -(-OW // 2)
    vw = max(isa.width, 1)
    if isa.name:
        mrw = 8 if vw == 16 else 6
        nrw = 2 * vw
    else:
        mrw, nrw = 4, 8
    R = _rows_per_block(TH, TW, mrw)
    TB = -(-(R * TW) // mrw) * mrw
    NB = -(-K // nrw)
    KP = NB * nrw
    items = -(-TH // R)
    xc = x.coeff(c) if c is not None else 0
    xh, xw = x.coeff(oh), x.coeff(ow)
    yc = y.coeff(c) if c is not None else 0
    yh, yw, yn = y.coeff(kh), y.coeff(kw), y.coeff(n)
    name = w.name
    mk = _micro(w, isa, mrw, nrw, TB, KP)
    # ---- weight transform, once --------------------------------------------------------
    w.helpers.append(
        f"static float *_Atomic {name}_u;\n"
        f"static const void *_Atomic {name}_src;\n"
        f"static pthread_mutex_t {name}_mu = PTHREAD_MUTEX_INITIALIZER;\n"
        f"static const float *{name}_weights(const float *g) {{\n"
        f"    float *u = atomic_load_explicit(&{name}_u, memory_order_acquire);\n"
        f"    if (u && atomic_load_explicit(&{name}_src, memory_order_acquire) == (const void *)g) return u;\n"
        f"    pthread_mutex_lock(&{name}_mu);\n"
        f"    u = atomic_load(&{name}_u);\n"
        f"    if (!u || atomic_load(&{name}_src) != (const void *)g) {{\n"
        f"        float *nu = 0;\n"
        f"        if (posix_memalign((void **)&nu, 64, sizeof(float) * {16 * C * KP})) nu = 0;\n"
        f"        if (nu) {{\n"
        f"            for (int64_t e = 0; e < {16 * C * KP}; e++) nu[e] = 0.0f;\n"
        f"            for (int64_t c = 0; c < {C}; c++)\n"
        f"            for (int64_t n = 0; n < {K}; n++) {{\n"
        f"                const float *s = g + {y.const} + c * {yc} + n * {yn};\n"
        f"                float r[3][3], t[4][3];\n"
        f"                for (int i = 0; i < 3; i++) for (int j = 0; j < 3; j++) r[i][j] = s[i * {yh} + j * {yw}];\n"
        f"                for (int j = 0; j < 3; j++) {{\n"
        f"                    t[0][j] = r[0][j];\n"
        f"                    t[1][j] = 0.5f * (r[0][j] + r[1][j] + r[2][j]);\n"
        f"                    t[2][j] = 0.5f * (r[0][j] - r[1][j] + r[2][j]);\n"
        f"                    t[3][j] = r[2][j];\n"
        f"                }}\n"
        f"                for (int i = 0; i < 4; i++) {{\n"
        f"                    const float q[4] = {{t[i][0], 0.5f * (t[i][0] + t[i][1] + t[i][2]),\n"
        f"                                        0.5f * (t[i][0] - t[i][1] + t[i][2]), t[i][2]}};\n"
        f"                    for (int j = 0; j < 4; j++)\n"
        f"                        nu[(((i * 4 + j) * {NB} + n / {nrw}) * {C} + c) * {nrw} + n % {nrw}] = q[j];\n"
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
    work = C * K * OH * OW * 9
    i1 = "    "
    out.append(i1 + f"const float *U = {name}_weights({py});")
    out.append(i1 + "if (!U) return 1;")
    out.append(i1 + f"static _Thread_local float V[{16 * C * TB}] __attribute__((aligned(64)));")
    out.append(i1 + f"static _Thread_local float Mb[{16 * TB * KP}] __attribute__((aligned(64)));")
    out.append(i1 + f"static _Thread_local float Yb[{4 * TB * KP}] __attribute__((aligned(64)));")
    if items > 1 and w._parallel(work):
        w.pool = (str(items), "1")
        out.append(i1 + "for (int64_t t = lum_lo; t < lum_hi; t++) {")
    else:
        out.append(i1 + f"for (int64_t t = 0; t < {items}; t++) {{")
    i2 = i1 + "    "
    # ---- input transform: per channel and tile row, columns combined first ----------
    WP = 2 * TW + 2  # input columns the tile row reads (one past the input when OW is odd)
    stride = C * TB
    out.append(i2 + f"for (int64_t c = 0; c < {C}; c++) {{")
    out.append(i2 + f"    float *vc = V + c * {TB};")
    out.append(i2 + f"    for (int64_t r = 0; r < {R}; r++) {{")
    i4 = i2 + "        "
    out.append(i4 + f"const int64_t th = t * {R} + r;")
    out.append(i4 + f"if (th >= {TH}) break;")
    out.append(i4 + f"float e[4][{WP}];")
    out.append(i4 + f"float d[4][{WP}];")
    out.append(i4 + "for (int i = 0; i < 4; i++) {")
    out.append(i4 + f"    const float *s = {px} + ({x.const} + c * {xc} + (2 * th + i) * {xh});")
    out.append(i4 + f"    if (2 * th + i < {OH + 2}) {{")
    out.append(i4 + "        #pragma omp simd")
    out.append(i4 + f"        for (int64_t j = 0; j < {OW + 2}; j++) d[i][j] = s[j * {xw}];")
    for j in range(OW + 2, WP):
        out.append(i4 + f"        d[i][{j}] = 0.0f;")
    out.append(i4 + f"    }} else for (int64_t j = 0; j < {WP}; j++) d[i][j] = 0.0f;")
    out.append(i4 + "}")
    out.append(i4 + "#pragma omp simd")
    out.append(i4 + f"for (int64_t j = 0; j < {WP}; j++) {{")
    out.append(i4 + "    e[0][j] = d[0][j] - d[2][j]; e[1][j] = d[1][j] + d[2][j];")
    out.append(i4 + "    e[2][j] = d[2][j] - d[1][j]; e[3][j] = d[1][j] - d[3][j];")
    out.append(i4 + "}")
    out.append(i4 + f"float *vr = vc + r * {TW};")
    out.append(i4 + "for (int i = 0; i < 4; i++) {")
    out.append(i4 + "    const float *q = e[i];")
    out.append(i4 + f"    float *v0 = vr + (i * 4) * {stride};")
    out.append(i4 + "    #pragma omp simd")
    out.append(i4 + f"    for (int64_t tw = 0; tw < {TW}; tw++) {{")
    out.append(
        i4
        + "        const float q0 = q[2 * tw], q1 = q[2 * tw + 1], q2 = q[2 * tw + 2], q3 = q[2 * tw + 3];"
    )
    out.append(i4 + f"        v0[tw] = q0 - q2; v0[{stride} + tw] = q1 + q2;")
    out.append(i4 + f"        v0[{2 * stride} + tw] = q2 - q1; v0[{3 * stride} + tw] = q1 - q3;")
    out.append(i4 + "    }")
    out.append(i4 + "}")
    out.append(i2 + "    }")
    out.append(i2 + "}")
    # ---- 16 GEMMs --------------------------------------------------------------------
    out.append(i2 + "for (int64_t xi = 0; xi < 16; xi++)")
    out.append(i2 + f"for (int64_t nb = 0; nb < {NB}; nb++)")
    out.append(i2 + f"for (int64_t r0 = 0; r0 < {TB}; r0 += {mrw})")
    out.append(
        i2 + f"    {mk}(V + xi * {stride} + r0, U + (xi * {NB} + nb) * {C * nrw}, "
        f"Mb + (xi * {TB} + r0) * {KP} + nb * {nrw});"
    )
    # ---- output transform (vectors along n), then the epilogue in output order ---------
    out.append(i2 + f"const int64_t used = ({TH} - t * {R} < {R} ? {TH} - t * {R} : {R}) * {TW};")
    out.append(i2 + "for (int64_t tb = 0; tb < used; tb++) {")
    out.append(i2 + f"    const float *mt = Mb + tb * {KP};")
    out.append(i2 + f"    float *yt = Yb + tb * {KP};")
    out.append(i2 + "    #pragma omp simd")
    out.append(i2 + f"    for (int64_t j = 0; j < {KP}; j++) {{")
    i4 = i2 + "        "
    out.append(i4 + "float q[16]; for (int i = 0; i < 16; i++) q[i] = mt[i * " + f"{TB * KP} + j];")
    out.append(i4 + "float s0[4], s1[4];")
    out.append(i4 + "for (int i = 0; i < 4; i++) {")
    out.append(i4 + "    s0[i] = q[i] + q[4 + i] + q[8 + i];")
    out.append(i4 + "    s1[i] = q[4 + i] - q[8 + i] - q[12 + i];")
    out.append(i4 + "}")
    ys = TB * KP
    out.append(i4 + f"yt[j] = s0[0] + s0[1] + s0[2]; yt[{ys} + j] = s0[1] - s0[2] - s0[3];")
    out.append(
        i4 + f"yt[{2 * ys} + j] = s1[0] + s1[1] + s1[2]; yt[{3 * ys} + j] = s1[1] - s1[2] - s1[3];"
    )
    out.append(i2 + "    }")
    out.append(i2 + "}")
    out.append(i2 + f"for (int64_t {n.name} = 0; {n.name} < {K}; {n.name}++)")
    out.append(i2 + f"for (int64_t r = 0; r < used / {TW}; r++)")
    out.append(i2 + "for (int dy = 0; dy < 2; dy++) {")
    out.append(i2 + f"    const int64_t {oh.name} = 2 * (t * {R} + r) + dy;")
    out.append(i2 + f"    if ({oh.name} >= {OH}) break;")
    out.append(i2 + f"    const float *yr = Yb + dy * {2 * ys} + r * {TW * KP} + {n.name};")
    out.append(i2 + f"    for (int64_t {ow.name} = 0; {ow.name} < {OW}; {ow.name}++) {{")
    value = f"yr[({ow.name} & 1) * {ys} + ({ow.name} >> 1) * {KP}]"
    w._store(out, len(i2) // 4 + 2, cl.out, value, "float")
    out.append(i2 + "    }")
    out.append(i2 + "}")
    out.append(i1 + "}")


def _rows_per_block(th: int, tw: int, mrw: int) -> int:
    """Tile rows per work item: whole rows (the input transform runs along them), about
    64 tiles or fewer, few padded tiles (a block is whole micro-tiles of `mrw`), and at
    least 4 items where the rows allow."""
    best, pick = -1.0, 1
    for r in range(1, th + 1):
        if r > 1 and r * tw > 64:
            break
        tb = -(-(r * tw) // mrw) * mrw
        items = -(-th // r)
        score = (r * tw / tb) * min(items, 4) / 4
        if score >= best:
            best, pick = score, r
    return pick


def _micro(w: _KernelWriter, isa: Isa, mrw: int, nrw: int, tb: int, kp: int) -> str:
    """m[r][j] = sum_c v[c][r] u[c][j] for mrw rows and nrw columns: v rows `tb` apart
    per c, u a packed panel of `nrw` per c, m rows `kp` apart.  A function of its own so
    the accumulators stay in registers (see gemm._micro)."""
    name = f"{w.name}_wmk"
    head = (
        f"static __attribute__((noinline, noclone)) void {name}("
        f"const float *v, const float *u, float *m) {{"
    )
    C = _channels(w)
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


def _channels(w: _KernelWriter) -> int:
    conv = match(w.s, w.k)
    assert conv is not None
    return conv.c.size if conv.c is not None else 1


__all__ = ["Conv3x3", "legal", "match", "write"]
