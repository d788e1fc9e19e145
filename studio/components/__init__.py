"""Presentation helpers for the studio pages (no metrics, no storage)."""
