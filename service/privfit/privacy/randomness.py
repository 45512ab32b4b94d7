"""The only source of noise for private fits: numpy generators seeded from the operating system's entropy.

DESIGN §1.5: a client can neither choose nor learn the seed of a fit on private data. A seed is accepted only
for public or synthetic data (tests, benchmarks, the client's own data), and the caller must say so.
"""

from __future__ import annotations

import secrets

import numpy as np

from .errors import PrivacyParameterError


def secure_generator() -> np.random.Generator:
    """A fresh PCG64DXSM generator seeded with 256 bits from ``secrets`` (the OS CSPRNG); the seed is not kept."""
    return np.random.Generator(np.random.PCG64DXSM(np.random.SeedSequence(secrets.randbits(256))))


def make_generator(seed: int | None = None, *, data_is_public: bool = False) -> np.random.Generator:
    """A generator for a fit: OS-seeded by default; seeded by ``seed`` only when ``data_is_public`` is true."""
    if seed is None:
        return secure_generator()
    if not data_is_public:
        raise PrivacyParameterError(
            "seed",
            "a seed may only be given for public or synthetic data; fits on private data draw their noise "
            "from an operating-system-seeded generator",
        )
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise PrivacyParameterError("seed", f"must be a non-negative integer, got {seed!r}")
    return np.random.Generator(np.random.PCG64DXSM(np.random.SeedSequence(int(seed))))
