"""How long a GPU takes for one matrix multiplication, from its shape.

A GEMM ``C = A·B`` with ``A`` of ``m×k`` and ``B`` of ``k×n`` costs ``2·m·n·k`` FLOPs (a
multiply-add is two) and moves at least ``m·k + k·n + m·n`` elements through HBM. Dividing
the FLOPs by the data sheet's peak is the textbook's answer; a GPU gets there only for large,
well-shaped matrices. NVIDIA's "Matrix Multiplication Background User's Guide" (Deep Learning
Performance documentation,
https://docs.nvidia.com/deeplearning/performance/dl-performance-matrix-multiplication/)
names the three things between the two, and :class:`GemmModel` prices each:

1. **Roofline** (§ "Math and Memory Bounds"): a GEMM takes at least its FLOPs at the
   tensor-core peak and at least its bytes at the HBM bandwidth, whichever is longer. A GEMM
   with a small inner dimension ``k`` (attention's ``QKᵀ`` over a head of 64 or 128) is
   memory bound.
2. **Tile quantisation** (§ "Tile Quantization"): cuBLAS splits ``C`` into output tiles of
   ``tile_m × tile_n`` (e.g. 256×128 or 128×128), one per thread block; a tile that sticks out
   of ``C`` costs as much as a full one. ``ceil(m/tile_m)·ceil(n/tile_n)`` tiles.
3. **Wave quantisation** (§ "Wave Quantization"): the tiles run in waves of one tile per
   streaming multiprocessor (SM); the last wave, however few tiles it holds, takes as long
   as a full one. ``ceil(tiles/SMs)`` waves, each ``2·tile_m·tile_n·k`` FLOPs per SM at
   ``peak/SMs``.

Beyond these the kernels themselves fall short of peak (instruction issue, the pipeline's
prologue and epilogue, clock throttling); :attr:`GemmModel.achievable_fraction` holds that
factor where a published measurement gives one, else 1.

Units: seconds, FLOP/s, bytes/s; sizes are elements.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Gemm:
    """``C (m×n) = A (m×k) · B (k×n)``, ``batch`` independent times (a batched GEMM, e.g. one
    per attention head)."""

    m: int
    n: int
    k: int
    batch: int = 1

    def __post_init__(self) -> None:
        for name in ("m", "n", "k", "batch"):
            if getattr(self, name) < 1:
                raise ValueError(f"GEMM {name} must be at least 1, got {getattr(self, name)}")

    @property
    def flops(self) -> float:
        """``2·batch·m·n·k`` FLOPs."""
        return 2.0 * self.batch * self.m * self.n * self.k

    def nbytes(self, itemsize: int) -> float:
        """Bytes read and written at least once: ``A``, ``B`` and ``C``."""
        return float(itemsize * self.batch * (self.m * self.k + self.k * self.n
                                              + self.m * self.n))

    def backward(self) -> tuple[Gemm, Gemm]:
        """The two GEMMs of its backward pass: ``dA = dC·Bᵀ`` (``m×n`` by ``n×k``) and
        ``dB = Aᵀ·dC`` (``k×m`` by ``m×n``) — twice the forward's FLOPs, other shapes."""
        return (Gemm(self.m, self.k, self.n, self.batch),
                Gemm(self.k, self.n, self.m, self.batch))


@dataclass(frozen=True)
class GemmModel:
    """A GPU's GEMM time: roofline, tile and wave quantisation (module docstring).

    Attributes:
        peak_flops_per_s: dense tensor-core peak for the GEMM's data type, FLOP/s.
        mem_bandwidth_Bps: HBM bandwidth, bytes/s.
        sms: streaming multiprocessors, each running one output tile at a time.
        tile_m / tile_n: the output tile of one thread block, elements.
        achievable_fraction: the share of peak a large, well-shaped GEMM reaches (1: none
            known).
    """

    peak_flops_per_s: float
    mem_bandwidth_Bps: float
    sms: int
    tile_m: int = 256
    tile_n: int = 128
    achievable_fraction: float = 1.0

    def __post_init__(self) -> None:
        if self.peak_flops_per_s <= 0 or self.mem_bandwidth_Bps <= 0:
            raise ValueError("peak FLOP/s and memory bandwidth must be positive")
        if min(self.sms, self.tile_m, self.tile_n) < 1:
            raise ValueError("SMs and tile sizes must be at least 1")
        if not 0 < self.achievable_fraction <= 1:
            raise ValueError(f"achievable fraction must be in (0, 1], got "
                             f"{self.achievable_fraction}")

    def tiles(self, g: Gemm) -> int:
        """Output tiles, ``batch·ceil(m/tile_m)·ceil(n/tile_n)``."""
        return g.batch * math.ceil(g.m / self.tile_m) * math.ceil(g.n / self.tile_n)

    def waves(self, g: Gemm) -> int:
        """Waves of one tile per SM, ``ceil(tiles/SMs)``."""
        return math.ceil(self.tiles(g) / self.sms)

    def compute_s(self, g: Gemm) -> float:
        """Tensor-core time: every wave computes full tiles on every SM, s."""
        per_sm = self.peak_flops_per_s * self.achievable_fraction / self.sms
        return self.waves(g) * 2.0 * self.tile_m * self.tile_n * g.k / per_sm

    def memory_s(self, g: Gemm, itemsize: int) -> float:
        """HBM time for the operands and the result, s."""
        return g.nbytes(itemsize) / self.mem_bandwidth_Bps

    def seconds(self, g: Gemm, itemsize: int = 2) -> float:
        """The GEMM's time: the longer of its compute and its memory traffic, s."""
        return max(self.compute_s(g), self.memory_s(g, itemsize))

    def efficiency(self, g: Gemm, itemsize: int = 2) -> float:
        """Achieved share of peak, ``FLOPs / (seconds · peak)``."""
        return g.flops / (self.seconds(g, itemsize) * self.peak_flops_per_s)
