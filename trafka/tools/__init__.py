"""Command lines: `knode` (run a node) and `ktool` (administer a cluster, inspect logs)."""
