"""Node families of the plan DSL: sources and transforms, queries, mechanisms,
post-processing and control.

>>> import dpflow as dp
>>> from dpflow import nodes as N
>>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
>>> X = b.source("X", dp.Vectors(d=3), n=1000)
>>> mean = N.GaussianMech()(N.Mean()(N.Clip(radius=2.0)(X)))
"""

from dpflow.nodes.base import NODE_KINDS, Mechanism, Node, NodeRecord, PostProcess, Query, SubPlan, Transform
from dpflow.nodes.blocks import SubsampleAggregate
from dpflow.nodes.control import Input, PartitionTree, Repeat, Round, State, TreeStep, partition_tree, repeat
from dpflow.nodes.dyadic import DyadicCounts, DyadicExpMech
from dpflow.nodes.mechanisms import GaussianMech, LaplaceMech, Peel
from dpflow.nodes.ordinal import AddKnots, IntervalCounts, OrdinalCounts
from dpflow.nodes.pca import Gram, Project, TopEigenvectors, private_pca
from dpflow.nodes.postprocess import (
    Apply,
    Eigh,
    Get,
    NoiseScale,
    Pack,
    PredictedError,
    PSDProject,
    Public,
    noise_scale,
    param,
    predicted_error,
)
from dpflow.nodes.product import TruncatedBinaryMean
from dpflow.nodes.quantile import Magnitudes, ModeBinUpper, OrderStatistics, Quantile, ScaleShift
from dpflow.nodes.queries import Count, Histogram, Mean, SecondMoment, Sum
from dpflow.nodes.regression import GradientStep, ProjectCoef, RidgeSolve
from dpflow.nodes.sparse_vector import NOT_FOUND, AboveThreshold, found_index
from dpflow.nodes.stability import BinCounts, GaussianStabilityHistogram, StabilityHistogram
from dpflow.nodes.terrific import (
    BallCounts,
    BallMean,
    CellBall,
    CellCounts,
    GateBall,
    GridMaxCounts,
    GridValue,
    PartitionByProjectedBall,
    ShellCounts,
    ShellRadii,
    TerrificDecision,
    TerrificScores,
    ball_mean,
    radius_grid,
    terrific_ball,
)
from dpflow.nodes.transforms import (
    Clip,
    Columns,
    PairDifferences,
    PartitionByBall,
    Piece,
    Precondition,
    Source,
    SplitByIndex,
    project_ball,
    split,
)
from dpflow.nodes.truncation import TruncatedMean
from dpflow.nodes.tuples import PartitionByNearest, TupleCellCounts, TupleCenters, TupleNearest, TupleProject
from dpflow.nodes.types import Allocation, PiecesT, ReleasedT, RowsT, StatT

__all__ = [
    "NODE_KINDS", "GradientStep", "Magnitudes", "ModeBinUpper", "OrderStatistics", "ProjectCoef", "Quantile",
    "RidgeSolve", "ScaleShift", "TruncatedMean",
    "Allocation", "Apply", "Clip", "Columns", "Count", "Eigh", "GaussianMech", "Get", "Histogram",
    "Input", "LaplaceMech", "Mean", "Mechanism", "Node", "NodeRecord", "NoiseScale", "PSDProject", "Pack",
    "PairDifferences", "PartitionByBall", "Peel", "Piece", "PiecesT", "PostProcess", "Precondition",
    "PartitionTree", "PredictedError", "Public", "Query", "Repeat", "ReleasedT", "Round", "RowsT", "SecondMoment",
    "Source",
    "SplitByIndex", "State", "StatT", "SubPlan", "Sum", "Transform", "noise_scale", "param", "predicted_error",
    "TreeStep", "partition_tree", "project_ball", "repeat", "split",
    "AddKnots", "BinCounts", "DyadicCounts", "DyadicExpMech", "IntervalCounts", "OrdinalCounts", "StabilityHistogram",
    "SubsampleAggregate", "TruncatedBinaryMean", "AboveThreshold", "NOT_FOUND", "found_index",
    "Gram", "Project", "TopEigenvectors", "private_pca",
    "BallCounts", "BallMean", "CellBall", "CellCounts", "GateBall", "GridMaxCounts", "GridValue",
    "PartitionByProjectedBall", "ShellCounts", "ShellRadii", "TerrificDecision",
    "TerrificScores", "ball_mean", "radius_grid", "terrific_ball",
    "GaussianStabilityHistogram", "PartitionByNearest", "TupleCellCounts", "TupleCenters", "TupleNearest",
    "TupleProject",
]
