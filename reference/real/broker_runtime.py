"""One event loop per `broker node` process, through every role change.

A node is master, then slave, then master again; each role is a runtime of its own
(reference/real/master_server.py ``MasterRuntime``, replica_server.py ``ReplicaRuntime``, the
ones `broker master` and `broker replica` run), but here they share this process's Loop and its
thread: a role change is a call on the loop thread (``switch``) that closes the old role (its
ports, connections, worker threads and timers: reference/real/loop.py ``RoleLoop``) and builds the
next over the log the old one held in memory (BrokerCore.take_held).  The call runs inside a
wake-up of the old role's turn; a closed role's turn ends there (its ``turn`` checks), so no put
is taken in between, and the loop thread itself goes on.  The decisions are BrokerCore's
(reference/failover/broker.py); this only runs turns and swaps roles.
"""

from __future__ import annotations

from collections.abc import Callable

from reference.real.loop import Loop, RoleLoop, call_and_wait, submit

IDLE_WAIT_MS = 1000          # no role yet: wait for a call (a role change) at most this long


class RoleFailed(RuntimeError):
    """The role's runtime stopped on its own (a slave whose disk failed)."""


class BrokerRuntime:
    def __init__(self) -> None:
        self.loop = Loop()
        self.role = None                     # a MasterRuntime or ReplicaRuntime on a RoleLoop, or None
        self.failure: str | None = None

    def run(self) -> None:
        """Run turns until ``stop``; a role that fails (its ``failure``) is closed and ends the
        run with RoleFailed, as a slave's disk failure ends `broker replica`."""
        try:
            while not self.loop.stopping:
                role = self.role
                if role is None:
                    self.loop.run_once(IDLE_WAIT_MS, _no_sockets)
                    continue
                role.turn()
                if getattr(role, "failure", None) is not None and self.role is role:
                    self.failure = role.failure
                    self.close_role()
                    raise RoleFailed(self.failure)
        finally:
            self.close_role()
            self.loop.close()

    def stop(self) -> None:
        self.loop.stop()

    def role_loop(self) -> RoleLoop:
        """The loop view a new role is built on (on the loop thread, in ``switch``)."""
        return RoleLoop(self.loop)

    def close_role(self) -> None:
        """On the loop thread: the current role's ports, connections and timers closed."""
        role, self.role = self.role, None
        if role is not None:
            role.close_role()

    def switch(self, make: Callable[[], object]) -> object:
        """On the loop thread: the old role closed, then ``make()`` builds the next (on
        ``role_loop()``); if it raises, no role runs and the error goes to the caller."""
        self.close_role()
        self.role = make()
        return self.role

    def call(self, fn: Callable[[], object], timeout_s: float = 30.0) -> object:
        """Run ``fn()`` on the loop thread, between two turns, and return its result."""
        return call_and_wait(self.loop, fn, timeout_s)

    def submit(self, fn: Callable[[], object]):
        """``fn()`` on the loop thread; a concurrent future of its result (for asyncio callers)."""
        return submit(self.loop, fn)


def _no_sockets(key, mask) -> None:
    raise AssertionError(f"no role holds a socket, yet {key.fileobj} is registered")
