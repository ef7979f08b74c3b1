"""The simulator's trace writer: every spec step a run took, in the trace format of
spec/traceformat.py (version 1), for `ackorder trace-check` and `--twin`.

The simulator sees every variable (process ``sim``), so each step's ``obs`` is what it changed
and everything else is unchanged; each step also names the process that performed or first saw it
(``proc``), and each HA handshake a slave sends is a ``HANDSHAKE`` note, so that a run's trace can be
split into the files a master and its replicas would each write (``split``) and merged back.
"""

from __future__ import annotations

import json

import attrs

from spec import traceformat as tf
from spec.config import Config
from spec.state import State

# Steps a replica performs (or, for its crash and restart, is the one to know of); the rest are the
# master's, its crashes included (a restarted master knows it went down).
REPLICA_STEPS = frozenset({"Transfer", "ReplicaCrash", "ReplicaRestart"})
TLC_MAX_FILE_SIZE = 1 << 30     # TLC's integers are 32-bit; any size beyond a trace's records is the same


def trace_config(cfg: Config) -> Config:
    """The spec configuration a trace is checked against: the implementation's, every bug switch off."""
    return attrs.evolve(cfg, file_size=min(cfg.file_size, TLC_MAX_FILE_SIZE), bugs=frozenset())


def step_process(label: str) -> str:
    name, _, param = label.partition("(")
    return param.rstrip(")") if name in REPLICA_STEPS else "master"


class TraceWriter:
    """Writes one run's trace to a text stream, line by line as the run goes."""

    def __init__(self, out, cfg: Config, bugs=(), source: str = "") -> None:
        self.out = out
        self.cfg = trace_config(cfg)
        self.seq = 0
        self.closed = False
        self._line(tf.header("sim", self.cfg, tf.SIM_OBSERVES, bugs=bugs, source=source))

    def _line(self, obj: dict) -> None:
        self.out.write(json.dumps(obj, separators=(",", ":")) + "\n")

    def steps(self, before: State, taken: list[tuple[str, State]], now_ms: int, what: str) -> None:
        for label, state in taken:
            self.seq += 1
            self._line({"seq": self.seq, "proc": step_process(label), "action": label,
                        "obs": tf.step_obs(self.cfg, before, state), "t_ms": now_ms, "what": what})
            before = state

    def note(self, proc: str, note: str, now_ms: int, **data) -> None:
        self.seq += 1
        self._line({"seq": self.seq, "proc": proc, "note": note, **data, "t_ms": now_ms})

    def end(self, complete: bool, violation: tuple[str, str] | None = None, now_ms: int | None = None) -> None:
        """The trailer: ``complete`` when the run healed to its end (or a request outlived its
        deadlines), and the run's own verdict."""
        if self.closed:
            return
        self.closed = True
        if complete:
            self._line({"end": "complete", "t_ms": now_ms})
        if violation is not None:
            self._line({"violation": violation[0], "message": violation[1]})
