"""The API's error statuses beyond DRF's own, and the one place that parses query values.

400: the request's shape is wrong, as the schema says (a field, a type, a bound).
409: the shape is right but it conflicts with what is stored, with the project's
settings or with another field of the request (a call id the thread already holds, a
turn before its current turn, a client_key taken, low_water not below high_water).
Both answer field errors: ``{"<field>": ["<reason>"]}``, nested for items.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone, tzinfo

from django.conf import settings
from django.utils import timezone as django_timezone
from rest_framework import status
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.request import Request


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with the stored state."
    default_code = "conflict"


class RequestTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."
    default_code = "request_too_large"

    @classmethod
    def over_the_cap(cls) -> RequestTooLarge:
        """The one text of a body over Django's cap, whichever check found it (the
        parser's, from ``Content-Length``, or Django's own when the body is read)."""
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return cls(f"The body is over {limit} bytes (settings.DATA_UPLOAD_MAX_MEMORY_SIZE).")


def query_value(request: Request, name: str) -> str | None:
    """One value of a query parameter, or None; given twice is a 400, not a guess."""
    values = request.query_params.getlist(name)
    if len(values) > 1:
        raise ValidationError({name: ["Give this parameter once."]})
    return values[0] if values else None


def query_flag(request: Request, name: str) -> bool:
    """A boolean query parameter: true/1 or false/0; anything else is a 400."""
    value = query_value(request, name)
    if value is None or value in ("false", "0"):
        return False
    if value in ("true", "1"):
        return True
    raise ValidationError({name: ["Must be true or false."]})


def query_int(request: Request, name: str, *, minimum: int, maximum: int) -> int | None:
    """A whole number query parameter in [minimum, maximum]; anything else is a 400."""
    value = query_value(request, name)
    if value is None:
        return None
    # Counted before int(): Python refuses to convert more than 4,300 digits (a 500).
    digits = value.lstrip("0") or "0"
    if (
        not (value.isascii() and value.isdigit())
        or len(digits) > len(str(maximum))
        or not minimum <= int(digits) <= maximum
    ):
        raise ValidationError({name: [f"Must be a whole number from {minimum} to {maximum}."]})
    return int(digits)


def query_choices(request: Request, name: str, choices: Sequence[str]) -> list[str] | None:
    """A repeatable query parameter whose values are ``choices``, each given alone or
    several joined by commas (``?role=user&role=tool``, ``?role=user,tool``); in the
    order given, once each. Anything else is a 400."""
    values = request.query_params.getlist(name)
    if not values:
        return None
    chosen = [part for value in values for part in value.split(",")]
    wrong = next((part for part in chosen if part not in choices), None)
    if wrong is not None:
        raise ValidationError({name: [
            f"Must be one or more of {', '.join(choices)}: repeat the parameter or join "
            f"them with commas; got {wrong[:40]!r}."
        ]})
    return list(dict.fromkeys(chosen))


# RFC 3339's date-time (the schema's format "date-time"), ASCII digits only.
_DATE_TIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?"
    r"(?:[Zz]|([+-])(\d{2}):(\d{2}))",
    re.ASCII,
)
_EARLIEST = datetime.min.replace(tzinfo=UTC)
_LATEST = datetime.max.replace(tzinfo=UTC)


def query_datetime(request: Request, name: str) -> datetime | None:
    """An RFC 3339 date-time query parameter (``2026-11-30T12:00:00Z``; the offset is
    required: a time without one names no instant), as the ORM compares one: aware in
    UTC, or naive in the default time zone when ``USE_TZ`` is off. Anything else is a
    400."""
    value = query_value(request, name)
    if value is None:
        return None
    zone = UTC if settings.USE_TZ else django_timezone.get_default_timezone()
    instant = _instant(value, zone)
    if instant is None:
        raise ValidationError({name: [
            "Must be an RFC 3339 date-time with its offset, such as 2026-11-30T12:00:00Z "
            f"or 2026-11-30T13:00:00+01:00; got {value[:40]!r}."
        ]})
    return instant if settings.USE_TZ else instant.replace(tzinfo=None)


def _instant(value: str, zone: tzinfo) -> datetime | None:
    """``value`` in ``zone``, or None when it is no RFC 3339 date-time. An instant
    outside the years 1-9999 there is the first or the last one Python holds: nothing
    stored is earlier or later."""
    match = _DATE_TIME.fullmatch(value)
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(part) for part in match.groups()[:6])
    fraction, sign, off_hour, off_minute = match.groups()[6:]
    offset = timedelta(hours=int(off_hour or 0), minutes=int(off_minute or 0))
    if sign and (int(off_hour) > 23 or int(off_minute) > 59):
        return None
    try:
        local = datetime(year, month, day, hour, minute, second,
                         int((fraction or "")[:6].ljust(6, "0")))
    except ValueError:  # no such day or time
        return None
    try:
        return local.replace(tzinfo=timezone(-offset if sign == "-" else offset)).astimezone(zone)
    except OverflowError:
        return (_EARLIEST if local.year == 1 else _LATEST).replace(tzinfo=zone)
