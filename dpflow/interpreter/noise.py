"""Noise sources.  The release default draws from OS entropy; the seeded source is
for tests and examples and marks every report it touches as not for release.

Both sample continuous Gaussian and Laplace variates in floating point.  Floating-
point samplers have known attacks (Mironov 2012); the exact discrete samplers of
the privacy-assurance work replace them behind this same interface.
"""

from __future__ import annotations

import secrets
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class NoiseSource(Protocol):
    """Where mechanisms get their randomness."""

    description: str
    seeded: bool

    def normal(self, sigma: float, shape: tuple[int, ...]) -> np.ndarray:
        """Gaussian noise with standard deviation ``sigma``."""
        ...

    def laplace(self, scale: float, shape: tuple[int, ...]) -> np.ndarray:
        """Laplace noise with scale ``scale``."""
        ...


class SecureNoise:
    """Noise from OS entropy: every draw uses a generator freshly seeded with 256 bits
    from ``secrets`` (the OS CSPRNG), so no generator state outlives a draw.

    >>> SecureNoise().normal(1.0, (3,)).shape
    (3,)
    """

    description = "secure: OS entropy (fresh 256-bit seed per draw); continuous floating-point samplers"
    seeded = False

    def _gen(self) -> np.random.Generator:
        return np.random.Generator(np.random.PCG64DXSM(secrets.randbits(256)))

    def normal(self, sigma: float, shape: tuple[int, ...]) -> np.ndarray:
        return self._gen().normal(0.0, sigma, shape) if sigma > 0 else np.zeros(shape)

    def laplace(self, scale: float, shape: tuple[int, ...]) -> np.ndarray:
        return self._gen().laplace(0.0, scale, shape) if scale > 0 else np.zeros(shape)


class SeededNoise:
    """Reproducible noise for tests and examples: NOT FOR RELEASE.

    >>> a = SeededNoise(1).normal(1.0, (2,)); b = SeededNoise(1).normal(1.0, (2,))
    >>> bool((a == b).all())
    True
    """

    seeded = True

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.description = f"seeded (seed={seed}): NOT FOR RELEASE"
        self._rng = np.random.default_rng(seed)

    def normal(self, sigma: float, shape: tuple[int, ...]) -> np.ndarray:
        return self._rng.normal(0.0, sigma, shape) if sigma > 0 else np.zeros(shape)

    def laplace(self, scale: float, shape: tuple[int, ...]) -> np.ndarray:
        return self._rng.laplace(0.0, scale, shape) if scale > 0 else np.zeros(shape)
