"""A loopback proxy in front of RabbitMQ that cuts a connection at the publish of one message.

It reads the AMQP 0-9-1 frames a client sends (type, channel, size, payload, end byte). Armed
with a routing-key prefix, it waits for the first `basic.publish` to a matching queue and,
once the message's content frames have arrived, cuts that client's connection in one of two
places:

- `lose`: before the publish reaches RabbitMQ (the message never existed);
- `lose_confirm`: after RabbitMQ has it, before its reply (the publisher confirm) comes back.

Every other connection, and every later one, passes untouched.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from typing import Literal

from tests.support.tcp_proxy import TcpProxy

Mode = Literal["lose", "lose_confirm"]
PROTOCOL_HEADER = 8  # b"AMQP\x00\x00\x09\x01"
METHOD, HEADER, BODY = 1, 2, 3
BASIC_PUBLISH = (60, 40)


class AmqpCutProxy(TcpProxy):
    def __init__(self, target_port: int, routing_prefix: str, mode: Mode) -> None:
        super().__init__(target_port)
        self.routing_prefix = routing_prefix.encode()
        self.mode = mode
        self.cut_routing_keys: list[str] = []
        self._armed = threading.Event()
        self._armed.set()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._conns += [client, upstream]
            replies = _Gate()
            threading.Thread(
                target=self._client_side, args=(client, upstream, replies), daemon=True
            ).start()
            threading.Thread(
                target=self._server_side, args=(upstream, client, replies), daemon=True
            ).start()

    def _server_side(self, upstream: socket.socket, client: socket.socket, gate: _Gate) -> None:
        try:
            while data := upstream.recv(65536):
                if gate.closed:
                    return  # the confirm and all after it never reach the client
                client.sendall(data)
        except OSError:
            pass
        finally:
            _close(upstream, client)

    def _client_side(self, client: socket.socket, upstream: socket.socket, gate: _Gate) -> None:
        buffer = b""
        header_seen = False
        publish: list[bytes] | None = None  # frames of a matching publish, until its body ends
        body_left = 0
        try:
            while data := client.recv(65536):
                buffer += data
                if not header_seen:
                    if len(buffer) < PROTOCOL_HEADER:
                        continue
                    upstream.sendall(buffer[:PROTOCOL_HEADER])
                    buffer, header_seen = buffer[PROTOCOL_HEADER:], True
                while (frame := _next_frame(buffer)) is not None:
                    raw, kind, payload = frame
                    buffer = buffer[len(raw) :]
                    if publish is None:
                        if self._armed.is_set() and self._matches(kind, payload):
                            publish, body_left = [raw], -1
                        else:
                            upstream.sendall(raw)
                        continue
                    publish.append(raw)
                    if kind == HEADER:
                        body_left = struct.unpack(">Q", payload[4:12])[0]
                    elif kind == BODY:
                        body_left -= len(payload)
                    if body_left == 0:
                        self._cut(publish, upstream, gate)
                        return
        except OSError:
            pass
        finally:
            _close(client, upstream)

    def _matches(self, kind: int, payload: bytes) -> bool:
        if kind != METHOD or struct.unpack(">HH", payload[:4]) != BASIC_PUBLISH:
            return False
        exchange_len = payload[6]
        key_at = 7 + exchange_len
        routing_key = payload[key_at + 1 : key_at + 1 + payload[key_at]]
        if not routing_key.startswith(self.routing_prefix):
            return False
        self._armed.clear()  # once only
        self.cut_routing_keys.append(routing_key.decode())
        return True

    def _cut(self, publish: list[bytes], upstream: socket.socket, gate: _Gate) -> None:
        gate.closed = True
        if self.mode == "lose_confirm":
            upstream.sendall(b"".join(publish))
            # Let RabbitMQ read it before the connection goes (its reply is dropped above).
            time.sleep(0.5)
        # Both sockets close in `finally`: RabbitMQ and the client each see the connection die.


class _Gate:
    closed = False


def _next_frame(buffer: bytes) -> tuple[bytes, int, bytes] | None:
    if len(buffer) < 7:
        return None
    kind, _channel, size = struct.unpack(">BHI", buffer[:7])
    if len(buffer) < 7 + size + 1:
        return None
    return buffer[: 7 + size + 1], kind, buffer[7 : 7 + size]


def _close(*sockets: socket.socket) -> None:
    for s in sockets:
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            s.close()
