"""Persistent WebSocket connections to a Responses endpoint, for app/providers/openai_responses.py.

A `Socket` has one reader task: answers to a pending `response.steer` go to the steer that
waits for them, every other frame into the socket's queue for the answer now streaming. The
`SocketPool` keeps the last used socket and one spare, already open, so the request after an Esc or a refused steer (which close the
busy socket) pays no handshake. Sockets are retired before the server's 60-minute limit, and
closed without waiting: the close frame goes out at once and the server stops generating.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

MAX_SOCKET_AGE = 55 * 60.0  # the server ends a connection at 60 minutes
KEEP_IDLE = 2  # the last used socket and a spare


@dataclass
class Closed:
    code: int | None
    reason: str


@dataclass
class Malformed:
    raw: str


@dataclass
class Socket:
    ws: ClientConnection
    opened: float = field(default_factory=time.monotonic)
    frames: asyncio.Queue = field(default_factory=asyncio.Queue)
    reader: asyncio.Task | None = None
    reading: asyncio.Lock = field(default_factory=asyncio.Lock)  # one consumer of frames
    steer_wait: asyncio.Future | None = None
    dead: bool = False
    # the response now streaming
    active_id: str | None = None
    active_fields: dict | None = None
    active_input: list[dict] | None = None
    active_text: list[str] = field(default_factory=list)

    def usable(self) -> bool:
        return (not self.dead and self.ws.close_code is None
                and time.monotonic() - self.opened < MAX_SOCKET_AGE)

    async def read(self) -> None:
        """The one reader: steer answers to the waiting steer, the rest queued."""
        put = self.frames.put_nowait
        try:
            async for raw in self.ws:
                if isinstance(raw, bytes):
                    put(Malformed(f"a binary frame of {len(raw)} bytes"))
                    continue
                try:
                    obj = json.loads(raw)
                    kind = obj["type"]
                except (ValueError, KeyError, TypeError):
                    put(Malformed(raw))
                    continue
                wait = self.steer_wait
                if kind.startswith("response.steer."):
                    if wait is not None and not wait.done():
                        wait.set_result(obj)
                    continue
                if kind == "error" and wait is not None and not wait.done() and (
                        obj.get("status") in (None, 400) and not connection_error(obj)):
                    wait.set_result(obj)  # a server that does not know response.steer
                    continue
                put(obj)
        except ConnectionClosed:
            pass
        except Exception as exc:  # noqa: BLE001 - surfaced as a protocol error on the stream
            put(Malformed(f"{type(exc).__name__}: {exc}"))
        self.dead = True
        put(Closed(self.ws.close_code, self.ws.close_reason or ""))
        if self.steer_wait is not None and not self.steer_wait.done():
            self.steer_wait.set_result({"type": "response.steer.failed",
                                        "error": {"message": "the connection closed"}})


def connection_error(obj: dict) -> bool:
    """An `error` event about the connection or the request, never about a steer."""
    code = str((obj.get("error") or {}).get("code") or "")
    return code in ("previous_response_not_found", "websocket_connection_limit_reached",
                    "rate_limit_exceeded")


class SocketPool:
    def __init__(self, dial: Callable[[], Awaitable[ClientConnection]]) -> None:
        self.dial = dial
        self.idle: list[Socket] = []  # the last used last
        self._spare: asyncio.Task | None = None
        self._closing: set[asyncio.Task] = set()

    async def open(self) -> Socket:
        sock = Socket(await self.dial())
        sock.reader = asyncio.get_running_loop().create_task(sock.read())
        return sock

    def keep_spare(self) -> None:
        """Have an open socket waiting for the next request."""
        if self.idle or (self._spare is not None and not self._spare.done()):
            return
        self._spare = task = asyncio.get_running_loop().create_task(self.open())

        def opened(t: asyncio.Task) -> None:
            if t.cancelled() or t.exception() is not None:
                return
            if self._spare is t:
                self._spare = None
            self.idle.insert(0, t.result())  # behind the last used socket

        task.add_done_callback(opened)

    async def take(self) -> Socket:
        while True:
            while self.idle:
                sock = self.idle.pop()  # the last used (the server's connection-local cache)
                if sock.usable():
                    return sock
                self.discard(sock)
            spare = self._spare
            if spare is None or spare.done():
                return await self.open()
            await asyncio.wait([spare])  # a handshake already under way: no second one

    def release(self, sock: Socket) -> None:
        if sock.usable() and sock not in self.idle:
            self.idle.append(sock)
            while len(self.idle) > KEEP_IDLE:
                self.discard(self.idle.pop(0))
        elif not sock.usable():
            self.discard(sock)

    def discard(self, sock: Socket) -> None:
        """Close without waiting: the close frame goes out at once, and the server stops
        generating as soon as it reads it."""
        sock.dead = True
        if sock in self.idle:
            self.idle.remove(sock)
        task = asyncio.get_running_loop().create_task(sock.ws.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def aclose(self) -> None:
        if self._spare is not None:
            self._spare.cancel()
            with contextlib.suppress(BaseException):  # cancelled just now: how it ended is moot
                await self._spare
        for sock in list(self.idle):
            self.discard(sock)
        if self._closing:
            await asyncio.wait(list(self._closing), timeout=2.0)
