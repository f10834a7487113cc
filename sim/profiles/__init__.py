"""Published latency tables (with attribution, see README.md) turned into core latency rows."""
