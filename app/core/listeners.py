"""Who is told of an owner's events: a list of subscribers instead of a callback slot.

A slot (`owner.on_x = fn`) has one listener, replaced silently by the next one to assign it,
and who listens can only be found with grep. An owner instead keeps a `Listeners` and
publishes typed events to it; anyone may `subscribe`, and nothing outside the owner assigns
to it.

Delivery is synchronous and ordered: `publish` calls every subscriber in the order they
subscribed, on the caller's thread, before it returns. A subscriber's exception propagates to
the publisher (as a slot's did): subscribers that must not fail catch their own errors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

E = TypeVar("E")


class Listeners(Generic[E]):
    __slots__ = ("_subscribers",)

    def __init__(self) -> None:
        self._subscribers: list[Callable[[E], object]] = []

    def subscribe(self, fn: Callable[[E], object]) -> Callable[[], None]:
        """Tell `fn` of every event from now on; returns what takes it off again."""
        self._subscribers.append(fn)

        def unsubscribe() -> None:
            if fn in self._subscribers:
                self._subscribers.remove(fn)
        return unsubscribe

    def publish(self, event: E) -> None:
        for fn in tuple(self._subscribers):  # one subscribing or leaving meanwhile is safe
            fn(event)

    def __len__(self) -> int:
        return len(self._subscribers)
