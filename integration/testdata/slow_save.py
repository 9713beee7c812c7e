"""A jupyter-server contents manager whose notebook saves are slow and visible half-done.

The crash tests (integration/faults, storm_test.go) configure it into their jupyter-server through
its jupyter config (writeSlowSaveConfig). It behaves like the default AsyncLargeFileManager except
that a notebook is written in `save_chunks` pieces with `chunk_pause` seconds between them, each
piece flushed: as on a slow or busy disk, a reader (the contents API's `?hash=1`, another
process) can see the file partly written, and a SIGKILL during a save leaves it partly written.

It keeps jupyter-server's own protocol for that case (`atomic_writing`): the previous file is
copied to `.~name` first, written over in place, and the copy removed at the end; the next read of
a notebook that does not parse restores the copy. The pauses are asyncio sleeps, so the server's
event loop keeps serving (the write of a slow disk runs in a thread the same way).
"""

import asyncio

import nbformat
from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
from traitlets import Float, Int


class SlowSaveContentsManager(AsyncLargeFileManager):
    save_chunks = Int(4, config=True, help="Pieces a notebook is written in.")
    chunk_pause = Float(0.3, config=True, help="Seconds between two pieces.")

    async def _save_notebook(self, os_path, nb, capture_validation_error=None):
        text = nbformat.writes(nb, version=nbformat.NO_CONVERT, capture_validation_error=capture_validation_error)
        if isinstance(text, bytes):
            text = text.decode("utf8")
        if not text.endswith("\n"):
            text += "\n"
        n = max(1, self.save_chunks)
        size = -(-len(text) // n)
        self.log.info("slow save of %s: %d characters in %d pieces, %.2f s apart", os_path, len(text), n, self.chunk_pause)
        with self.atomic_writing(os_path, encoding="utf-8") as f:
            for i in range(n):
                f.write(text[i * size : (i + 1) * size])
                f.flush()
                if i < n - 1:
                    await asyncio.sleep(self.chunk_pause)
