"""The extension: configuration, handler registration, and the sidecar's lifetime."""

from __future__ import annotations

import os
from typing import Any

from jupyter_server.extension.application import ExtensionApp
from traitlets import Dict, Float, List, Unicode

from ._version import __version__
from .handlers import MCPProxyHandler
from .sidecar import Sidecar, bundled_binary

_WILDCARD_IPV4 = {"", "0.0.0.0", "*", "localhost"}
_WILDCARD_IPV6 = {"::", "[::]"}


def connection_url(serverapp: Any) -> str:
    """The URL the sidecar uses to reach this server: loopback when the server listens on every
    address, the server's own address otherwise, with base_url (e.g. /user/alice/ under a hub)."""
    if serverapp.sock:
        raise ValueError(
            "jupyter-server listens on a Unix socket; set CollabMCPApp.jupyter_url to an HTTP URL "
            "that reaches it"
        )
    ip = serverapp.ip or ""
    if ip in _WILDCARD_IPV4:
        host = "127.0.0.1"
    elif ip in _WILDCARD_IPV6:
        host = "[::1]"
    elif ":" in ip:
        host = f"[{ip}]"
    else:
        host = ip
    scheme = "https" if serverapp.certfile else "http"
    return f"{scheme}://{host}:{serverapp.port}{serverapp.base_url}"


def jupyter_token(serverapp: Any) -> str:
    """The token the sidecar presents to jupyter-server.

    Under JupyterHub the single-user server authenticates with the hub, and the server's own
    JUPYTERHUB_API_TOKEN (scope access:servers!server) is what it accepts; otherwise the
    server's token.
    """
    idp = serverapp.identity_provider
    hub_token = os.environ.get("JUPYTERHUB_API_TOKEN", "")
    if hub_token and type(idp).__module__.startswith("jupyterhub"):
        return hub_token
    return getattr(idp, "token", "") or hub_token


class CollabMCPApp(ExtensionApp):
    """Serve jupyter-collab-mcp's MCP endpoint at {base_url}mcp."""

    name = "jupyter_collab_mcp"
    version = __version__
    load_other_extensions = True

    binary = Unicode(
        "", help="Path of the jupyter-collab-mcp binary (default: the one bundled in the wheel)."
    ).tag(config=True)
    extra_args = List(
        Unicode(),
        help="More command-line flags for the sidecar, e.g. ['--agent-name', 'Claude'] "
        "(see jupyter-collab-mcp --help).",
    ).tag(config=True)
    extra_env = Dict(
        value_trait=Unicode(),
        help="More environment variables for the sidecar (e.g. LOG_LEVEL, STATE_DIR).",
    ).tag(config=True)
    jupyter_url = Unicode(
        "",
        help="URL the sidecar uses to reach this server (default: loopback with the server's "
        "port and base_url).",
    ).tag(config=True)
    startup_timeout = Float(30.0, help="Seconds to wait for the sidecar to serve.").tag(config=True)

    sidecar: Sidecar | None = None

    def initialize_settings(self) -> None:
        self.sidecar = Sidecar(
            log=self.log,
            binary=self.binary or bundled_binary(),
            jupyter_url="",  # known once the server is bound (port 0 picks one late)
            jupyter_token="",
            extra_args=self.extra_args,
            extra_env=self.extra_env,
            startup_timeout=self.startup_timeout,
        )

    def initialize_handlers(self) -> None:
        self.handlers.extend(
            [
                (r"/mcp", MCPProxyHandler, {"sidecar": self.sidecar}),
                (r"/mcp/(.*)", MCPProxyHandler, {"sidecar": self.sidecar}),
            ]
        )

    async def _start_jupyter_server_extension(self, serverapp: Any) -> None:
        # Runs once the event loop is up and the server is listening.
        assert self.sidecar is not None
        self.sidecar.jupyter_url = self.jupyter_url or connection_url(serverapp)
        self.sidecar.jupyter_token = jupyter_token(serverapp)
        self.sidecar.start()
        self.log.info("MCP endpoint: %smcp (Authorization: token <jupyter token>)", serverapp.base_url)

    async def stop_extension(self) -> None:
        if self.sidecar is not None:
            await self.sidecar.stop()
