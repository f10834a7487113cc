"""Routing: choosing the replica for a ready step, prefix-cache index, priced work stealing."""
