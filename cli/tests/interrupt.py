"""For tests that send a child process SIGINT (a Ctrl-C).

A shell without job control (``make test &``, a CI step's background job) starts its background
commands with SIGINT ignored; children inherit that, Python then installs no KeyboardInterrupt
handler, and ackorder leaves an ignored SIGINT ignored on purpose.  A test that means "the user
pressed Ctrl-C" gives its child the terminal's disposition back."""

import signal


def sigint_as_at_a_terminal() -> None:
    """A ``preexec_fn``: SIGINT back to its default before the child's Python starts."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
