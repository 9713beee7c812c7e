"""jupyter-collab-mcp as a jupyter-server extension.

Installing the wheel drops ``etc/jupyter/jupyter_server_config.d/jupyter_collab_mcp.json`` into the
environment, which enables this extension: when jupyter-server starts, it runs the bundled
``jupyter-collab-mcp`` binary on a free loopback port and serves its MCP endpoint at
``{base_url}mcp`` behind Jupyter's own authentication (``Authorization: token <jupyter token>``).
"""

from __future__ import annotations

from ._version import __version__

__all__ = ["__version__", "binary_path"]


def binary_path() -> str:
    """Path of the bundled jupyter-collab-mcp binary."""
    from .sidecar import bundled_binary

    return bundled_binary()


def _jupyter_server_extension_points() -> list[dict]:
    from .app import CollabMCPApp

    return [{"module": "jupyter_collab_mcp.app", "app": CollabMCPApp}]
