"""Pure helpers: the twin of tla/AckOrderFailoverFunctions.tla, operator by operator."""

from __future__ import annotations

from spec.failover.config import FailoverConfig
from spec.failover.state import CLIENT_TIMEOUT, WAITING, FRequest, FState

Cache = tuple[tuple[int, int], ...]


def alive(cfg: FailoverConfig, s: FState, b: str) -> bool:
    """Alive(b): what the controller's heartbeat manager sees."""
    k = cfg.index(b)
    return s.up[k] and s.reachable[k]


# --- EpochFileCache -----------------------------------------------------------

def last_epoch(c: Cache) -> int:
    return c[-1][0] if c else 0


def last_start(c: Cache) -> int:
    return c[-1][1] if c else 0


def append_entry(cfg: FailoverConfig, c: Cache, e: tuple[int, int]) -> Cache:
    """AppendEntry: refuses an entry not above the last in epoch, or below it in start (E1)."""
    if cfg.bug("BugEpochAppendUnchecked") or not c or (e[0] > last_epoch(c) and e[1] >= last_start(c)):
        return c + (e,)
    return c


def truncate_suffix_by_offset(c: Cache, o: int) -> Cache:
    return tuple(e for e in c if e[1] < o)


def truncate_suffix_by_epoch(c: Cache, ep: int) -> Cache:
    return tuple(e for e in c if e[0] < ep)


def truncate_beyond(c: Cache, o: int) -> Cache:
    return tuple(e for e in c if e[1] <= o)


def covering_index(c: Cache, o: int) -> int:
    """CoveringIndex(c, o), 1-based (0: none): the last entry starting at or before o."""
    ks = [k for k, e in enumerate(c, start=1) if e[1] <= o]
    return max(ks) if ks else 0


def epoch_at(c: Cache, o: int) -> int:
    k = covering_index(c, o)
    return c[k - 1][0] if k else 0


def entry_end(c: Cache, k: int, log_end: int) -> int:
    """EntryEnd(c, k, logEnd) for 1-based k."""
    return log_end if k == len(c) else c[k][1]


def consistent_point(cfg: FailoverConfig, s: FState, slave: int, master: int) -> int:
    """ConsistentPoint(s, m): findConsistentPoint, or -1 when the handshake fails."""
    lc, mc = s.epochCache[slave], s.epochCache[master]
    if not lc:
        return 0 if not s.blog[slave] else -1
    common = [k for k, e in enumerate(lc, start=1) if e in mc]
    if not common:
        return -1
    k = max(common)
    j = next(j for j, e in enumerate(mc, start=1) if e == lc[k - 1])
    local_end = min(entry_end(lc, k, len(s.blog[slave])), len(s.blog[slave]))
    return min(local_end, entry_end(mc, j, len(s.blog[master])))


def cursor_entry(s: FState, master: int, slave: int) -> tuple[int, int]:
    mc = s.epochCache[master]
    ks = [j for j, e in enumerate(mc, start=1) if e[0] == s.cursorEpoch[slave]]
    return mc[max(ks) - 1] if ks else (s.cursorEpoch[slave], 0)


def transfer_label(cfg: FailoverConfig, s: FState, master: int, slave: int, o: int) -> tuple[int, int]:
    """TransferLabel(m, s, o): the master's entry covering o (B13: the connection's stale cursor)."""
    mc = s.epochCache[master]
    e = mc[covering_index(mc, o) - 1]
    if cfg.bug("BugTransferCursorNotReset") and s.cursorEpoch[slave] != 0 and e[0] > s.cursorEpoch[slave]:
        return cursor_entry(s, master, slave)
    return e


# --- acks and confirmOffset ---------------------------------------------------------

def connected_to(cfg: FailoverConfig, s: FState, slave: int, m: str) -> bool:
    return s.connected[slave] and s.bMasterId[slave] == m


def sss_view(s: FState, k: int) -> frozenset[str]:
    return s.bSSS[k] | s.bRemoteSSS[k]


def ack_view(cfg: FailoverConfig, s: FState, k: int) -> frozenset[str]:
    if cfg.bug("BugCommittedSssOnly"):
        return s.bSSS[k]
    if cfg.bug("BugShrinkBeforeCommit") and s.bRemoteSSS[k]:
        return s.bRemoteSSS[k]
    return sss_view(s, k)


def ack_covered(cfg: FailoverConfig, s: FState, k: int, off: int) -> bool:
    """AckCovered(m, off): GroupTransferService under allAckInSyncStateSet."""
    if cfg.bug("BugNoAllAck"):
        return True
    view = ack_view(cfg, s, k)
    if len(view) <= 1:
        return True
    m = cfg.brokers[k]
    return all(connected_to(cfg, s, cfg.index(o), m) and s.ack[cfg.index(o)] >= off for o in view - {m})


def confirm_with(cfg: FailoverConfig, s: FState, k: int, view: frozenset[str], connected: tuple[bool, ...],
                 acks: tuple[int, ...], old: int) -> int:
    """ConfirmWith(m, view, conn, acks, old): computeConfirmOffset."""
    m = cfg.brokers[k]
    others = view - {m}
    length = len(s.blog[k])
    if not others:
        return length
    live = [o for o in others if connected[cfg.index(o)] and s.bMasterId[cfg.index(o)] == m]
    if cfg.bug("BugConfirmOverConnected"):
        return min([length] + [acks[cfg.index(o)] for o in live])
    if len(live) != len(others):
        return old
    return min([length] + [acks[cfg.index(o)] for o in others])


def header_confirm(cfg: FailoverConfig, s: FState, k: int) -> int:
    """HeaderConfirm(m): the confirmOffset a TRANSFER header carries."""
    return len(s.blog[k]) if cfg.bug("BugSlaveConfirmFromMaxOffset") else s.confirm[k]


def holds(s: FState, log: tuple[int, ...], i: int) -> bool:
    """Holds(L, i) for a 1-based request id."""
    off = s.reqs[i - 1].off
    return off <= len(log) and log[off - 1] == i


def abort_at(s: FState, b: str) -> tuple[FRequest, ...]:
    """AbortAt(b): requests waiting at a dying broker become producer-side timeouts."""
    return tuple(FRequest(r.off, CLIENT_TIMEOUT, r.epoch, r.master) if r.status == WAITING and r.master == b else r
                 for r in s.reqs)
