"""A hand-written plan: the private mean of 5-dimensional rows, clipped to an l2 ball.

    dpflow check examples/clipped_mean_plan.py
    dpflow run examples/clipped_mean_plan.py --data X=rows.npy --report out/
"""

import dpflow as dp
from dpflow import nodes as N

b = dp.PlanBuilder(budget=dp.ApproxDP(1.0, 1e-6), neighbors="replace", name="clipped_mean_example")
X = b.source("X", dp.Vectors(d=5))  # n is read from the data (public under replace-one)
clipped = N.Clip(radius=10.0)(X)
mean = N.GaussianMech(weight=3)(N.Mean()(clipped))
second = N.PSDProject()(N.GaussianMech(weight=1)(N.SecondMoment()(clipped)))
plan = b.build(mean=mean, second_moment=second)
