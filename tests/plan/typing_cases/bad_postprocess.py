"""mypy must reject this file: a sensitive value handed to post-processing and to build()."""

import dpflow as dp
from dpflow import nodes as N

b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
X = b.source("X", dp.Vectors(d=2), n=10)
m = N.Mean()(N.Clip(radius=1.0)(X))
p = N.PSDProject()(m)  # error: Sensitive[Stat] is not Released
g = N.GaussianMech()(X)  # error: Sensitive[Rows] is not Sensitive[Stat]
