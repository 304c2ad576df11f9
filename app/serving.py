"""gunicorn's threaded worker, taking a new connection only while one of its threads is free.

gunicorn's own `gthread` worker accepts every connection it can, busy or not, and hands it to
its thread pool, where it waits behind the requests already there. With the listening socket
shared by all workers, the worker whose main loop wakes first takes a burst of connections, and
kept-alive players stay where they landed: 64 players were counted about 43 on one worker and 21
on the other, and the first group waited twice as long for every page.

This worker leaves the listening socket alone while all its threads are busy, so a new
connection waits in the kernel's queue, shared by all workers, until one of them has a thread
free: connections go where there is room, and a worker that dies takes no waiting connection
with it (they stay in the shared queue for the others).
"""

from __future__ import annotations

from gunicorn.workers.gthread import ThreadWorker


class IdleAcceptThreadWorker(ThreadWorker):
    """`gthread`, accepting only while a thread is free (GUNICORN_WORKER_CLASS=gthread)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._busy = 0  # requests handed to the pool and not finished; main thread only
        self._wanted = False  # whether gunicorn's loop wants the listeners polled

    def set_accept_enabled(self, enabled: bool) -> None:
        self._wanted = enabled
        self._gate()

    def _gate(self) -> None:
        super().set_accept_enabled(self._wanted and self._busy < self.cfg.threads)

    def enqueue_req(self, conn) -> None:
        self._busy += 1
        self._gate()
        super().enqueue_req(conn)

    def finish_request(self, conn, fs) -> None:
        self._busy -= 1
        self._gate()
        super().finish_request(conn, fs)
