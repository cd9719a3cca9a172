"""The API's error statuses beyond DRF's own, and the one place that parses query values.

400: the request's shape is wrong, as the schema says (a field, a type, a bound).
409: the shape is right but it conflicts with what is stored, with the project's
settings or with another field of the request (a call id the thread already holds, a
turn before its current turn, a client_key taken, low_water not below high_water).
Both answer field errors: ``{"<field>": ["<reason>"]}``, nested for items.
"""

from __future__ import annotations

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
    if not (value.isascii() and value.isdigit()) or not minimum <= int(value) <= maximum:
        raise ValidationError({name: [f"Must be a whole number from {minimum} to {maximum}."]})
    return int(value)
