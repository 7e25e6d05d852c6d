"""Running an SA-128 program on the CPU, and what it would cost on the chip.

The simulator executes each instruction with numpy, in program order, over the DRAM
regions (the caller's inputs and outputs, the weights, an arena) and the scratchpad.
Every DMA pattern is checked against its region's size when the program is loaded, so a
program cannot read or write outside its memory.

The cycle model is static (it depends on the program, not on the data) and serial (no
overlap of DMA and compute, so it is an upper bound):

    LOAD, STORE   dma_latency + bytes / dma_bytes_per_cycle
    MATMUL        2k + m + n    weights preloaded one row per cycle, then m rows pass a
                                k-deep, n-wide array with skew
    ACT, FILL     vector_latency + elements / vector_lanes
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from luminal_systolic.isa import SLOTS, TILE, Act, Fill, Fn, Instruction, Load, MatMul, Store


@dataclass(frozen=True)
class SimConfig:
    clock_hz: float = 1.0e9
    dma_bytes_per_cycle: int = 64
    dma_latency: int = 200
    vector_lanes: int = 128
    vector_latency: int = 8


@dataclass(frozen=True)
class Cycles:
    dma: int
    matmul: int
    vector: int
    macs: int  # multiply-accumulates the array performs

    @property
    def total(self) -> int:
        return self.dma + self.matmul + self.vector

    def seconds(self, config: SimConfig) -> float:
        return self.total / config.clock_hz

    @property
    def array_utilization(self) -> float:
        """MACs over what a fully busy array would do in the same cycles."""
        return self.macs / (self.total * TILE * TILE) if self.total else 0.0

    def to_json(self, config: SimConfig) -> dict[str, float]:
        return {
            "cycles": self.total,
            "dma_cycles": self.dma,
            "matmul_cycles": self.matmul,
            "vector_cycles": self.vector,
            "macs": self.macs,
            "array_utilization": round(self.array_utilization, 4),
            "estimated_seconds": self.seconds(config),
        }


class SimulatorFault(ValueError):
    """A program that breaks the machine's rules (memory bounds, slot shapes)."""


def estimate(program: Sequence[Instruction], config: SimConfig = SimConfig()) -> Cycles:
    dma = matmul = vector = macs = 0
    shapes: dict[int, tuple[int, int]] = {}
    for ins in program:
        if isinstance(ins, (Load, Store)):
            elements = math.prod(c for c, _ in ins.dims)
            dma += config.dma_latency + math.ceil(4 * elements / config.dma_bytes_per_cycle)
            if isinstance(ins, Load):
                shapes[ins.slot] = _shape2(ins.dims)
        elif isinstance(ins, MatMul):
            (m, k), (_, n) = shapes.get(ins.a, (1, 1)), shapes.get(ins.b, (1, 1))
            matmul += 2 * k + m + n
            macs += m * k * n
            shapes[ins.acc] = (m, n)
        elif isinstance(ins, Act):
            rows, cols = shapes.get(ins.srcs[0], (1, 1))
            vector += config.vector_latency + math.ceil(rows * cols / config.vector_lanes)
            shapes[ins.dst] = (rows, cols)
        else:
            vector += config.vector_latency + math.ceil(ins.rows * ins.cols / config.vector_lanes)
            shapes[ins.dst] = (ins.rows, ins.cols)
    return Cycles(dma, matmul, vector, macs)


class Machine:
    """One SA-128 with a program loaded; `run` may be called many times."""

    def __init__(
        self,
        program: Sequence[Instruction],
        weights: np.ndarray,
        arena_elements: int,
        input_sizes: Sequence[int],
        output_sizes: Sequence[int],
    ) -> None:
        self.program = tuple(program)
        self.weights = weights
        self.arena_elements = arena_elements
        sizes = {(0, i): n for i, n in enumerate(input_sizes)} | {
            (1, i): n for i, n in enumerate(output_sizes)
        }
        sizes[(2, 0)] = weights.size
        sizes[(3, 0)] = arena_elements
        # Each DMA's element indices, computed and bounds-checked once at load.
        self.index: list[np.ndarray | None] = []
        for n, ins in enumerate(self.program):
            if isinstance(ins, (Load, Store)):
                idx = _grid(ins.offset, ins.dims)
                size = sizes.get((ins.region, ins.index))
                if size is None or (idx.size and (idx.min() < 0 or idx.max() >= size)):
                    raise SimulatorFault(f"instruction {n} accesses outside its memory region")
                if not 0 <= ins.slot < SLOTS:
                    raise SimulatorFault(f"instruction {n} names scratchpad slot {ins.slot}")
                self.index.append(idx)
            else:
                self.index.append(None)

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        """Execute the program; `outputs` (flat f32 arrays) receive the results."""
        arena = np.empty(self.arena_elements, np.float32)
        regions = {
            **{(0, i): a.reshape(-1) for i, a in enumerate(inputs)},
            **{(1, i): a.reshape(-1) for i, a in enumerate(outputs)},
            (2, 0): self.weights,
            (3, 0): arena,
        }
        slots: list[np.ndarray] = [np.zeros((1, 1), np.float32)] * SLOTS
        with np.errstate(all="ignore"):  # IEEE results (inf, nan) as the reference gives
            for ins, idx in zip(self.program, self.index, strict=True):
                if isinstance(ins, Load):
                    slots[ins.slot] = regions[(ins.region, ins.index)][idx]
                elif isinstance(ins, Store):
                    tile = slots[ins.slot]
                    if tile.shape != idx.shape:  # type: ignore[union-attr]
                        raise SimulatorFault(f"store of a {tile.shape} tile into {idx.shape}")  # type: ignore[union-attr]
                    regions[(ins.region, ins.index)][idx] = tile
                elif isinstance(ins, MatMul):
                    product = np.matmul(slots[ins.a], slots[ins.b], dtype=np.float32)
                    slots[ins.acc] = slots[ins.acc] + product if ins.accumulate else product
                elif isinstance(ins, Act):
                    slots[ins.dst] = _act(ins.fn, [slots[s] for s in ins.srcs])
                elif isinstance(ins, Fill):
                    slots[ins.dst] = np.full((ins.rows, ins.cols), ins.value, np.float32)


def _act(fn: Fn, x: list[np.ndarray]) -> np.ndarray:
    if fn is Fn.COPY:
        return x[0].copy()
    if fn is Fn.EXP2:
        return np.exp2(x[0])
    if fn is Fn.LOG2:
        return np.log2(x[0])
    if fn is Fn.SIN:
        return np.sin(x[0])
    if fn is Fn.SQRT:
        return np.sqrt(x[0])
    if fn is Fn.RECIP:
        return np.reciprocal(x[0])
    if fn is Fn.ADD:
        return x[0] + x[1]
    if fn is Fn.MUL:
        return x[0] * x[1]
    if fn is Fn.MAX:
        return np.maximum(x[0], x[1])
    if fn is Fn.CMPLT:
        return np.less(x[0], x[1])
    if fn is Fn.CMPEQ:
        return np.equal(x[0], x[1])
    if fn is Fn.WHERE:
        return np.where(x[0], x[1], x[2])
    if fn is Fn.TO_F32:
        return x[0].astype(np.float32)
    return x[0].astype(bool)


def _grid(offset: int, dims: tuple[tuple[int, int], ...]) -> np.ndarray:
    idx = np.full((), offset, np.int64)
    for k, (count, stride) in enumerate(dims):
        shape = [1] * len(dims)
        shape[k] = count
        idx = idx + np.arange(count, dtype=np.int64).reshape(shape) * stride
    return np.broadcast_to(idx, tuple(c for c, _ in dims)).copy()


def _shape2(dims: tuple[tuple[int, int], ...]) -> tuple[int, int]:
    counts = [c for c, _ in dims]
    return (counts[0], counts[1]) if len(counts) == 2 else (1, math.prod(counts))
