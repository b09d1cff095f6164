"""Generated data sets for examples, tests and benchmarks."""
