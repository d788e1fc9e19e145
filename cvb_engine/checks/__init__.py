"""Check kinds. Each module registers one kind with :func:`register_check`."""

from cvb_engine.checks.base import (
    CheckKind,
    CheckResult,
    Prepared,
    Sibling,
    Span,
    Subject,
    get_kind,
    register_check,
    registry,
)

__all__ = [
    "CheckKind",
    "CheckResult",
    "Prepared",
    "Sibling",
    "Span",
    "Subject",
    "get_kind",
    "register_check",
    "registry",
]
