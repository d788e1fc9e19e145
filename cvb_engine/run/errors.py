"""The runner's errors."""

from __future__ import annotations


class RunError(Exception):
    """A run that cannot start or go on, with a message for the user."""


class FatalEndpointError(RunError):
    """The endpoint refuses every request (bad key, no permission): stop the run."""


__all__ = ["FatalEndpointError", "RunError"]
