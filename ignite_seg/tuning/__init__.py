"""tuning layer of ignite_seg (see docs/architecture.md)."""
