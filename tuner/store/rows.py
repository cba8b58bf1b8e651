"""Reading stored rows as untrusted input: a store is a file or a shared database that something other than this
tuner may have written (by hand, another program, a half-finished migration), so a row with bad JSON or a wrong
type is one :class:`StoreError` sentence, never an unexpected error."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from tuner.errors import StoreError

P = ParamSpec("P")
R = TypeVar("R")


def readable(method: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Wrap a store's reader: the decoding errors of its rows become one StoreError naming the store."""
    @functools.wraps(method)
    async def read(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await method(*args, **kwargs)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError) as exc:
            where = getattr(args[0], "where", "the store") if args else "the store"
            raise StoreError(f"{where} holds a row tuner cannot read ({type(exc).__name__} in {method.__name__}: "
                             "bad JSON or a wrong type)",
                             hint="the store was changed by something other than tuner; move it aside (tuner "
                                  "starts a new one) or run with --no-store") from None
    return read
