"""Confinement of tool processes by the operating system (issue 15, seed 004): the policy (what a
tool may do), the mechanisms that enforce it and the report of which one is active."""
