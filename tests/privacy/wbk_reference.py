"""dp_accounting's RDP curves of the sampled-without-replacement Gaussian (Wang, Balle & Kasiviswanathan 2019), for
the seeded parameter sets of tests/privacy/test_cross_check_dp_accounting.py, stored in ``wbk_reference.npz``.

dp_accounting's series take about 0.24 s a set against privfit's 0.01 s: the cross-check compares privfit's curve
with the stored ones on every set and recomputes every :data:`LIVE_EVERY`-th set with the installed dp_accounting
(they must equal the stored curve), so the file cannot drift from what dp_accounting computes. Regenerate it after a
change of the parameter sets, the order grid or dp_accounting (``python tests/privacy/wbk_reference.py``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from privfit.privacy import DEFAULT_GRID

PATH = Path(__file__).with_name("wbk_reference.npz")
N_SETS = 300
SEED = 7
#: Every LIVE_EVERY-th set is recomputed with dp_accounting by the test.
LIVE_EVERY = 15


def log_uniform(rng: np.random.Generator, low: float, high: float) -> float:
    return float(math.exp(rng.uniform(math.log(low), math.log(high))))


def parameter_sets() -> Iterator[tuple[int, int, float, int, float]]:
    """(n, m, noise multiplier z, steps, δ) of each set, drawn in order from one seeded generator."""
    rng = np.random.default_rng(SEED)
    for _ in range(N_SETS):
        n = int(rng.integers(100, 100_000))
        m = int(rng.integers(1, n // 2))
        z = log_uniform(rng, 0.5, 20)
        steps, delta = int(rng.integers(1, 5000)), log_uniform(rng, 1e-10, 1e-3)
        yield n, m, z, steps, delta


def dp_accounting_curve(n: int, m: int, z: float, steps: int) -> np.ndarray:
    """dp_accounting's RDP curve (replace-one) of ``steps`` compositions, at the default grid's orders."""
    import dp_accounting as dpa
    from dp_accounting.rdp import rdp_privacy_accountant as dpa_rdp

    accountant = dpa_rdp.RdpAccountant(list(DEFAULT_GRID.orders), dpa.NeighboringRelation.REPLACE_ONE)
    accountant.compose(dpa.SelfComposedDpEvent(dpa.SampledWithoutReplacementDpEvent(n, m, dpa.GaussianDpEvent(z)),
                                               steps))  # fmt: skip
    return np.asarray(accountant.rdp, dtype=np.float64)


def load() -> tuple[np.ndarray, np.ndarray, str]:
    """The stored (parameters: N_SETS × 5, curves: N_SETS × orders, dp_accounting version)."""
    with np.load(PATH) as stored:
        if not np.array_equal(stored["orders"], DEFAULT_GRID.orders):
            raise AssertionError("the default order grid changed: regenerate tests/privacy/wbk_reference.npz")
        return stored["parameters"], stored["curves"], str(stored["dp_accounting"])


def main() -> None:
    from importlib.metadata import version

    sets = list(parameter_sets())
    curves = np.stack([dp_accounting_curve(n, m, z, steps) for n, m, z, steps, _ in sets])
    np.savez_compressed(PATH, parameters=np.array(sets, dtype=np.float64), curves=curves,
                        orders=DEFAULT_GRID.orders, dp_accounting=np.array(version("dp-accounting")))  # fmt: skip
    print(f"wrote {PATH} ({len(sets)} sets, dp_accounting {version('dp-accounting')})")


if __name__ == "__main__":
    main()
