"""toolwire's stdio transport for MCP servers (POSIX): the server as a process of its own group, spoken to in
newline-delimited JSON-RPC over its stdin and stdout, within bounds a hostile server cannot break.

- **One message is at most ``limit`` bytes.** Output is read in pieces into one buffer; a line longer than the
  limit (or one that never ends) is not read further: it is logged (``mcp.message_too_large``) and the connection
  counts as closed, so a call waiting for its answer is answered as after a crash (``OutcomeUnknown``), and the
  next call starts a new process. Memory stays bounded whatever the server writes.
- **Lines that are not JSON-RPC are left out** (not JSON, not UTF-8, not a message): logged
  (``mcp.unreadable_message``, at the 1st, 10th, 100th … of a connection), never fatal. When such a line is
  recognisably the answer to a request (it starts ``{"jsonrpc": "2.0", "id": …, "result"`` or ``"error"``), that
  request is answered with a ``PARSE_ERROR`` at once instead of waiting for its timeout.
- **The server's end is noticed**: its output closing, or its process exiting (even while a process it left
  behind keeps its output open) ends the connection, with the exit code in ``wire.reason``.
- **Stopping never hangs and leaves nothing behind**: stdin is closed, then the process group gets SIGTERM and
  SIGKILL (2 s apart), then any process still holding the server's output (one that left the group with
  ``setsid``) is found in ``/proc`` and killed (``mcp.process_left_behind``).

The MCP SDK's own ``stdio_client`` reads a line whatever its length; this transport replaces it on POSIX.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio

from .. import _log
from ._loop import describe
from ._wire import Wire

__all__ = ["stdio_transport", "READ_CHUNK"]

#: bytes asked of the pipe at a time
READ_CHUNK = 1 << 16
#: after the output closed (or the process exited): how long the other may still follow before the connection
#: is reported closed
_EXIT_GRACE = 0.5
#: how long the writer may flush accepted messages when the connection stops
_FLUSH = 0.5
#: stdin closed → SIGTERM → SIGKILL → gone: seconds between each step
_CLOSE_GRACE = 2.0
_TERM_GRACE = 2.0
_KILL_GRACE = 2.0
_POLL = 0.02
#: how often a running server's process is checked for having exited
_WATCH = 0.1
#: the head of an answer: ``{"jsonrpc": "2.0", "id": ID, "result"`` (or ``"error"``), in either order of the first two
_ANSWER = re.compile(rb'\A\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,256}")'
                     rb'\s*,\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"(?:result|error)"\s*:')


def _answered_id(line: bytes) -> int | str | None:
    """The id of the answer ``line`` begins, when it recognisably begins one (see ``_ANSWER``)."""
    import json

    match = _ANSWER.match(line[:512])
    if match is None:
        return None
    try:
        value = json.loads(match.group(1))
    except ValueError:
        return None
    return value if isinstance(value, int | str) else None


async def _exited(proc: asyncio.subprocess.Process, seconds: float) -> bool:
    """Whether ``proc`` has exited within ``seconds`` (its return code is polled: waiting for it would also wait
    for pipes a process it left behind may hold)."""
    deadline = asyncio.get_running_loop().time() + seconds
    while proc.returncode is None:
        if asyncio.get_running_loop().time() >= deadline:
            return False
        await asyncio.sleep(_POLL)
    return True


def _signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to the process group ``pgid``; False when the group is gone."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _holders(inode: int) -> list[int]:
    """Processes (other than this one) with the pipe ``inode`` open, from ``/proc`` (Linux; elsewhere none)."""
    target = f"pipe:[{inode}]"
    me = os.getpid()
    found: list[int] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        folder = f"/proc/{name}/fd"
        try:
            fds = os.listdir(folder)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"{folder}/{fd}") == target:
                    found.append(int(name))
                    break
            except OSError:
                continue
    return found


class _Connection:
    """The tasks of one server process: read its stdout, write its stdin, watch it exit; stop it."""

    def __init__(self, proc: asyncio.subprocess.Process, reader: asyncio.StreamReader, read_pipe: Any,
                 inode: int, *, limit: int, label: str, wire: Wire) -> None:
        self.proc = proc
        self.reader = reader
        self.read_pipe = read_pipe
        self.inode = inode
        self.limit = limit
        self.label = label
        self.wire = wire
        self.read_send, self.read_stream = anyio.create_memory_object_stream[Any](0)
        self.write_stream, self.write_receive = anyio.create_memory_object_stream[Any](0)
        self.eof = anyio.Event()
        self.writer_done = anyio.Event()
        self.discard = anyio.Event()  # set when stopping: read and throw away what is left, to see the end
        self.unreadable = 0
        self.closing = False

    # ---- reading ---------------------------------------------------------------------------------------------
    async def read(self) -> None:
        buf = bytearray()
        scan = 0
        delivering = True
        try:
            while True:
                chunk = await self.reader.read(READ_CHUNK)
                if not chunk:
                    self.eof.set()
                    await self._ended()
                    return
                if not delivering:
                    continue  # thrown away: the session is gone, or the server broke the bounds
                buf += chunk
                start = 0
                while delivering:
                    nl = buf.find(b"\n", scan)
                    end = len(buf) if nl < 0 else nl
                    if end - start > self.limit:
                        self._too_large()
                        delivering = False
                        buf.clear()
                        self.read_send.close()
                        await self.discard.wait()  # read nothing more until the connection stops
                        break
                    if nl < 0:
                        scan = len(buf)
                        break
                    line = bytes(memoryview(buf)[start:nl])
                    start = scan = nl + 1
                    delivering = await self._deliver(line)
                if start:
                    del buf[:start]
                    scan -= start
                if not delivering:
                    buf.clear()
        finally:
            self.read_send.close()

    async def _ended(self) -> None:
        """The output closed: say why, with the exit code once the process has exited."""
        if self.wire.reason is None and not self.closing:
            exited = await _exited(self.proc, _EXIT_GRACE)
            self.wire.reason = (f"its process exited with code {self.proc.returncode}" if exited
                                else "it closed its output")

    def _too_large(self) -> None:
        _log.emit(_log.WARNING, "mcp.message_too_large", server=self.label, limit=self.limit)
        self.wire.reason = f"it sent a message larger than max_message_bytes ({self.limit} bytes)"
        self.wire.too_large = True

    async def _deliver(self, line: bytes) -> bool:
        """Hand one line to the session; False once the session is gone."""
        import mcp_types as types
        from mcp.shared.message import SessionMessage

        text = line.strip()
        if not text:
            return True
        item: Any
        try:
            item = SessionMessage(types.jsonrpc_message_adapter.validate_json(text, by_name=False))
        except ValueError as exc:  # pydantic's ValidationError: not JSON, not UTF-8, not JSON-RPC
            item = self._unreadable(text, exc)
            if item is None:
                return True
        try:
            await self.read_send.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False
        return True

    def _unreadable(self, text: bytes, exc: Exception) -> Any:
        """Log a line that is not a JSON-RPC message; an error answer for its request when it begins one."""
        import mcp_types as types
        from mcp.shared.message import SessionMessage

        self.unreadable += 1
        why = describe(exc)
        count = self.unreadable
        if str(count).rstrip("0") == "1":  # the 1st, 10th, 100th …
            _log.emit(_log.WARNING, "mcp.unreadable_message", server=self.label, count=count, error=why)
        request_id = _answered_id(text)
        if request_id is None:
            return None
        error = types.ErrorData(code=types.PARSE_ERROR, message=f"the MCP server's answer could not be read: {why}")
        return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))

    # ---- writing ---------------------------------------------------------------------------------------------
    async def write(self) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        try:
            async with self.write_receive:
                async for item in self.write_receive:
                    data = item.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
                    stdin.write(data)
                    await stdin.drain()
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
            if not self.closing:
                if self.wire.reason is None:
                    self.wire.reason = f"its input could not be written ({describe(exc)})"
                # the server may still be alive: end the session's side, so no request waits forever
                self.read_send.close()
        finally:
            self.writer_done.set()

    # ---- watching --------------------------------------------------------------------------------------------
    async def watch(self) -> None:
        """End the connection when the process exits, even if a process it left behind keeps its output open."""
        while self.proc.returncode is None:
            await asyncio.sleep(_WATCH)
        with anyio.move_on_after(_EXIT_GRACE):
            await self.eof.wait()
            return
        if self.closing:
            return  # stopping: stop() deals with what holds the output
        if self.wire.reason is None:
            self.wire.reason = (f"its process exited with code {self.proc.returncode} (a process it left behind "
                                "still holds its output)")
        self.read_send.close()

    # ---- stopping --------------------------------------------------------------------------------------------
    async def stop(self) -> None:
        """Stop the server (every wait bounded) and anything it left holding its output."""
        self.closing = True
        self.discard.set()
        self.write_stream.close()
        with anyio.move_on_after(_FLUSH):
            await self.writer_done.wait()
        stdin = self.proc.stdin
        if stdin is not None:
            with suppress(Exception):
                stdin.close()
        pgid = self.proc.pid
        if not await _exited(self.proc, _CLOSE_GRACE):
            _signal_group(pgid, signal.SIGTERM)
            if not await _exited(self.proc, _TERM_GRACE):
                _signal_group(pgid, signal.SIGKILL)
                await _exited(self.proc, _KILL_GRACE)
        with anyio.move_on_after(_POLL * 5):
            await self.eof.wait()
        if not self.eof.is_set():
            # the output is still open: a process of the server's group, or one that left it, holds it
            left = [pgid] if _signal_group(pgid, signal.SIGKILL) else []
            with anyio.move_on_after(_EXIT_GRACE):
                await self.eof.wait()
            if not self.eof.is_set():
                for pid in _holders(self.inode):
                    with suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
                        left.append(pid)
            if left:
                _log.emit(_log.WARNING, "mcp.process_left_behind", server=self.label, pids=left)
        self.read_pipe.close()


@asynccontextmanager
async def stdio_transport(command: str, args: Sequence[str], *, env: Mapping[str, str], cwd: str | None,
                          errlog: Any, limit: int, label: str, wire: Wire) -> AsyncIterator[tuple[Any, Any]]:
    """Start ``command args…`` (its own process group) and yield the SDK's ``(read, write)`` streams for it."""
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    try:
        proc = await asyncio.create_subprocess_exec(command, *args, stdin=subprocess.PIPE, stdout=write_fd,
                                                    stderr=errlog, env=dict(env), cwd=cwd, start_new_session=True)
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    read_pipe: Any = None
    connection: _Connection | None = None
    try:
        inode = os.fstat(read_fd).st_ino
        reader = asyncio.StreamReader(limit=READ_CHUNK)
        pipe_file = os.fdopen(read_fd, "rb", buffering=0)
        read_fd = -1  # owned by pipe_file now
        read_pipe, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe_file)
        connection = _Connection(proc, reader, read_pipe, inode, limit=limit, label=label, wire=wire)
        async with anyio.create_task_group() as tg:
            tg.start_soon(connection.read)
            tg.start_soon(connection.write)
            tg.start_soon(connection.watch)
            try:
                yield connection.read_stream, connection.write_stream
            finally:
                with anyio.CancelScope(shield=True):
                    await connection.stop()
                tg.cancel_scope.cancel()
    finally:
        if connection is None:  # failed before the tasks started: stop the process here
            if read_fd >= 0:
                os.close(read_fd)
            if read_pipe is not None:
                read_pipe.close()
            with anyio.CancelScope(shield=True):
                if proc.returncode is None:
                    _signal_group(proc.pid, signal.SIGKILL)
                    await _exited(proc, _KILL_GRACE)
