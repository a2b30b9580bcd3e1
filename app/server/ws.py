"""A WebSocket server connection on the asyncio streams of app/server/http.py.

`steer serve` answers the WebSocket upgrade on /v1/responses and the SSE routes on the same
port. websockets' Sans-I/O protocol does the framing (masking, control frames, close
handshake); this module only moves bytes, so the server keeps full control of what goes on
the wire and when (batched writes per paced tick, and faults for the tests: a dropped TCP
connection, a malformed frame, a close code)."""

from __future__ import annotations

import contextlib
import logging
from asyncio import StreamReader, StreamWriter
from collections import deque
from typing import Protocol

from websockets.frames import Frame, Opcode
from websockets.http11 import Request
from websockets.protocol import State
from websockets.server import ServerProtocol

MAX_MESSAGE = 16 * 1024 * 1024
_log = logging.getLogger("steer.serve.ws")
_log.setLevel(logging.WARNING)  # websockets logs handshake headers at DEBUG: never the token



class _Sink(Protocol):
    """Where a connection notes its frames (a list, or the stats' bounded Recent)."""

    def append(self, item: tuple[str, str], /) -> None: ...

class WsClosed(Exception):
    """The peer closed the connection (or it dropped)."""


class WsConnection:
    def __init__(self, reader: StreamReader, writer: StreamWriter, proto: ServerProtocol) -> None:
        self.reader = reader
        self.writer = writer
        self.proto = proto
        self._messages: deque[str] = deque()
        self._parts: list[bytes] = []
        self.closed = False
        self.record: _Sink | None = None  # tests: ("in"|"out", text) of each frame

    @classmethod
    async def accept(cls, head: bytes, reader: StreamReader, writer: StreamWriter) -> WsConnection:
        """Complete the handshake of an upgrade request whose head was already read."""
        proto = ServerProtocol(max_size=MAX_MESSAGE, logger=_log)
        proto.receive_data(head)
        request = next(ev for ev in proto.events_received())
        if not isinstance(request, Request):
            raise WsClosed("handshake failed")
        proto.send_response(proto.accept(request))
        conn = cls(reader, writer, proto)
        if proto.state is not State.OPEN:
            raise WsClosed("handshake failed")
        await conn._flush()
        return conn

    async def _flush(self) -> None:
        data = self.proto.data_to_send()
        if data:
            self.writer.write(b"".join(data))
            await self.writer.drain()

    async def send(self, *texts: str) -> None:
        """Send each text as one frame, all in one write."""
        if self.closed or self.proto.state is not State.OPEN:
            raise WsClosed("connection closed")
        for text in texts:
            self.proto.send_text(text.encode())
            if self.record is not None:
                self.record.append(("out", text))
        try:
            await self._flush()
        except (ConnectionError, RuntimeError) as exc:
            self.closed = True
            raise WsClosed(str(exc)) from None

    async def recv(self) -> str:
        """The next text message; raises WsClosed when the peer is gone."""
        while not self._messages:
            if self.closed:
                raise WsClosed("connection closed")
            try:
                data = await self.reader.read(65536)
            except ConnectionError:
                data = b""
            if not data:
                self.proto.receive_eof()
                self.closed = True
                raise WsClosed("connection dropped")
            self.proto.receive_data(data)
            for frame in self.proto.events_received():
                if not isinstance(frame, Frame):  # a server receives frames only, once open
                    continue
                if frame.opcode in (Opcode.TEXT, Opcode.BINARY):
                    self._parts = [bytes(frame.data)]
                elif frame.opcode is Opcode.CONT:
                    self._parts.append(bytes(frame.data))
                elif frame.opcode is Opcode.CLOSE:
                    self.closed = True
                else:
                    continue
                if frame.opcode is not Opcode.CLOSE and frame.fin:
                    self._messages.append(b"".join(self._parts).decode("utf-8", "replace"))
                    self._parts = []
                    if self.record is not None:
                        self.record.append(("in", self._messages[-1]))
            with contextlib.suppress(ConnectionError, RuntimeError):
                await self._flush()  # pongs, the close handshake
            if self.proto.state is State.CLOSED:
                self.closed = True
        return self._messages.popleft()

    async def close(self, code: int = 1000, reason: str = "") -> None:
        if not self.closed and self.proto.state is State.OPEN:
            self.proto.send_close(code, reason)
            with contextlib.suppress(ConnectionError, RuntimeError):
                await self._flush()
        self.closed = True
        self.writer.close()

    def write_raw(self, data: bytes) -> None:
        """Fault injection: bytes that bypass the framing."""
        self.writer.write(data)

    def abort(self) -> None:
        """Drop the TCP connection without a close frame."""
        self.closed = True
        self.writer.transport.abort()
