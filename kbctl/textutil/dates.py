"""ISO 8601 the way kbctl stores it: aware datetimes in UTC with a ``Z``, to the second.

Extractors write dates in metadata with ``iso_datetime``, date filters format their bounds with it,
so both compare as strings; fetch stamps times with ``iso_utc``.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import overload

__all__ = ["iso_datetime", "iso_utc"]


@overload
def iso_datetime(value: datetime | date) -> str: ...
@overload
def iso_datetime(value: None) -> None: ...


def iso_datetime(value: datetime | date | None) -> str | None:
    """ISO 8601; aware datetimes in UTC with a ``Z`` (``2024-05-01T12:00:00Z``), dates as dates."""
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC)
            return value.replace(tzinfo=None).isoformat(timespec="seconds") + "Z"
        return value.isoformat(timespec="seconds")
    return value.isoformat()


def iso_utc(ts: float | None = None) -> str:
    """A POSIX timestamp (now by default) as ISO 8601 in UTC, to the second: ``2024-05-01T12:00:00Z``."""
    return iso_datetime(datetime.now(UTC) if ts is None else datetime.fromtimestamp(ts, UTC))
