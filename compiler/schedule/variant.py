"""`Variant`: one way to run one kernel.  The search chooses a variant per kernel; the
backend's code generator honours it.  The default variant is the backend's own rule of
thumb, so a schedule compiled without a search is exactly what it was before."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Variant:
    impl: str = "generated"  # "generated" | "blas" (a library GEMM, fused epilogue after)
    mr: int | None = None  # contraction register tile rows; None: the backend default
    nr: int | None = None  # contraction register tile columns
    kc: int | None = None  # reduction (K) block; None: not blocked
    parallel: bool | None = None  # None: parallel above the backend's work threshold
    orient: int = 0  # a contraction's orientation: 0 as planned, n its n-th alternative
    unpad: bool = False  # reads the source of the pad it reads (`Kernel.fold`), not the pad
    # packs a strided operand to unit stride: the GEMM its rows per band (a strided 1x1
    # convolution), the unpadding stencil its stride-2 tile split by parity
    compact: bool = False

    @property
    def label(self) -> str:
        parts = [self.impl]
        for name in ("mr", "nr", "kc"):
            value = getattr(self, name)
            if value is not None:
                parts.append(f"{name}{value}")
        if self.parallel is not None:
            parts.append("par" if self.parallel else "seq")
        if self.orient:
            parts.append(f"o{self.orient}")
        if self.unpad:
            parts.append("unpad")
        if self.compact:
            parts.append("compact")
        return "-".join(parts)

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    @staticmethod
    def from_json(data: dict[str, object]) -> Variant:
        return Variant(
            **{
                k: data[k]
                for k in ("impl", "mr", "nr", "kc", "parallel", "orient", "unpad", "compact")
                if k in data
            }
        )  # type: ignore[arg-type]


DEFAULT = Variant()
