"""Runs the bundled jupyter-collab-mcp binary next to this jupyter-server and keeps it running."""

from __future__ import annotations

import asyncio
import ctypes
import hashlib
import json
import os
import secrets
import shutil
import signal
import socket
import stat
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tornado.httpclient import AsyncHTTPClient, HTTPClientError

BINARY_NAME = "jupyter-collab-mcp"

# The sidecar's scopes (auth/scopes.go) and the Jupyter permissions that grant them
# (auth.ScopesFromJupyter): one internal token per distinct grant, chosen per request.
GRANTS = ("read", "write", "execute", "write+execute", "admin")

# Inherited variables that would change how the sidecar authenticates or where it listens: the
# extension decides those.
_SCRUBBED_ENV = (
    "MCP_TOKEN",
    "MCP_TOKEN_FILE",
    "MCP_TOKENS_FILE",
    "MCP_LISTEN",
    "MCP_INSECURE_NO_AUTH",
    "JUPYTER_TOKEN_FILE",
)

_PR_SET_PDEATHSIG = 1


def bundled_binary() -> str:
    """Path of the binary shipped in the wheel (made executable if an installer lost the bit)."""
    path = Path(__file__).parent / "bin" / BINARY_NAME
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: this copy of jupyter_collab_mcp has no bundled binary "
            "(build the wheel with `make wheel`, or set CollabMCPApp.binary)"
        )
    mode = path.stat().st_mode
    if not mode & stat.S_IXUSR:
        try:
            path.chmod(mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        except OSError:
            pass  # read-only install: exec will say so
    return str(path)


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM when jupyter-server dies, even by SIGKILL.

    Linux only; elsewhere a crashed server leaves the sidecar to exit on its own.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except Exception:  # noqa: BLE001 - best effort, must not break the exec
        pass


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SidecarUnavailable(Exception):
    """The sidecar is not (yet) serving."""


class Sidecar:
    """One supervised jupyter-collab-mcp process serving Streamable HTTP on 127.0.0.1.

    The process gets its own session (so a Ctrl-C or a signal to jupyter-server's process group
    reaches only jupyter-server, which then stops it in order), PR_SET_PDEATHSIG (so it dies with
    a server that was killed), and is restarted with backoff if it exits on its own.
    """

    def __init__(
        self,
        *,
        log: Any,
        binary: str,
        jupyter_url: str,
        jupyter_token: str,
        extra_args: list[str],
        extra_env: dict[str, str],
        startup_timeout: float,
    ) -> None:
        self.log = log
        self.binary = binary
        self.jupyter_url = jupyter_url
        self.jupyter_token = jupyter_token
        self.extra_args = list(extra_args)
        self.extra_env = dict(extra_env)
        self.startup_timeout = startup_timeout
        self.port: int | None = None
        self.pid: int | None = None
        self.tokens: dict[str, str] = {}
        self._ready = False
        self._stopping = False
        self._proc: asyncio.subprocess.Process | None = None
        self._supervisor: asyncio.Task | None = None
        self._statedir: str | None = None

    # --- what the proxy handler needs -------------------------------------------------------

    def endpoint(self, grant: str) -> tuple[int, str]:
        """(port, internal bearer token for the grant), or SidecarUnavailable."""
        if not self._ready or self.port is None:
            raise SidecarUnavailable("jupyter-collab-mcp is not running (yet)")
        return self.port, self.tokens[grant]

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Start supervising in the background (returns at once; the server does not wait)."""
        if self._supervisor is None:
            self._supervisor = asyncio.ensure_future(self._supervise())

    async def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the sidecar and wait for it (SIGKILL after timeout)."""
        self._stopping = True
        self._ready = False
        proc = self._proc
        if proc is not None and proc.returncode is None:
            try:
                proc.send_signal(signal.SIGTERM)
                await asyncio.wait_for(proc.wait(), timeout)
            except ProcessLookupError:
                pass
            except asyncio.TimeoutError:
                self.log.warning("jupyter-collab-mcp did not stop within %.0fs; killing it", timeout)
                proc.kill()
                await proc.wait()
        if self._supervisor is not None:
            self._supervisor.cancel()
            try:
                await self._supervisor
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - shutting down
                pass
        if self._statedir:
            shutil.rmtree(self._statedir, ignore_errors=True)
            self._statedir = None
        self.log.info("jupyter-collab-mcp stopped")

    async def _supervise(self) -> None:
        backoff = 1.0
        while not self._stopping:
            started = time.monotonic()
            try:
                await self._spawn()
                code = await self._proc.wait()  # type: ignore[union-attr]
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - logged; retried below
                self.log.error("jupyter-collab-mcp could not start: %s", e)
                code = None
            self._ready = False
            if self._stopping:
                return
            if time.monotonic() - started > 60:
                backoff = 1.0
            self.log.warning(
                "jupyter-collab-mcp exited (code %s); restarting in %.0fs", code, backoff
            )
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 30.0)

    def _write_tokens_file(self) -> str:
        if self._statedir is None:
            self._statedir = tempfile.mkdtemp(prefix="jupyter-collab-mcp-")  # mode 0700
        self.tokens = {g: secrets.token_urlsafe(32) for g in GRANTS}
        entries = [
            {
                "name": f"jupyter-{grant}",
                "token_sha256": hashlib.sha256(tok.encode()).hexdigest(),
                "scopes": grant.split("+"),
            }
            for grant, tok in self.tokens.items()
        ]
        path = os.path.join(self._statedir, "tokens.json")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(entries, f)
        return path

    async def _spawn(self) -> None:
        tokens_file = self._write_tokens_file()
        port = free_loopback_port()
        env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV}
        env.update(self.extra_env)
        env["JUPYTER_URL"] = self.jupyter_url
        if self.jupyter_token:
            env["JUPYTER_TOKEN"] = self.jupyter_token
        else:
            env.pop("JUPYTER_TOKEN", None)  # a token-less server: the sidecar uses XSRF
        args = [
            "--listen",
            f"127.0.0.1:{port}",
            "--tokens-file",
            tokens_file,
            "--jupyter-url",
            self.jupyter_url,
            *self.extra_args,
        ]
        kwargs: dict[str, Any] = {"start_new_session": True}
        if sys.platform.startswith("linux"):
            kwargs["preexec_fn"] = _die_with_parent
        proc = await asyncio.create_subprocess_exec(
            self.binary, *args, stdin=asyncio.subprocess.DEVNULL, env=env, **kwargs
        )
        self._proc, self.port, self.pid = proc, port, proc.pid
        self.log.info(
            "jupyter-collab-mcp started (pid %d) on 127.0.0.1:%d for %s", proc.pid, port, self.jupyter_url
        )
        await self._wait_healthy(proc, port)
        self._ready = True
        self.log.info("jupyter-collab-mcp ready (pid %d)", proc.pid)

    async def _wait_healthy(self, proc: asyncio.subprocess.Process, port: int) -> None:
        client = AsyncHTTPClient()
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if proc.returncode is not None:
                raise RuntimeError(f"exited with code {proc.returncode} before serving")
            try:
                resp = await client.fetch(
                    f"http://127.0.0.1:{port}/healthz", request_timeout=2, raise_error=False
                )
                if resp.code == 200:
                    return
            except (OSError, HTTPClientError, asyncio.TimeoutError):
                pass  # not listening yet
            await asyncio.sleep(0.1)
        proc.kill()
        await proc.wait()
        raise RuntimeError(f"not serving on 127.0.0.1:{port} after {self.startup_timeout:.0f}s")
