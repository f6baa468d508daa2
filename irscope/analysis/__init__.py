"""Figures derived from parsed artifacts and tool reports: resources per kernel, occupancy."""
