"""Grading a class with nbgrader: release the exercises, autograde submissions, read the
gradebook, write feedback. Imports nbgrader, never torch (the notebooks' kernels do that)."""
