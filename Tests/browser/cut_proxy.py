"""A TCP proxy between the browser and the server that a test can cut: what a dropped
connection does to the page, with nothing in the browser or the server faked.

    proxy = CutProxy(server.port)           # listens on 127.0.0.1:proxy.port
    proxy.stall("down")                     # from now on, what the server sends is lost in transit
    proxy.stall("up")                       # … and what the browser sends
    proxy.cut()                             # every connection so far is reset, both ways
    proxy.close()

A stalled direction is still read (so neither side's writes block), but nothing more reaches
the other side: as on a network that has gone, what is in flight when the connection goes is
never delivered. Connections made after a cut are relayed normally. asyncio, in a thread of
its own, so the sync Playwright API can drive the page meanwhile.
"""

from __future__ import annotations

import asyncio
import threading


class _Pair:
    def __init__(self, browser: asyncio.StreamWriter, server: asyncio.StreamWriter):
        self.writers = (browser, server)
        self.stalled = {"up": False, "down": False}
        self.lost = {"up": 0, "down": 0}  # bytes read after the stall and not passed on


class CutProxy:
    def __init__(self, target_port: int, host: str = "127.0.0.1"):
        self.target = (host, target_port)
        self._pairs: list[_Pair] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="cut-proxy", daemon=True)
        self._thread.start()
        self._listener = self._call(asyncio.start_server(self._accept, host, 0))
        self.port = self._listener.sockets[0].getsockname()[1]
        self.http = f"http://{host}:{self.port}"
        self.ws = f"ws://{host}:{self.port}/v1/stream"

    def _call(self, coroutine, timeout: float = 30):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        pair = _Pair(writer, upstream_writer)
        with self._lock:
            self._pairs.append(pair)
        await asyncio.gather(self._pipe(reader, upstream_writer, pair, "up"),
                             self._pipe(upstream_reader, writer, pair, "down"))

    async def _pipe(self, reader, writer, pair: _Pair, direction: str):
        try:
            while data := await reader.read(65536):
                if pair.stalled[direction]:
                    pair.lost[direction] += len(data)
                    continue
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            # One side has gone: so has the other (a half-open relay would hide the drop).
            for w in pair.writers:
                w.close()

    @property
    def connections(self) -> int:
        """Connections accepted so far."""
        with self._lock:
            return len(self._pairs)

    def stall(self, direction: str):
        """From now on nothing more goes `direction` ('up': to the server, 'down': to the
        browser) on the connections open now."""
        with self._lock:
            for pair in self._pairs:
                pair.stalled[direction] = True

    def lost(self, direction: str) -> int:
        """Bytes that went missing `direction` on stalled connections so far."""
        with self._lock:
            return sum(pair.lost[direction] for pair in self._pairs)

    def cut(self):
        """Resets every connection made so far, both ways, at once."""
        with self._lock:
            pairs = list(self._pairs)

        async def reset():
            for pair in pairs:
                pair.stalled["up"] = pair.stalled["down"] = True
                for w in pair.writers:
                    w.transport.abort()

        self._call(reset())

    def close(self):
        self.cut()

        async def stop():
            self._listener.close()
            await self._listener.wait_closed()

        try:
            self._call(stop(), timeout=10)
        except Exception:
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
