"""What the sans-IO cores ask their runtime to do.

The cores never touch a file, a socket or a clock: they return effects, and
the runtime (reference/real or reference/sim) performs them and reports back
with events (method calls on the core such as ``fsync_done``).
"""

from __future__ import annotations

import attrs


@attrs.frozen
class CreateSegment:
    """Create (preallocate) the segment file named by its start offset."""
    start: int


@attrs.frozen
class WriteData:
    """Write bytes into the page cache of a segment (pwrite; no fsync).  The
    master's runtime answers each one, in order, with ``write_done`` or
    ``write_failed`` (EIO, ENOSPC, a short count): until then the master
    counts none of these bytes as committed."""
    start: int        # segment start offset
    position: int     # position inside the segment
    data: bytes

    @property
    def offset(self) -> int:
        """Global offset of the first byte."""
        return self.start + self.position

    @property
    def end(self) -> int:
        return self.start + self.position + len(self.data)


@attrs.frozen
class Fsync:
    """fsync every segment from ``start`` up to ``upto`` (at most two: the
    padded end of one and the next); answer with fsync_done or fsync_failed."""
    start: int        # segment holding the flushed offset
    upto: int         # global offset the fsync covers (what was committed when it was issued)


@attrs.frozen
class SendData:
    """Master -> slave: log bytes starting at ``offset`` (an HA DATA frame) on
    HA connection ``conn`` (the runtime's id for it), with the transfer header: the
    epoch entry (epoch, its start offset) the bytes lie in and the confirmOffset."""
    conn: int
    offset: int
    data: bytes
    epoch: int = 0
    epoch_start: int = 0
    confirm_offset: int = 0


@attrs.frozen
class SendEpochs:
    """Master -> a following slave, on the HA connection it asked on (EPOCH_REPLY): the
    master's epoch entries, its log end (a record boundary) and its confirmOffset."""
    conn: int
    entries: tuple[tuple[int, int], ...]
    log_end_offset: int
    confirm_offset: int


@attrs.frozen
class CloseReplica:
    """Master: close one HA connection (refused handshake, bad ack, bad frame).
    Names the connection, not the slave: refusing a second connection under a
    name never touches the healthy first one."""
    conn: int
    reason: str
    bound: str | None = None     # the bound on a peer's input that closed it (the option's name)


@attrs.frozen
class Respond:
    """Answer a producer's request.  ``final``: no other answer will follow, so
    the runtime can forget where the request came from (False only when the
    BugDoubleResponse switch will answer it a second time)."""
    req_id: int
    status: int       # reference.status.PutStatus
    next_offset: int
    final: bool = True


@attrs.frozen
class ReadSegment:
    """Master: read the whole segment file starting at ``start`` back (as the
    page cache serves it) and answer with ``segment_read`` (or
    ``segment_read_failed``).  Only for segments the core no longer keeps in
    memory: a slave that lags, or that reconnects at an old offset."""
    start: int


@attrs.frozen
class SendAck:
    """Slave -> master: the offset this slave holds (an HA ACK frame)."""
    offset: int
    records: int      # complete message records below offset


@attrs.frozen
class SendHandshake:
    """Slave -> master: first message of a connection."""
    offset: int
    chain: bytes
    records: int      # message records up to offset (diagnostics; the 4.9.x-style bug reads it)


@attrs.frozen
class SendEpochQuery:
    """Slave (under failover) -> master: the first frame of a connection, before the
    HANDSHAKE: the master's epoch entries, to cut this log against."""


@attrs.frozen
class RescanLog:
    """Slave: the log was cut at ``upto`` (TruncateLog): index it again from the files, as if
    they ended there, and answer with ``rescanned`` (a cut in memory only, BugTruncateNotDurable,
    leaves the bytes on disk: the scan must not see them, recovery after a crash will)."""
    upto: int


@attrs.frozen
class CloseMaster:
    """Slave: drop the connection to the master (a frame at the wrong offset)."""
    reason: str


@attrs.frozen
class ZeroTail:
    """Recovery: overwrite a segment from ``position`` to its end with zeros,
    so truncated records cannot come back after another crash (RocketMQ B14)."""
    start: int
    position: int
