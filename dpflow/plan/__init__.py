"""The plan DSL: the builder that hands out handles, and the immutable plan graph."""

from dpflow.plan.builder import PlanBuilder
from dpflow.plan.graph import Plan

__all__ = ["Plan", "PlanBuilder"]
