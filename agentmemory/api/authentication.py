"""Token authentication without a database query on every request.

DRF's ``TokenAuthentication`` reads the token and its user on each request. Agents
call the API many times a minute with one token, so this subclass keeps each token's
user in the process for ``cache_seconds``. Deleting a token or saving its user (say,
``is_active=False``) drops the cached entries of this process at once; other processes
drop theirs within ``cache_seconds``, which is therefore the longest a revoked token
keeps working elsewhere.
"""

from __future__ import annotations

import copy
import threading
import time
from collections import OrderedDict
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models.signals import post_delete, post_save
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token


class CachedTokenAuthentication(TokenAuthentication):
    """``TokenAuthentication`` that remembers a valid token's user for ``cache_seconds``
    (10 s; subclass to change it) in a bounded, per-process table of ``cache_size``
    tokens. Refusals are never cached: a bad token costs its query every time."""

    cache_seconds = 10.0
    cache_size = 1024

    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        now = time.monotonic()
        with _lock:
            hit = _remembered.get(key)
            if hit is not None and hit[0] > now:
                _remembered.move_to_end(key)
                # A copy: one request's changes to request.user never reach another's.
                return copy.copy(hit[1]), hit[2]
        user, token = super().authenticate_credentials(key)
        with _lock:
            _remembered[key] = (now + self.cache_seconds, user, token)
            _remembered.move_to_end(key)
            while len(_remembered) > self.cache_size:
                _remembered.popitem(last=False)
        return copy.copy(user), token


#: token key -> (valid until, on the monotonic clock; user; token)
_remembered: OrderedDict[str, tuple[float, Any, Any]] = OrderedDict()
_lock = threading.Lock()


def forget(*, key: str | None = None, user_pk: Any = None) -> None:
    """Drop this process's cached entries for a token key, or for every token of a user."""
    with _lock:
        for cached_key, (_, user, _) in list(_remembered.items()):
            if cached_key == key or (user_pk is not None and user.pk == user_pk):
                del _remembered[cached_key]


def _token_deleted(sender: type, instance: Token, **kwargs: Any) -> None:
    forget(key=instance.key)


def _user_saved(sender: type, instance: Any, **kwargs: Any) -> None:
    forget(user_pk=instance.pk)


post_delete.connect(_token_deleted, sender=Token, dispatch_uid="agentmemory-token-deleted")
post_save.connect(_user_saved, sender=get_user_model(), dispatch_uid="agentmemory-user-saved")
