"""Theoretical occupancy for the SASS parser's kernel cards: irscope.analysis.occupancy's, re-exported."""

from irscope.analysis.occupancy import LIMITS, Occupancy, SmLimits, limits_for, occupancy

__all__ = ["LIMITS", "Occupancy", "SmLimits", "limits_for", "occupancy"]
