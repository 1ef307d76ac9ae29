"""Where the twins meet: calibration, the twin registry, comparisons, plots, reports, the CLI.

``lab`` runs the simulated twin (:mod:`simulator`) and the real twin (:mod:`backends`) on the
same workload and puts prediction beside measurement.
"""
