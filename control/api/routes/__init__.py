"""Routes of the gateway, one module per group of resources."""
