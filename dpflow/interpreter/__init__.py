"""Execution: the interpreter loop, the numpy backend and noise sources."""

from dpflow.interpreter.noise import NoiseSource, SecureNoise, SeededNoise
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import Execution, execute

__all__ = ["Execution", "NoiseSource", "NumpyBackend", "SecureNoise", "SeededNoise", "execute"]
