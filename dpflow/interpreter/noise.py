"""Noise sources.

``SecureNoise`` (the default of every run) draws exact discrete Gaussian and discrete
Laplace integers from the OS CSPRNG (Canonne-Kamath-Steinke samplers, vectorised in
:mod:`dpflow.interpreter.vector_samplers`); the Gaussian and Laplace mechanisms and Peel then
release on a 2^-k lattice and the stability histogram on its integer counts, and the exponential
mechanisms sample exactly from uniform words (:func:`dpflow.nodes.expmech.exact_choice`), so no
floating-point operation touches the noise (Mironov 2012).  Its continuous draws (``normal``,
``laplace``: only for a statistic without a floating-point error bound, as the ledger says) come
from a generator freshly seeded with 256 bits of OS entropy per draw.

``SeededNoise`` is for tests and examples and stamps every report NOT FOR RELEASE;
``exact=True`` makes it use the same exact samplers from a seeded integer source.

A scale of exactly 0 draws nothing (zeros, and a seeded source's stream is not advanced); a negative
scale raises ``ValueError`` and a NaN scale gives NaN: never a silent release without noise.

Both implement the one noise protocol, :class:`dpflow.noise_protocol.NoiseSource` (re-exported
here); the Gumbel and uniform draws of the exponential mechanisms come from
:class:`LaplaceDerivedDraws`, built on each source's continuous ``laplace``.
"""

from __future__ import annotations

import abc
import secrets
from fractions import Fraction
from typing import Protocol

import numpy as np

from dpflow.interpreter.samplers import gumbel_of_laplace, uniform_int_of, uniform_of_laplace
from dpflow.interpreter.vector_samplers import (
    WordSource,
    discrete_gaussian_array,
    discrete_laplace_array,
    uniform_below,
)
from dpflow.noise_protocol import NoiseSource

__all__ = ["LaplaceDerivedDraws", "NoiseSource", "SecureNoise", "SeededNoise"]


class _Laplace(Protocol):
    def laplace(self, scale: float, shape: tuple[int, ...]) -> np.ndarray: ...


class _Uniform(Protocol):
    def uniform(self, shape: tuple[int, ...]) -> np.ndarray: ...


class LaplaceDerivedDraws:
    """The derived draws of :class:`~dpflow.noise_protocol.NoiseSource` (``gumbel``, ``uniform``,
    ``uniform_int``), built once on the source's own ``laplace(1.0, shape)`` (one Laplace draw per
    variate; maps in :mod:`dpflow.interpreter.samplers`).  Every source, including test sources,
    inherits them, so all exponential mechanisms draw the same way.

    >>> class Zeros(LaplaceDerivedDraws):
    ...     def laplace(self, scale: float, shape: tuple[int, ...]) -> np.ndarray:
    ...         return np.zeros(shape)
    >>> Zeros().uniform((2,)).tolist(), bool(np.isfinite(Zeros().gumbel((2,))).all())
    ([1.0, 1.0], True)
    """

    def gumbel(self: _Laplace, shape: tuple[int, ...]) -> np.ndarray:
        """Standard Gumbel variates (:func:`~dpflow.interpreter.samplers.gumbel_of_laplace`)."""
        return gumbel_of_laplace(self.laplace(1.0, shape))

    def uniform(self: _Laplace, shape: tuple[int, ...]) -> np.ndarray:
        """Uniform variates on (0, 1] (:func:`~dpflow.interpreter.samplers.uniform_of_laplace`)."""
        return uniform_of_laplace(self.laplace(1.0, shape))

    def uniform_int(self: _Uniform, size: int) -> int:
        """A uniform integer in ``[0, size)`` (:func:`~dpflow.interpreter.samplers.uniform_int_of`)."""
        return uniform_int_of(self.uniform, size)

    def uniform_words(self: _Uniform, n: int) -> np.ndarray:
        """64-bit words read from ``uniform`` variates (53 significant bits each: not exact; exact sources draw
        theirs from the word stream)."""
        u = np.asarray(self.uniform((n,)), dtype=float)
        out: np.ndarray = np.minimum(np.ldexp(u, 64), 2.0**64 - 2048.0).astype(np.uint64)
        return out


def _size(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape, dtype=np.int64))


class _ExactDraws(LaplaceDerivedDraws, abc.ABC):
    """Exact discrete draws from a word source, whole arrays at once (:mod:`dpflow.interpreter.vector_samplers`),
    the continuous draws from the generator ``_gen`` each source names, and the draws derived from ``laplace``."""

    words: WordSource

    @abc.abstractmethod
    def _gen(self) -> np.random.Generator:
        """The generator of a continuous draw (each source's own)."""

    def normal(self, sigma: float, shape: tuple[int, ...]) -> np.ndarray:
        """Gaussian noise of standard deviation ``sigma``; none for 0, numpy's ``ValueError`` for a negative
        ``sigma``, NaN for NaN (module docstring: never a silent release without noise)."""
        return np.zeros(shape) if sigma == 0 else self._gen().normal(0.0, sigma, shape)

    def laplace(self, scale: float, shape: tuple[int, ...]) -> np.ndarray:
        """Laplace noise of scale ``scale``, with :meth:`normal`'s policy for 0, negative and NaN scales."""
        return np.zeros(shape) if scale == 0 else self._gen().laplace(0.0, scale, shape)

    @property
    def exact(self) -> bool:
        return True

    def discrete_gaussian(self, sigma2: Fraction, shape: tuple[int, ...]) -> np.ndarray:
        return discrete_gaussian_array(sigma2, _size(shape), self.words).reshape(shape)

    def discrete_laplace(self, scale: Fraction, shape: tuple[int, ...]) -> np.ndarray:
        return discrete_laplace_array(scale, _size(shape), self.words).reshape(shape)

    def uniform_words(self, n: int) -> np.ndarray:
        return self.words.draw(n)

    def uniform_int(self, size: int) -> int:
        """Exact (rejection from a word, :func:`~dpflow.interpreter.vector_samplers.uniform_below`) when the
        source is exact; else the derived draw."""
        if not self.exact:
            return super().uniform_int(size)
        return 0 if size <= 1 else int(uniform_below(np.array([size], dtype=np.int64), self.words)[0])


class SecureNoise(_ExactDraws):
    """Release noise: exact discrete samplers on OS-CSPRNG integers (lattice releases);
    continuous draws from a generator seeded afresh with 256 OS-entropy bits per draw.

    >>> SecureNoise().normal(1.0, (3,)).shape
    (3,)
    """

    description = (
        "secure: OS CSPRNG; exact discrete Gaussian/Laplace (Canonne-Kamath-Steinke, vectorised, work independent "
        "of the value drawn) on a 2^-k lattice for GaussianMech, LaplaceMech and Peel, on the integer counts for "
        "StabilityHistogram; exact exponential mechanism (inversion of uniform words against rigorously bounded "
        "weights) for Quantile (a point of a 2^-k lattice of the range) and DyadicExpMech; continuous noise only "
        "where the ledger says so (a statistic without a floating-point error bound)"
    )
    seeded = False

    def __init__(self) -> None:
        self.words = WordSource()

    def _gen(self) -> np.random.Generator:
        return np.random.Generator(np.random.PCG64DXSM(secrets.randbits(256)))


class SeededNoise(_ExactDraws):
    """Reproducible noise for tests and examples: NOT FOR RELEASE.

    With ``exact=True`` it runs the exact discrete samplers (and lattice releases) from a
    seeded integer source, to test that path deterministically.

    >>> a = SeededNoise(1).normal(1.0, (2,)); b = SeededNoise(1).normal(1.0, (2,))
    >>> bool((a == b).all())
    True
    """

    seeded = True

    def __init__(self, seed: int, exact: bool = False) -> None:
        self.seed = seed
        self._exact = exact
        kind = "exact discrete samplers" if exact else "continuous floating-point samplers"
        self.description = f"seeded (seed={seed}, {kind}): NOT FOR RELEASE"
        self._rng = np.random.default_rng(seed)
        self.words = WordSource(seed=seed)

    @property
    def exact(self) -> bool:
        return self._exact

    def _gen(self) -> np.random.Generator:
        return self._rng
