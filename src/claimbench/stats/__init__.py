"""Statistics: resampled confidence intervals, stopping rules, the verdict and the precision rule. Numpy
only, so the report layer can recompute a record's numbers without torch."""
