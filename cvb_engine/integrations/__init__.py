"""Bridges to other evaluation harnesses; each needs its own optional extra and is never
imported by the engine's default path (``cvb_engine.integrations.inspect``: ``[inspect]``)."""
