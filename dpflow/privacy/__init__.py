"""dpflow.privacy: pure-math privacy accounting (measures, conversions, composition, calibration).

Exact quantities are :class:`fractions.Fraction`; every floating-point privacy loss is rounded
outward, every noise scale up and every "largest budget that fits" down (``rounding.py``).
The formulas and golden values follow ``docs/spec/accounting.md`` §1.1-1.7 (privacy loss
distributions: :mod:`dpflow.privacy.pld`, numerics by Google's ``dp_accounting``).
"""

from .calibration import (
    analytic_gaussian_sigma,
    approx_zcdp_rho_for_approx_dp,
    bounded_range_eps_for_zcdp,
    classical_gaussian_sigma,
    gaussian_budget_rho,
    gaussian_sigma_for_zcdp,
    gdp_mu_for_approx_dp,
    laplace_scale,
    pure_dp_of_laplace,
    pure_eps_for_approx_dp_advanced,
    pure_eps_for_zcdp,
    shares_by_weight,
    zcdp_of_gaussian,
    zcdp_rho_for_approx_dp,
)
from .composition import PLD_RULE, Conversion, Cost, advanced_composition
from .conversions import (
    BOUNDED_RANGE_REFERENCE,
    approx_dp_to_approx_zcdp,
    approx_zcdp_to_approx_dp,
    bounded_range_to_zcdp,
    bun_steinke_epsilon,
    cks_delta,
    gaussian_dp_delta,
    gaussian_dp_epsilon,
    gdp_mu_of_mu2,
    pure_to_approx_dp,
    pure_to_zcdp,
    zcdp_to_approx_dp,
)
from .measures import ZCDP, ApproxDP, ApproxZCDP, Measure, PureDP, exact, opt_exact
from .pld import ApproxPLD, GaussianPLD, LaplacePLD, LatticeGaussianPLD, PldEvents, PurePLD, pld_epsilon
from .rounding import REL_MARGIN, down, frac_down, frac_up, to_float_down, to_float_up, up

__all__ = [
    "BOUNDED_RANGE_REFERENCE",
    "PLD_RULE",
    "REL_MARGIN",
    "ZCDP",
    "ApproxDP",
    "ApproxPLD",
    "ApproxZCDP",
    "Conversion",
    "Cost",
    "GaussianPLD",
    "LaplacePLD",
    "LatticeGaussianPLD",
    "Measure",
    "PldEvents",
    "PureDP",
    "PurePLD",
    "advanced_composition",
    "analytic_gaussian_sigma",
    "approx_zcdp_rho_for_approx_dp",
    "approx_dp_to_approx_zcdp",
    "approx_zcdp_to_approx_dp",
    "bounded_range_eps_for_zcdp",
    "bounded_range_to_zcdp",
    "bun_steinke_epsilon",
    "cks_delta",
    "classical_gaussian_sigma",
    "down",
    "exact",
    "frac_down",
    "opt_exact",
    "frac_up",
    "gaussian_dp_delta",
    "gaussian_budget_rho",
    "gaussian_dp_epsilon",
    "gaussian_sigma_for_zcdp",
    "gdp_mu_of_mu2",
    "gdp_mu_for_approx_dp",
    "laplace_scale",
    "pld_epsilon",
    "pure_dp_of_laplace",
    "pure_eps_for_approx_dp_advanced",
    "pure_eps_for_zcdp",
    "pure_to_approx_dp",
    "shares_by_weight",
    "pure_to_zcdp",
    "to_float_down",
    "to_float_up",
    "up",
    "zcdp_of_gaussian",
    "zcdp_rho_for_approx_dp",
    "zcdp_to_approx_dp",
]
