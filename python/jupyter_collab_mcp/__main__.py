"""``jupyter-collab-mcp`` / ``python -m jupyter_collab_mcp``: run the bundled binary directly (stdio
or ``--listen``), for MCP clients that start the server themselves."""

from __future__ import annotations

import os
import sys

from .sidecar import bundled_binary


def main() -> None:
    binary = bundled_binary()
    # exec, not a child: signals, stdio and the exit code are the binary's own.
    os.execv(binary, [binary, *sys.argv[1:]])


if __name__ == "__main__":
    main()
