"""An immutable sequence whose appends and point updates cost O(n / CHUNK + CHUNK), not O(n).

The spec's sequences (``log``, ``reqs``, each ``rlog``) are tuples, and its actions extend them
with ``s.log + (rid,)`` and update them with ``_set``: fine for model checking (a few records),
O(run length) per step for the refinement checker's shadow over a million-step simulation.
``Seq`` is a drop-in for those tuples there: the same operations (``+`` a tuple, indexing,
slicing, ``len``, iteration, ``==`` against tuples and Seqs, hashing) with the same values, kept
as a tuple of full chunks of CHUNK items (shared between versions) and a short tail.  Only the
checker's shadow uses it (reference/refinement.py); the twin's actions keep its type
(spec/actions.py's ``_set`` and ``_replace``), so every state a step makes from a
Seq state holds Seqs again.
"""

from __future__ import annotations

from itertools import chain

CHUNK = 128                  # a power of two
_SHIFT = CHUNK.bit_length() - 1
_MASK = CHUNK - 1


class Seq:
    __slots__ = ("_chunks", "_tail", "_len", "_hash", "_full")

    def __init__(self, items=()) -> None:
        items = tuple(items)
        full = len(items) - len(items) % CHUNK
        self._chunks = tuple(items[i:i + CHUNK] for i in range(0, full, CHUNK))
        self._tail = items[full:]
        self._len = len(items)
        self._hash = None
        self._full = full               # items in the full chunks: the tail's first index

    @classmethod
    def _of(cls, chunks: tuple, tail: tuple) -> Seq:
        assert len(tail) < CHUNK, len(tail)
        s = object.__new__(cls)
        full = len(chunks) * CHUNK
        s._chunks, s._tail, s._len, s._hash, s._full = chunks, tail, full + len(tail), None, full
        return s

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    def __iter__(self):
        return chain(*self._chunks, self._tail)

    def __getitem__(self, i):
        if not (i.__class__ is int and 0 <= i < self._len):    # the common case goes straight on
            if isinstance(i, slice):
                start, stop, step = i.indices(self._len)
                if step != 1:
                    return tuple(self)[i]
                if start == 0:
                    return self._prefix(stop)
                return self._piece(start, stop)     # a piece of a sequence (never stored in a state): a tuple
            i = self._index(i)
        full = self._full
        if i < full:
            return self._chunks[i >> _SHIFT][i & _MASK]
        return self._tail[i - full]

    def _index(self, i: int) -> int:
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError("Seq index out of range")
        return i

    def _piece(self, start: int, stop: int) -> tuple:
        pieces = []
        n_chunks = len(self._chunks)
        while start < stop:
            k = start >> _SHIFT
            c, base = (self._chunks[k], k << _SHIFT) if k < n_chunks else (self._tail, n_chunks << _SHIFT)
            piece = c[start - base: stop - base]
            if not piece:
                break
            pieces.append(piece)
            start += len(piece)
        return tuple(chain.from_iterable(pieces))

    def _prefix(self, n: int) -> Seq:
        if n >= self._len:
            return self
        k = n >> _SHIFT
        if k < len(self._chunks):
            return Seq._of(self._chunks[:k], self._chunks[k][: n & _MASK])
        return Seq._of(self._chunks, self._tail[: n - (k << _SHIFT)])

    def __add__(self, other) -> Seq:
        if not isinstance(other, (tuple, Seq)):
            return NotImplemented
        chunks, tail = self._chunks, self._tail + tuple(other)
        if len(tail) >= CHUNK:
            full = len(tail) - len(tail) % CHUNK
            chunks = chunks + tuple(tail[i:i + CHUNK] for i in range(0, full, CHUNK))
            tail = tail[full:]
        return Seq._of(chunks, tail)

    def __radd__(self, other) -> Seq:
        if not isinstance(other, tuple):
            return NotImplemented
        return Seq(other + tuple(self))

    def set(self, i: int, value) -> Seq:
        """This sequence with item ``i`` replaced (``_set`` of spec/actions.py)."""
        i = self._index(i)
        k = i >> _SHIFT
        if k < len(self._chunks):
            c, j = self._chunks[k], i & _MASK
            return Seq._of(self._chunks[:k] + (c[:j] + (value,) + c[j + 1:],) + self._chunks[k + 1:], self._tail)
        j = i - (k << _SHIFT)
        return Seq._of(self._chunks, self._tail[:j] + (value,) + self._tail[j + 1:])

    def __eq__(self, other) -> bool:
        if self is other:
            return True
        if isinstance(other, Seq):
            if self._len != other._len or self._tail != other._tail:
                return False
            mine, theirs = self._chunks, other._chunks
            # At C speed, chunk by chunk by identity first: versions of one sequence share chunks.
            if mine is not theirs:
                if mine != theirs:
                    return False
                # Equal, in chunks of their own (a slave's log against the master's, item by item
                # at every connect): from now on the two share one tuple of chunks, so that their
                # later versions compare by identity.  The value is the same: no reader can tell.
                other._chunks = mine
            return True
        if isinstance(other, tuple):
            return self._len == len(other) and tuple(self) == other
        return NotImplemented

    def __ne__(self, other) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(tuple(self))      # equal to the tuple's: a Seq and its tuple are one value
        return self._hash

    def __contains__(self, x) -> bool:
        return any(x in c for c in self._chunks) or x in self._tail

    def __repr__(self) -> str:
        return repr(tuple(self))


def same_prefix(a, b, n: int) -> bool:
    """``a[:n] == b[:n]``, in time O(n / CHUNK) where two Seqs share their chunks (versions of one
    sequence do: the twin's steps copy only the chunks they change)."""
    if len(a) < n or len(b) < n:
        return False
    if not (isinstance(a, Seq) and isinstance(b, Seq)):
        return tuple(a[i] for i in range(n)) == tuple(b[i] for i in range(n))
    k = n >> _SHIFT
    if any(x is not y and x != y for x, y in zip(a._chunks[:k], b._chunks[:k])):
        return False
    return a._piece(k << _SHIFT, n) == b._piece(k << _SHIFT, n)


_ANY_MEMO: dict[tuple, tuple] = {}     # (id(chunk), field, value) -> (chunk, answer)
_ANY_MEMO_MAX = 1 << 16                # entries; emptied when full (a cache, never an answer by itself)


def any_field(seq, field: str, value, reverse: bool = False) -> bool:
    """``any(getattr(x, field) == value for x in seq)``, remembering the answer of each full
    chunk of a Seq (the memo holds the chunk, so its id stays its own): over versions of one
    growing sequence each chunk is read once, not at every call.  ``reverse``: look from the
    end first (where a match is likelier)."""
    if not isinstance(seq, Seq):
        return any(getattr(x, field) == value for x in seq)
    if any(getattr(x, field) == value for x in seq._tail):
        return True
    for c in reversed(seq._chunks) if reverse else seq._chunks:
        key = (id(c), field, value)
        hit = _ANY_MEMO.get(key)
        if hit is None or hit[0] is not c:
            if len(_ANY_MEMO) >= _ANY_MEMO_MAX:
                _ANY_MEMO.clear()
            hit = _ANY_MEMO[key] = (c, any(getattr(x, field) == value for x in c))
        if hit[1]:
            return True
    return False
