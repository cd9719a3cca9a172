"""Token authentication without a database query on every request.

DRF's ``TokenAuthentication`` reads the token and its user on each request. Agents
call the API many times a minute with one token, so this subclass keeps each token's
user in the process for ``AGENTMEMORY["TOKEN_CACHE_SECONDS"]`` (10 s; 0 turns the cache
off). Deleting a token or saving its user (say, ``is_active=False``) drops the cached
entries of this process at once; other processes drop theirs within that window, which
is therefore the longest a revoked token keeps working elsewhere.
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

from agentmemory.conf import memory_settings


class CachedTokenAuthentication(TokenAuthentication):
    """``TokenAuthentication`` that remembers a valid token's user for the cache window
    (``AGENTMEMORY["TOKEN_CACHE_SECONDS"]``, or ``cache_seconds`` when a subclass sets
    it) in a bounded, per-process table of ``cache_size`` tokens. A window of 0 reads
    the token on every request, as DRF does. Refusals are never cached: a bad token
    costs its query every time."""

    cache_seconds: float | None = None
    cache_size = 1024

    def window(self) -> float:
        if self.cache_seconds is not None:
            return float(self.cache_seconds)
        return float(memory_settings.TOKEN_CACHE_SECONDS)

    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        window = self.window()
        if window <= 0:
            return super().authenticate_credentials(key)
        now = time.monotonic()
        with _lock:
            hit = _remembered.get(key)
            if hit is not None and hit[0] > now:
                _remembered.move_to_end(key)
                # A copy: one request's changes to request.user never reach another's.
                return copy.copy(hit[1]), hit[2]
        user, token = super().authenticate_credentials(key)
        with _lock:
            _remembered[key] = (now + window, user, token)
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
