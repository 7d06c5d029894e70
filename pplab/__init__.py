"""pplab: pipeline parallelism you can see and run."""
