"""mypy must accept this file."""

import dpflow as dp
from dpflow import nodes as N

b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
X = b.source("X", dp.Vectors(d=2), n=10)
m = N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))
plan = b.build(mean=N.PSDProject()(m))
