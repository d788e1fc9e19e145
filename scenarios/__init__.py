"""The shipped benchmark as package data: the CVB scenarios, the IVR pack (``ivr/``) and the
memory pool (``memory/pool.yaml``).

Installed as ``cvb_engine.scenarios`` (``cvb_engine/scenarios`` links here) and read
through :mod:`cvb_engine.library`; nothing here is code.
"""
