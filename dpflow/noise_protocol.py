"""The noise protocol: every draw a mechanism may make, declared once.

Nodes draw through it (``EvalContext.noise``); the interpreter's sources implement it
(:class:`~dpflow.interpreter.noise.SecureNoise`, :class:`~dpflow.interpreter.noise.SeededNoise`).
It imports neither, so imports keep pointing downward (privacy, nodes, interpreter).
The derived draws (``gumbel``, ``uniform``, ``uniform_int``, ``uniform_words``) are built once on ``laplace``
(:class:`~dpflow.interpreter.noise.LaplaceDerivedDraws`, maps in :mod:`dpflow.interpreter.samplers`); exact
sources draw ``uniform_int`` and ``uniform_words`` from their exact word stream instead.

>>> from dpflow.interpreter.noise import SeededNoise
>>> isinstance(SeededNoise(0), NoiseSource)
True
"""

from __future__ import annotations

from fractions import Fraction
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["NoiseSource"]


@runtime_checkable
class NoiseSource(Protocol):
    """Where mechanisms get their randomness."""

    description: str
    seeded: bool

    def normal(self, sigma: float, shape: tuple[int, ...]) -> np.ndarray:
        """Gaussian noise with standard deviation ``sigma`` (floating point)."""
        ...

    def laplace(self, scale: float, shape: tuple[int, ...]) -> np.ndarray:
        """Laplace noise with scale ``scale`` (floating point)."""
        ...

    @property
    def exact(self) -> bool:
        """True when the source samples exact discrete noise (lattice releases)."""
        ...

    def discrete_gaussian(self, sigma2: Fraction, shape: tuple[int, ...]) -> np.ndarray:
        """Integers from the discrete Gaussian with variance parameter ``sigma2`` (exact)."""
        ...

    def discrete_laplace(self, scale: Fraction, shape: tuple[int, ...]) -> np.ndarray:
        """Integers from the discrete Laplace with scale ``scale`` (exact)."""
        ...

    def gumbel(self, shape: tuple[int, ...]) -> np.ndarray:
        """Standard Gumbel(0, 1) variates, all finite (floating point)."""
        ...

    def uniform(self, shape: tuple[int, ...]) -> np.ndarray:
        """Uniform variates on (0, 1] (floating point)."""
        ...

    def uniform_int(self, size: int) -> int:
        """A uniform integer in ``[0, size)`` for ``size <= 2**62`` (0 when ``size <= 1``); exact (from
        ``uniform_words``) when the source is exact."""
        ...

    def uniform_words(self, n: int) -> np.ndarray:
        """``n`` uniform 64-bit words (uint64): the randomness of the exact exponential mechanism
        (:func:`dpflow.nodes.expmech.exact_choice`); exact sources read their exact word stream."""
        ...
