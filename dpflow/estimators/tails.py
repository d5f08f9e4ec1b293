"""Public tail bounds used to choose truncation radii from public quantities."""

from __future__ import annotations

import math


def chi_radius(d: int, beta: float) -> float:
    """Laurent-Massart radius: P(||Z||_2 > chi_radius(d, beta)) <= beta for Z ~ N(0, I_d).

    ``sqrt(d + 2 sqrt(d ln(1/beta)) + 2 ln(1/beta))`` (Laurent & Massart 2000, Lemma 1;
    CoinPress ``gaussian_tailbound``; gaussian.md 0.3).  Use ``beta / n`` for a union
    bound over n rows.

    >>> round(chi_radius(50, 0.01), 4)
    9.4636
    """
    if d < 1 or not 0 < beta < 1:
        raise ValueError(f"chi_radius needs d >= 1 and 0 < beta < 1, got d={d}, beta={beta}")
    t = math.log(1.0 / beta)
    return math.sqrt(d + 2.0 * math.sqrt(d * t) + 2.0 * t)
