"""Experiment: gunicorn's gthread worker that closes kept-alive connections while it holds more
than its share of them, so that their clients connect afresh and land where there is room."""

from __future__ import annotations

import math
import mmap
import struct
import time

from gunicorn.workers.gthread import ThreadWorker

SLOT = struct.Struct("=iid")  # pid, open connections, when written
SLOTS = 64
STALE_AFTER = 3.0
_board = mmap.mmap(-1, SLOT.size * SLOTS)


def over_share(mine: int, others: list[int], slack: int = 1) -> bool:
    """Whether a worker with `mine` open connections holds more than its share plus `slack`."""
    share = math.ceil((mine + sum(others)) / (len(others) + 1))
    return mine > share + slack


def others_conns(board, slot: int, now: float) -> list[int]:
    return [
        conns
        for index, (pid, conns, stamp) in enumerate(SLOT.iter_unpack(board))
        if index != slot and pid and now - stamp < STALE_AFTER
    ]


class ShareThreadWorker(ThreadWorker):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._slot = self.age % SLOTS
        self._keep = self.max_keepalived

    def notify(self) -> None:
        super().notify()
        self._look()

    def _look(self) -> None:
        now = time.monotonic()
        SLOT.pack_into(_board, self._slot * SLOT.size, self.pid, self.nr_conns, now)
        over = over_share(self.nr_conns, others_conns(_board, self._slot, now))
        # handle_request (a pool thread) closes the connection after its response while this is 0
        self.max_keepalived = 0 if over else self._keep

    def enqueue_req(self, conn) -> None:
        self._look()
        super().enqueue_req(conn)

    def finish_request(self, conn, fs) -> None:
        super().finish_request(conn, fs)
        self._look()
