"""MongoDB access: the planning pipeline, job claims and outcomes, runs, reference data."""
