"""The network of a chaos run: every connection between its processes passes through this
process, which the run tells what the network does now (a nemesis, Jepsen's word).

One listening port per *link*: an ordered pair (src, dst) of process names and dst's real
address.  src is given that port instead of dst's address (``--controller``, or a route:
reference/real/netroute.py), so every byte the proxy forwards has a known sender and receiver,
and a rule can hold the bytes from a to b while those from b to a flow (a one-way partition).

The rules (``NetRules``), per direction (a, b) of every connection between a and b:

* ``blocked``: the bytes a sends b are held: not read from a's socket (a's kernel buffer fills,
  then its writes block, as behind a dead route), and a connection a opens to b, or b to a, is
  accepted (the kernel completes the handshake) but joined to its destination only once the route
  is back both ways; one that waited WAIT_CONNECT_S is reset, and one whose caller closed it is
  dropped, never delivered late (a connect whose SYN was lost fails).  Healing lets the held bytes
  of established connections through, in order;
* ``delay_ms``: each chunk from a to b leaves that much later (order kept);
* ``drop_per_mille``: each chunk from a to b resets its connection with that chance (a lossy
  link whose connections die: RST both ends).

It runs as its own process (``python -m reference.real.netfault LINKS.json``) with one thread
and one selector, like the bench's delay proxy, so it shares no GIL with the load.  Its stdin
takes one JSON command per line (``{"seq": n, "rules": {...}}`` or ``{"seq": n, "stats": true}``)
and its stdout answers each with one JSON line; log lines go to stderr.  A malformed command is
answered with an error and changes nothing; a connection over the bounds is closed with a log line.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import os
import random
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

import attrs

from spec.config import ConfigError

CHUNK_BYTES = 256 * 1024
MAX_HELD_BYTES = 8 << 20        # per direction of a connection: past it the proxy stops reading its source
MAX_CONNECTIONS = 2048          # past it an accepted connection is closed at once, with a log line
MAX_DELAY_MS = 10_000
MAX_LINKS = 256
CONNECT_TIMEOUT_S = 0.5          # to a destination on loopback: only a full accept queue makes it wait
WAIT_CONNECT_S = 3.0             # a connection made during a block gives up after this (its SYN retries)
CALLER_GONE = frozenset({7, 8, 9, 11})   # Linux's tcp_info states CLOSE, CLOSE_WAIT, LAST_ACK, CLOSING
MAX_COMMAND_BYTES = 1 << 20
ASK_TIMEOUT_S = 10.0


def link_name(src: str, dst: str) -> str:
    return f"{src}>{dst}"


ANY = "*"                       # a link whose sender each connection names (etcd's peer port)
MAX_HEAD_BYTES = 16 * 1024      # what is read of such a connection to find its sender
UNKNOWN = "?"


@attrs.frozen
class Link:
    """src reaches dst through this link's port.  ``src == ANY``: one port for every sender, each
    connection's sender named by its first HTTP request's ``X-PeerURLs`` header (etcd's rafthttp
    sets it to the sender's advertised peer URL, which is the port of the proxy's ANY link to the
    sender on its raft stream, pipeline and snapshot requests).  A connection without it (etcd's probes,
    a follower forwarding its clients' lease keep-alives to the leader) is named by the process that
    owns its other end: the caller's socket in /proc/net/tcp, its inode among the file descriptors of
    the processes the run named (``pids``); else it is from UNKNOWN, and no rule reaches it."""
    src: str
    dst: str
    target: tuple[str, int]

    @property
    def name(self) -> str:
        return link_name(self.src, self.dst)


def _closed_by_peer(sock: socket.socket) -> bool:
    try:
        return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] in CALLER_GONE
    except OSError:
        return True


def process_of(sock: socket.socket, pids: dict[int, str]) -> str:
    """The named process whose socket is the other end of ``sock`` (on this host), or UNKNOWN."""
    try:
        ours, theirs = sock.getsockname()[1], sock.getpeername()[1]
        inode = None
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                lines = Path(table).read_text().splitlines()[1:]
            except OSError:
                continue
            for line in lines:
                f = line.split()
                if int(f[1].rsplit(":", 1)[1], 16) == theirs and int(f[2].rsplit(":", 1)[1], 16) == ours:
                    inode = f[9]
                    break
            if inode is not None:
                break
        if inode is None:
            return UNKNOWN
        target = f"socket:[{inode}]"
        for pid, name in pids.items():
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                continue
            for fd in fds:
                try:
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                        return name
                except OSError:
                    continue
    except (OSError, ValueError, IndexError):
        pass
    return UNKNOWN


def sender_of(head: bytes, peers: dict[int, str]) -> str:
    """The member an HTTP request head comes from (its X-PeerURLs header), or UNKNOWN."""
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"x-peerurls":
            url = value.strip().split(b",")[0]
            port = url.rsplit(b":", 1)[-1].rstrip(b"/")
            if port.isdigit() and int(port) in peers:
                return peers[int(port)]
    return UNKNOWN


@attrs.frozen
class NetRules:
    """What the network does now; the empty rules are a healthy network."""
    blocked: frozenset[tuple[str, str]] = frozenset()
    delay_ms: tuple[tuple[str, str, int], ...] = ()
    drop_per_mille: tuple[tuple[str, str, int], ...] = ()
    seed: int = 0                 # the drops' own random stream

    def delay_of(self, a: str, b: str) -> int:
        return next((ms for x, y, ms in self.delay_ms if (x, y) == (a, b)), 0)

    def drop_of(self, a: str, b: str) -> int:
        return next((p for x, y, p in self.drop_per_mille if (x, y) == (a, b)), 0)

    @property
    def healthy(self) -> bool:
        return not (self.blocked or self.delay_ms or self.drop_per_mille)

    def to_json(self) -> dict:
        return {"blocked": sorted(list(p) for p in self.blocked), "delay_ms": [list(d) for d in self.delay_ms],
                "drop_per_mille": [list(d) for d in self.drop_per_mille], "seed": self.seed}

    @classmethod
    def from_json(cls, obj) -> NetRules:
        """ConfigError naming the field for anything but the shape to_json writes."""
        if not isinstance(obj, dict) or set(obj) - {"blocked", "delay_ms", "drop_per_mille", "seed"}:
            raise ConfigError(f"rules: an object with blocked, delay_ms, drop_per_mille, seed: {str(obj)[:80]}")

        def pairs(field: str, with_value: int | None) -> list:
            items = obj.get(field, [])
            width = 2 if with_value is None else 3
            if not isinstance(items, list) or not all(
                    isinstance(p, list) and len(p) == width and all(isinstance(x, str) for x in p[:2])
                    and (with_value is None or (isinstance(p[2], int) and 0 <= p[2] <= with_value)) for p in items):
                bound = "" if with_value is None else f", and 0..{with_value}"
                raise ConfigError(f"rules.{field}: a list of [from, to{bound}]")
            return items

        seed = obj.get("seed", 0)
        if not isinstance(seed, int):
            raise ConfigError("rules.seed: an integer")
        return cls(frozenset(tuple(p) for p in pairs("blocked", None)),
                   tuple(tuple(p) for p in pairs("delay_ms", MAX_DELAY_MS)),
                   tuple(tuple(p) for p in pairs("drop_per_mille", 1000)), seed)


def read_links(path: Path) -> list[Link]:
    try:
        raw = json.loads(path.read_text())
        links = [Link(str(x["src"]), str(x["dst"]), (str(x["host"]), int(x["port"]))) for x in raw]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ConfigError(f"{path}: a JSON list of links {{src, dst, host, port}}: {err}") from None
    if not 1 <= len(links) <= MAX_LINKS or len({link.name for link in links}) != len(links):
        raise ConfigError(f"{path}: 1..{MAX_LINKS} links, each (src, dst) once")
    return links


class _Pipe:
    """One direction of one connection: bytes read from ``source`` are written to ``sink``."""

    def __init__(self, conn: _Conn, source: socket.socket, sink: socket.socket, frm: str, to: str) -> None:
        self.conn, self.source, self.sink, self.frm, self.to = conn, source, sink, frm, to
        self.due: deque[tuple[float, bytes]] = deque()   # (when it may leave, chunk); b"" is the end
        self.held = 0
        self.out = bytearray()
        self.eof_read = self.eof_sent = False


class _Conn:
    def __init__(self, link: Link, client: socket.socket) -> None:
        self.link, self.client = link, client
        self.accepted_at = time.monotonic()
        self.src = None if link.src == ANY else link.src     # ANY: known once its head is read
        self.waited = False                  # accepted while its route was blocked
        self.head = b""
        self.upstream: socket.socket | None = None
        self.pipes: list[_Pipe] = []
        self.closed = False


class Proxy:
    """The selector loop; ``apply`` changes the rules between turns."""

    def __init__(self, links: list[Link], log=lambda text: print(text, file=sys.stderr, flush=True)) -> None:
        self.links, self.log = links, log
        self.sel = selectors.DefaultSelector()
        self.rules = NetRules()
        self.rng = random.Random(0)
        self.conns: list[_Conn] = []
        self.ports: dict[str, int] = {}
        self.timers: list = []
        self.seq = itertools.count()
        self._events: dict[socket.socket, int] = {}     # what each connection socket is registered for
        self._owner: dict[socket.socket, _Conn] = {}
        self.stats = {"accepted": 0, "refused": 0, "resets": 0, "held_connects": 0, "expired_connects": 0,
                      "bytes": 0, "accept_errors": 0, "named_by_process": 0, "unknown_senders": 0}
        for link in links:
            listener = socket.create_server(("127.0.0.1", 0), backlog=256)
            listener.setblocking(False)
            self.sel.register(listener, selectors.EVENT_READ, link)
            self.ports[link.name] = listener.getsockname()[1]
        # an etcd member advertises its ANY link's port as its peer URL: that port names it
        self.senders = {self.ports[k.name]: k.dst for k in links if k.src == ANY}
        self.pids: dict[int, str] = {}       # the processes an ANY link's unnamed connection may come from

    # ------------------------------------------------------------------ rules

    def apply(self, rules: NetRules) -> None:
        self.rules = rules
        self.rng = random.Random(rules.seed)
        for conn in list(self.conns):
            if conn.upstream is None:
                self._join(conn)
            for pipe in conn.pipes:
                self._flush(pipe)
            if not conn.closed and conn.upstream is not None:
                self._interest(conn.client)      # a direction just blocked is read no more
                self._interest(conn.upstream)

    def blocked(self, a: str, b: str) -> bool:
        return (a, b) in self.rules.blocked

    # ------------------------------------------------------------------ connections

    def _accept(self, listener: socket.socket, link: Link) -> None:
        try:
            client, _ = listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as err:          # out of descriptors: the queue stays; do not spin on it
            self.stats["accept_errors"] += 1
            if self.stats["accept_errors"] % 1000 == 1:
                self.log(f"link {link.name}: accept failed: {err}")
            time.sleep(0.01)
            return
        if len(self.conns) >= MAX_CONNECTIONS:
            self.stats["refused"] += 1
            self.log(f"link {link.name}: {MAX_CONNECTIONS} connections open; closing a new one")
            client.close()
            return
        self.stats["accepted"] += 1
        client.setblocking(False)
        conn = _Conn(link, client)
        self.conns.append(conn)
        if conn.src is None:
            self._owner[client] = conn
            self._events[client] = selectors.EVENT_READ
            self.sel.register(client, selectors.EVENT_READ, conn)     # read its head first: who sends
            return
        if self.blocked(conn.src, link.dst) or self.blocked(link.dst, conn.src):
            self.stats["held_connects"] += 1
            conn.waited = True
        self._join(conn)

    def _sniff(self, conn: _Conn) -> None:
        try:
            data = conn.client.recv(MAX_HEAD_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._close(conn, reset=False)
            return
        conn.head += data
        if b"\r\n\r\n" not in conn.head and len(conn.head) < MAX_HEAD_BYTES:
            return
        conn.src = sender_of(conn.head.split(b"\r\n\r\n")[0], self.senders)
        if conn.src == UNKNOWN:
            conn.src = process_of(conn.client, self.pids)
            self.stats["named_by_process" if conn.src != UNKNOWN else "unknown_senders"] += 1
        self._events.pop(conn.client, None)
        self.sel.unregister(conn.client)
        self._owner.pop(conn.client, None)
        if self.blocked(conn.src, conn.link.dst) or self.blocked(conn.link.dst, conn.src):
            self.stats["held_connects"] += 1
            conn.waited = True
        self._join(conn)

    def _join(self, conn: _Conn) -> None:
        """Connect to the destination once the route works both ways (until then the caller waits)."""
        link, src = conn.link, conn.src
        if conn.closed or src is None or self.blocked(src, link.dst) or self.blocked(link.dst, src):
            return
        if conn.waited and _closed_by_peer(conn.client):
            self._close(conn, reset=False)       # its caller gave up while it waited: nothing to deliver
            return
        try:
            upstream = socket.create_connection(link.target, timeout=CONNECT_TIMEOUT_S)
        except OSError:
            self._close(conn, reset=False)     # the destination is down: the caller sees the close
            return
        for s in (conn.client, upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.setblocking(False)
            self._owner[s] = conn
        conn.upstream = upstream
        conn.pipes = [_Pipe(conn, conn.client, upstream, src, link.dst),
                      _Pipe(conn, upstream, conn.client, link.dst, src)]
        if conn.head:                        # what was read to name the sender goes first, delayed like the rest
            pipe = conn.pipes[0]
            due = time.monotonic() + self.rules.delay_of(pipe.frm, pipe.to) / 1000
            pipe.due.append((due, conn.head))
            pipe.held += len(conn.head)
            self.stats["bytes"] += len(conn.head)
            heapq.heappush(self.timers, (due, next(self.seq), pipe))
            conn.head = b""
        self._interest(conn.client)
        self._interest(upstream)

    def _close(self, conn: _Conn, reset: bool) -> None:
        if conn.closed:
            return
        conn.closed = True
        for s in (conn.client, conn.upstream):
            if s is None:
                continue
            if self._events.pop(s, 0):
                self.sel.unregister(s)
            self._owner.pop(s, None)
            if reset:
                try:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                except OSError:
                    pass
            s.close()
        self.conns.remove(conn)

    def _pipe_from(self, conn: _Conn, sock: socket.socket) -> _Pipe:
        return conn.pipes[0] if sock is conn.client else conn.pipes[1]

    def _pipe_to(self, conn: _Conn, sock: socket.socket) -> _Pipe:
        return conn.pipes[1] if sock is conn.client else conn.pipes[0]

    def _interest(self, sock: socket.socket) -> None:
        """Read what may flow, write what waits: a blocked direction is neither read nor written."""
        conn = self._owner.get(sock)
        if conn is None or conn.closed or not conn.pipes:
            return
        src, dst = self._pipe_from(conn, sock), self._pipe_to(conn, sock)
        events = 0
        if not src.eof_read and src.held + len(src.out) < MAX_HELD_BYTES and not self.blocked(src.frm, src.to):
            events |= selectors.EVENT_READ
        if dst.out and not self.blocked(dst.frm, dst.to):
            events |= selectors.EVENT_WRITE
        current = self._events.get(sock, 0)
        if events == current:
            return
        if current == 0:
            self.sel.register(sock, events, conn)
        elif events == 0:
            self.sel.unregister(sock)
        else:
            self.sel.modify(sock, events, conn)
        self._events[sock] = events

    def _readable(self, conn: _Conn, sock: socket.socket) -> None:
        pipe = self._pipe_from(conn, sock)
        try:
            chunk = sock.recv(CHUNK_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if chunk and (p := self.rules.drop_of(pipe.frm, pipe.to)) and self.rng.randrange(1000) < p:
            self.stats["resets"] += 1
            self._close(conn, reset=True)
            return
        self.stats["bytes"] += len(chunk)
        due = time.monotonic() + self.rules.delay_of(pipe.frm, pipe.to) / 1000
        if pipe.due and pipe.due[-1][0] > due:
            due = pipe.due[-1][0]             # a shorter delay never overtakes what is queued
        pipe.due.append((due, chunk))
        pipe.held += len(chunk)
        if not chunk:
            pipe.eof_read = True
        heapq.heappush(self.timers, (due, next(self.seq), pipe))
        self._interest(sock)
        self._flush(pipe)

    def _flush(self, pipe: _Pipe) -> None:
        """Move what is due into the sink (what the kernel takes now); end it after the last byte."""
        conn = pipe.conn
        if conn.closed or self.blocked(pipe.frm, pipe.to):
            return
        now = time.monotonic()
        while pipe.due and pipe.due[0][0] <= now:
            _, chunk = pipe.due.popleft()
            pipe.held -= len(chunk)
            if not chunk:
                pipe.eof_sent = True
                break
            pipe.out += chunk
        if pipe.out:
            try:
                n = pipe.sink.send(pipe.out)
                del pipe.out[:n]
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                self._close(conn, reset=False)
                return
        if pipe.eof_sent and not pipe.out:
            try:
                pipe.sink.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            if all(p.eof_sent and not p.out for p in conn.pipes):
                self._close(conn, reset=False)
                return
        self._interest(pipe.sink)
        self._interest(pipe.source)

    # ------------------------------------------------------------------ the loop

    def turn(self, timeout_s: float) -> list:
        """One turn; returns the selector's events of other registrations (the control channel)."""
        if self.timers:
            timeout_s = min(timeout_s, max(0.0, self.timers[0][0] - time.monotonic()))
        other = []
        for key, events in self.sel.select(timeout_s):
            if isinstance(key.data, Link):
                self._accept(key.fileobj, key.data)
            elif isinstance(key.data, _Conn):
                conn = key.data
                if conn.closed:
                    continue
                if not conn.pipes:
                    self._sniff(conn)
                    continue
                if events & selectors.EVENT_WRITE:
                    self._flush(self._pipe_to(conn, key.fileobj))
                if events & selectors.EVENT_READ and not conn.closed:
                    self._readable(conn, key.fileobj)
            else:
                other.append(key)
        now = time.monotonic()
        while self.timers and self.timers[0][0] <= now:
            _, _, pipe = heapq.heappop(self.timers)
            self._flush(pipe)
        for conn in [c for c in self.conns if c.upstream is None and now - c.accepted_at > WAIT_CONNECT_S]:
            # a connect during a partition fails after the caller's SYN retries, never delivers late
            self.stats["expired_connects"] += 1
            self._close(conn, reset=True)
        return other

    def held(self) -> dict:
        return {"connections": len(self.conns),
                "waiting_connects": sum(1 for c in self.conns if c.upstream is None),
                "held_bytes": sum(p.held + len(p.out) for c in self.conns for p in c.pipes)}


def _command(proxy: Proxy, line: bytes) -> dict:
    obj = None
    try:
        obj = json.loads(line)
        if not isinstance(obj, dict) or not isinstance(obj.get("seq"), int):
            raise ConfigError("a command is an object with an integer seq")
        if "rules" in obj:
            proxy.apply(NetRules.from_json(obj["rules"]))
            proxy.log(f"rules {json.dumps(obj['rules'], sort_keys=True)}")
        if "pids" in obj:
            pids = obj["pids"]
            if not isinstance(pids, dict) or not all(k.isdigit() and isinstance(v, str) for k, v in pids.items()):
                raise ConfigError("pids: an object of process id -> name")
            proxy.pids = {int(k): v for k, v in pids.items()}
        return {"seq": obj["seq"], "ok": True, **proxy.stats, **proxy.held()}
    except (ValueError, ConfigError) as err:
        return {"seq": obj.get("seq") if isinstance(obj, dict) else None, "ok": False, "error": str(err)[:200]}


def serve(links: list[Link]) -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 2 * MAX_CONNECTIONS + MAX_LINKS + 64          # two sockets a connection, a listener a link
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    proxy = Proxy(links)
    stdin = sys.stdin.buffer.raw
    os.set_blocking(stdin.fileno(), False)
    proxy.sel.register(stdin, selectors.EVENT_READ, "control")
    print(json.dumps({"ports": proxy.ports}), flush=True)
    pending = bytearray()
    while True:
        for key in proxy.turn(1.0):
            try:
                data = stdin.read(65536)
            except BlockingIOError:
                continue
            if data is None:
                continue
            if not data:
                return                       # the run is gone: so is its network
            pending += data
            while b"\n" in pending:
                line, _, rest = bytes(pending).partition(b"\n")
                pending[:] = rest
                print(json.dumps(_command(proxy, line)), flush=True)
            if len(pending) > MAX_COMMAND_BYTES:
                proxy.log(f"a command longer than {MAX_COMMAND_BYTES} bytes: dropped")
                pending.clear()


class NetFault:
    """The proxy as a child process of the run: ``port(src, dst)`` is where src connects to reach
    dst; ``set(rules)`` returns once the proxy applies them."""

    def __init__(self, links: list[Link], work: Path) -> None:
        path = work / "links.json"
        path.write_text(json.dumps([{"src": k.src, "dst": k.dst, "host": k.target[0], "port": k.target[1]}
                                    for k in links]))
        self._log = open(work / "netfault.log", "w")
        tree = Path(__file__).resolve().parents[2]
        self.popen = subprocess.Popen([sys.executable, "-m", "reference.real.netfault", str(path)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, cwd=tree,
                                      env=dict(os.environ, PYTHONPATH=str(tree)))
        line = self.popen.stdout.readline()
        try:
            self.ports: dict[str, int] = json.loads(line)["ports"]
        except (ValueError, KeyError, TypeError):
            self.close()
            raise RuntimeError(f"the network proxy did not start: {line[:200]!r}") from None
        self._seq = 0
        self.rules = NetRules()

    def port(self, src: str, dst: str) -> int:
        """Where src connects to reach dst (an ANY link: every sender's port to dst)."""
        return self.ports.get(link_name(src, dst)) or self.ports[link_name(ANY, dst)]

    def set(self, rules: NetRules) -> dict:
        self.rules = rules
        return self.ask({"rules": rules.to_json()})

    def stats(self) -> dict:
        return self.ask({})

    def name_processes(self, pids: dict[int, str]) -> dict:
        """The processes whose connections an ANY link names by their socket when no header names them."""
        return self.ask({"pids": {str(k): v for k, v in pids.items()}})

    def ask(self, command: dict) -> dict:
        import select

        self._seq += 1
        self.popen.stdin.write(json.dumps({"seq": self._seq, **command}).encode() + b"\n")
        self.popen.stdin.flush()
        ready, _, _ = select.select([self.popen.stdout], [], [], ASK_TIMEOUT_S)
        if not ready:
            raise RuntimeError(f"the network proxy did not answer within {ASK_TIMEOUT_S:g} s")
        reply = json.loads(self.popen.stdout.readline() or b"{}")
        if reply.get("seq") != self._seq or not reply.get("ok"):
            raise RuntimeError(f"the network proxy answered {reply}")
        return reply

    def close(self) -> None:
        if self.popen.poll() is None:
            self.popen.stdin.close()
            try:
                self.popen.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        self.popen.stdout.close()
        self._log.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("links", type=Path)
    args = p.parse_args()
    try:
        links = read_links(args.links)
    except ConfigError as err:
        print(f"netfault: {err}", file=sys.stderr)
        sys.exit(2)
    signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
    serve(links)


if __name__ == "__main__":
    main()
