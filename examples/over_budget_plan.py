"""A plan the planner refuses: two fixed-cost releases that together exceed the budget.

    dpflow check examples/over_budget_plan.py     # exit status 2, names the node
"""

import dpflow as dp
from dpflow import nodes as N

b = dp.PlanBuilder(budget=dp.ZCDP(0.5), name="over_budget_example")
X = b.source("X", dp.Vectors(d=3), n=1000)
m = N.Mean()(N.Clip(radius=1.0)(X))
plan = b.build(first=N.GaussianMech(rho=0.3)(m), second=N.GaussianMech(rho=0.4)(m))
