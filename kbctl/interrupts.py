"""SIGTERM and Ctrl-C stop an ingest run at a safe point, so the run can still be closed.

A ``KeyboardInterrupt`` raised in the middle of a psycopg call leaves the connection mid-command:
the run could not be marked ``interrupted`` on it, nor the namespace lock released. While a run
streams, ``Interrupts.deferred()`` holds both signals back and lets them through only where the
run waits for input (``interruptible``: the next record on stdin, the next item from the producer
thread); one that arrives elsewhere (while a batch is embedded or written) is raised at the next
such wait, or when the stream ends. Either way it is a ``KeyboardInterrupt``, as Ctrl-C is.

Work with nothing of its own to close (a reembed: each batch commits alone, and the next run goes
on from what is committed) takes SIGTERM as Ctrl-C where it arrives: ``sigterm_as_ctrl_c()``.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterable, Iterator, TypeVar

__all__ = ["Interrupts", "sigterm_as_ctrl_c"]

T = TypeVar("T")


@contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """For the block (or the function it decorates), SIGTERM raises ``KeyboardInterrupt`` where it
    arrives, as Ctrl-C does, so the CLI answers it as Ctrl-C (``interrupted``, exit 130) where the
    default handler ended the process at once (exit 143, not a word). A statement it cuts short is
    cancelled by psycopg, a transaction rolled back. Main thread only, and only while SIGTERM has
    its default handler (an application's own, or an enclosing block's, stays)."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) is not (
        signal.SIG_DFL
    ):
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


class Interrupts:
    """Signals deferred to the points where a run waits for input."""

    def __init__(self) -> None:
        self.pending = False
        self.waiting = False

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """Defer SIGINT and SIGTERM for the block (main thread only; an application's own handlers stay)."""
        previous = {}
        if threading.current_thread() is threading.main_thread():
            for sig, default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL)):
                if signal.getsignal(sig) is default:
                    previous[sig] = signal.signal(sig, self._on_signal)
        try:
            yield
            self._raise_pending()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def interruptible(self, items: Iterable[T]) -> Iterator[T]:
        """``items``, with signals let through while the next one is awaited (its producer must not use the database)."""
        it = iter(items)
        while True:
            self.waiting = True
            try:
                self._raise_pending()
                item = next(it)
            except StopIteration:
                return
            finally:
                self.waiting = False
            yield item

    def checkpoint(self) -> None:
        """A safe point outside ``interruptible``: raise a signal that came meanwhile."""
        self._raise_pending()

    def _on_signal(self, signum, frame) -> None:
        if self.waiting:
            raise KeyboardInterrupt(signal.Signals(signum).name)
        self.pending = True

    def _raise_pending(self) -> None:
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt("interrupted")
