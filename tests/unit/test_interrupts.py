"""``kbctl.interrupts``: SIGTERM taken as Ctrl-C for a block, an application's own handler kept."""

from __future__ import annotations

import os
import signal

import pytest

from kbctl.interrupts import sigterm_as_ctrl_c


def test_sigterm_raises_keyboard_interrupt_inside_the_block_and_the_default_handler_is_back_after():
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"), sigterm_as_ctrl_c():
        os.kill(os.getpid(), signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_an_applications_own_sigterm_handler_is_kept():
    seen: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    try:
        with sigterm_as_ctrl_c():
            assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
            os.kill(os.getpid(), signal.SIGTERM)
        assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)
