"""One AckOrderFailover trace from the per-process files of a real run (reference/failover/proctrace.py):
every `broker node`, the `controller`, and the chaos harness's faults, merged into the spec's
steps, which spec/failover/tracecheck.py and TLC then check (a history checked against the spec).

The processes share one clock (CLOCK_MONOTONIC of one machine) and stamp each step after what
caused it and before what it sends, so sorting by stamp never puts an effect before its cause.
Among the orders the stamps allow, the spec's atomic actions need a particular one, chosen here
without looking at any state:

* a slave's ``Transfer`` is placed as late as its causes allow: just before the master's
  ``ReplicaAck`` whose claim covers it (the spec's ack is the slave's whole log), or the slave's
  own next step.  When the master ends the connection (``ReplicaDisconnect``, a demotion, its
  crash), the records still on their way to the slave are placed before that end: they left
  before it (data in a socket arrives before its close), up to the slave's next step of another kind;
* a crash is known from a process's next start (or the end of its file) and placed as late as
  possible: just before the controller first counts the broker dead, or the broker starts again;
  records the harness wrote into a dead master's log (``UnreplicatedTail``) are ``Put``s just before it;
* the controller's view of liveness is the spec's ``reachable``: before each decision a broker
  it counts dead that still runs is ``CutFromController``, and one it counts alive again (or that
  talks to it) is ``ReconnectToController``;
* the first registration (``FirstMaster``) is the spec's Init, so the epoch-1 role changes of the
  brokers' first lives are in it;
* requests are numbered in the order of their ``Put`` steps; a ``ReplicaAck`` that covers nothing
  new in the spec's terms, and a ``ReplicaDisconnect`` of a connection the spec already dropped,
  are no steps.

Malformed files raise ProcTraceError (file:line).  A step that no order can place (a request
never put) is written as it is: the check then reports it as the step no behaviour explains.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict, deque
from collections.abc import Iterable
from pathlib import Path

import attrs

from spec.config import ConfigError
from spec.failover.config import FAILOVER_BUG_NAMES
from spec.failover.tracecheck import MAX_BROKERS, MAX_LINE_CHARS, MAX_STEPS, VERSION, header

MODEL = "failover-process"
BROKER = re.compile(r"b[1-9][0-9]{0,8}")
CONTROLLER, CHAOS = "controller", "chaos"
BROKER_STEPS = {
    "Put": {"req"}, "Respond": {"req"}, "Timeout": {"req"}, "ReplicaConnect": {"slave", "records"},
    "ReplicaAck": {"slave", "claim"}, "ReplicaDisconnect": {"slave"}, "ShrinkSyncStateSet": {"member"},
    "ExpandSyncStateSet": {"member"}, "ChangeSyncStateSet": set(), "Transfer": {"records"}, "Connect": set(),
    "ChangeToMaster": {"epoch"}, "ChangeToSlave": {"epoch", "master"}, "Received": {"records"},
}
CONTROLLER_STEPS = {"FirstMaster": {"group", "master", "alive"},
                    "ElectMaster": {"group", "master", "epoch", "alive"},
                    "AlterSyncStateSet": {"group", "master", "accepted", "alive"}}
CHAOS_STEPS = {"UnreplicatedTail": {"broker", "records"}}
MASTER, SLAVE = "master", "slave"


class ProcTraceError(ConfigError):
    """A malformed process trace: the file and line, and what is wrong there."""


@attrs.frozen
class Line:
    t_ns: int
    process: str
    life: int                 # which start of the process (1: the first)
    step: str
    fields: dict
    order: tuple              # (file number, line number): ties of the stamp keep the files' order
    where: str


@attrs.frozen
class Merged:
    brokers: tuple[str, ...]
    initial_master: str
    bugs: tuple[str, ...]
    labels: tuple[str, ...]
    processes: tuple[str, ...]

    def text(self, source: str = "") -> str:
        out = [header(self.brokers, self.initial_master, self.bugs, source)]
        out += [json.dumps({"step": k, "action": label}, separators=(",", ":")) + "\n"
                for k, label in enumerate(self.labels, start=1)]
        return "".join(out)


def _int(v) -> bool:
    return type(v) is int and v >= 0


def _check_fields(obj: dict, step: str, expected: set, where: str) -> None:
    fields = set(obj) - {"t_ns", "step"}
    if fields != expected:
        raise ProcTraceError(f"{where}: {step} has the fields {', '.join(sorted(expected)) or 'none'} "
                             f"(got {', '.join(sorted(fields)) or 'none'})")
    for name in ("req", "records", "claim", "epoch"):
        if name in expected and not _int(obj[name]):
            raise ProcTraceError(f"{where}: {name}: expected a non-negative integer")
    for name in ("slave", "member", "broker"):
        if name in expected and not (isinstance(obj[name], str) and BROKER.fullmatch(obj[name])):
            raise ProcTraceError(f"{where}: {name}: expected a broker name such as b2")
    if "master" in expected and not (isinstance(obj["master"], str)
                                     and (BROKER.fullmatch(obj["master"]) or (obj["master"] == "none"
                                                                             and step == "ElectMaster"))):
        raise ProcTraceError(f"{where}: master: expected a broker name such as b1"
                             + (" (or none)" if step == "ElectMaster" else ""))
    if "group" in expected and not isinstance(obj["group"], str):
        raise ProcTraceError(f"{where}: group: expected a text")
    if "alive" in expected and not (isinstance(obj["alive"], list)
                                    and all(isinstance(b, str) and BROKER.fullmatch(b) for b in obj["alive"])):
        raise ProcTraceError(f"{where}: alive: expected a list of broker names")
    if "accepted" in expected and type(obj["accepted"]) is not bool:
        raise ProcTraceError(f"{where}: accepted: expected true or false")


def read_process_file(lines: Iterable[str], name: str, number: int) -> tuple[str, list[Line], set[str]]:
    """(process, its lines with the life each belongs to, the bug switches it ran with).  ``lines``
    are split on "\n" only; a line that is not JSON is forgiven only as the last of a life (a kill
    cut it short: the file ends, or the next life's header follows)."""
    process, life, out, bugs = None, 0, [], set()
    last_t = -1
    lines = list(lines)
    for n, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        where = f"{name}:{n}"
        if len(raw) > MAX_LINE_CHARS:
            raise ProcTraceError(f"{where}: line longer than {MAX_LINE_CHARS} characters")
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError) as err:
            following = next((x for x in lines[n:] if x.strip()), None)
            if following is None or following.startswith('{"ackorder_trace"'):
                continue            # the last line of a killed life, cut short: not a step
            raise ProcTraceError(f"{where}: invalid JSON: {str(err)[:120]}") from None
        if not isinstance(obj, dict) or not _int(obj.get("t_ns")):
            raise ProcTraceError(f"{where}: expected a JSON object with t_ns (a non-negative integer)")
        if obj["t_ns"] < last_t:
            raise ProcTraceError(f"{where}: t_ns {obj['t_ns']} is before the line above ({last_t}): "
                                 "one process's stamps never go back")
        last_t = obj["t_ns"]
        if "ackorder_trace" in obj:
            if obj.get("ackorder_trace") != VERSION or obj.get("model") != MODEL:
                raise ProcTraceError(f"{where}: expected a failover process header (model {MODEL!r}, "
                                     f"version {VERSION})")
            p = obj.get("process")
            if not (isinstance(p, str) and (BROKER.fullmatch(p) or p in (CONTROLLER, CHAOS))):
                raise ProcTraceError(f"{where}: process: expected a broker name (b1...), controller or chaos")
            if process is not None and p != process:
                raise ProcTraceError(f"{where}: process {p!r} in the file of {process!r}")
            b = obj.get("bugs", [])
            if not (isinstance(b, list) and all(isinstance(x, str) and x in FAILOVER_BUG_NAMES for x in b)):
                raise ProcTraceError(f"{where}: bugs: expected a list of failover bug switch names")
            if p == CONTROLLER and process is not None:
                raise ProcTraceError(f"{where}: the controller started again: a history of one controller "
                                     "life only (its metadata's restart is not traced yet)")
            bugs |= set(b)
            records = obj.get("records")
            if records is not None and not _int(records):
                raise ProcTraceError(f"{where}: records: expected a non-negative integer")
            process, life = p, life + 1
            if life > 1:
                out.append(Line(obj["t_ns"], p, life, "Start", {} if records is None else {"records": records},
                                (number, n), where))
            continue
        if process is None:
            raise ProcTraceError(f"{where}: a step before the file's header line")
        step = obj.get("step")
        if not isinstance(step, str):
            raise ProcTraceError(f"{where}: step: expected the name of a step")
        table = BROKER_STEPS if BROKER.fullmatch(process) else CONTROLLER_STEPS if process == CONTROLLER \
            else CHAOS_STEPS
        if step not in table:
            raise ProcTraceError(f"{where}: step {step!r}: not a step of a {process} "
                                 f"({', '.join(sorted(table))})")
        _check_fields(obj, step, table[step], where)
        out.append(Line(obj["t_ns"], process, life, step,
                        {k: v for k, v in obj.items() if k not in ("t_ns", "step")}, (number, n), where))
    if process is None:
        raise ProcTraceError(f"{name}: no header line")
    return process, out, bugs


class _Merge:
    def __init__(self, lines: list[Line], brokers: tuple[str, ...], first: Line) -> None:
        self.brokers = brokers
        self.initial = first.fields["master"]
        self.lines = lines
        self.labels: list[str] = []
        self.up = {b: True for b in brokers}
        self.reachable = {b: True for b in brokers}
        self.role = {b: MASTER if b == self.initial else SLAVE for b in brokers}
        self.follows: dict[str, str | None] = {b: self.initial for b in brokers}
        self.connected = {b: False for b in brokers}
        self.slen = {b: 0 for b in brokers}          # the spec's log length of a slave, as merged
        self.sack = {b: 0 for b in brokers}
        self.life = {b: 1 for b in brokers}
        self.pending: dict[str, deque[Line]] = defaultdict(deque)
        self.requests: dict[tuple, int] = {}
        self.puts = 0
        self.used: set[tuple] = set()               # lines already placed out of their turn
        self.by_process: dict[str, list[Line]] = defaultdict(list)
        for line in lines:
            self.by_process[line.process].append(line)
        self.position = {p: 0 for p in self.by_process}
        self.last_of_life: dict[tuple[str, int], tuple] = {}
        self.tails: dict[tuple[str, int], int] = defaultdict(int)
        for line in lines:
            if line.process in brokers and line.step != "Start":
                self.last_of_life[(line.process, line.life)] = line.order
        self.dead: set[str] = set()                  # its life ended; its crash not placed yet
        self.role_steps: set[str] = set()            # brokers that took a role step (Init's come first)
        self.alter_pending = {b: False for b in brokers}
        self.received: dict[tuple[str, int], int] = defaultdict(int)    # (slave, life) -> records it holds, parsed
        self.recovered = {(x.process, x.life): x.fields["records"] for x in lines
                          if x.step == "Start" and "records" in x.fields}

    def emit(self, label: str) -> None:
        if len(self.labels) >= MAX_STEPS:
            raise ProcTraceError(f"the merged trace has more than {MAX_STEPS} steps: trace a shorter run")
        self.labels.append(label)

    def put(self, b: str) -> int:
        self.puts += 1
        self.emit(f"Put({b})")
        return self.puts

    # ------------------------------------------------------------------ placement rules

    def flush(self, s: str, upto_claim: int | None = None) -> None:
        """A slave's records received so far, in order (up to the claim ``upto_claim``)."""
        queue = self.pending[s]
        while queue and (upto_claim is None or self.slen[s] < upto_claim):
            queue.popleft()
            self.slen[s] += 1
            self.emit(f"Transfer({s})")

    def flush_in_flight(self, s: str) -> None:
        """Before the master ends s's connection: what s received and will still receive on it (its
        next lines that are records, up to its next step of another kind)."""
        self.flush(s)
        lines, k = self.by_process.get(s, []), self.position.get(s, 0)
        while k < len(lines) and lines[k].step in ("Transfer", "Received"):
            if lines[k].step == "Transfer" and lines[k].order not in self.used:
                self.used.add(lines[k].order)
                self.slen[s] += 1
                self.emit(f"Transfer({s})")
            elif lines[k].step == "Received":
                self.received[(s, lines[k].life)] = lines[k].fields["records"]
            k += 1
        if k < len(lines) and lines[k].step == "Start":
            self.unlined(s, lines[k].fields.get("records"))

    def unlined(self, s: str, recovered: int | None) -> None:
        """The records s's next life recovers that no line of this life counted: written to its page
        cache after the last line its tracer wrote (a kill between a write and its line) — never
        more than this life received (its ``Received`` lines): beyond that, what a restart finds is
        not the master's (a cut that did not last, BugTruncateNotDurable) and is left to the check."""
        if recovered is None:
            return
        recovered = min(recovered, self.received[(s, self.life[s])])
        while self.slen[s] < recovered:
            self.slen[s] += 1
            self.emit(f"Transfer({s})")

    def serves(self, m: str, s: str) -> bool:
        """Whether, as merged so far, m is a master that s follows (whose connection the spec has)."""
        return self.up[m] and self.role[m] == MASTER and self.follows.get(s) == m

    def slaves_of(self, m: str) -> list[str]:
        return [s for s in self.brokers if s != m and self.follows[s] == m and self.role[s] == SLAVE and self.up[s]]

    def crash(self, b: str) -> None:
        """Place the crash of b, whose life has ended."""
        self.dead.discard(b)
        self.alter_pending[b] = False
        if self.role[b] == MASTER:
            for s in self.slaves_of(b):
                if self.connected[s]:
                    self.flush_in_flight(s)
        self.flush(b)
        m = self.follows[b]
        if self.role[b] == SLAVE and self.connected[b] and m is not None and self.up[m]:
            self.unlined(b, self.recovered.get((b, self.life[b] + 1)))
        for _ in range(self.tails.pop((b, self.life[b]), 0)):
            self.put(b)          # written into its page cache by the harness: never answered
        self.emit(f"BrokerCrash({b})")
        if self.role[b] == MASTER:
            for s in self.slaves_of(b):
                self.connected[s] = False
        self.up[b], self.role[b], self.follows[b], self.connected[b] = False, SLAVE, None, False

    def reach(self, b: str) -> None:
        """b talks to the controller: it is reachable."""
        if self.up[b] and not self.reachable[b]:
            self.reachable[b] = True
            self.emit(f"ReconnectToController({b})")

    def controller_view(self, alive: list[str], keep: str | None = None) -> None:
        for b in self.brokers:
            if b in alive or b == keep:
                self.reach(b)
            elif b in self.dead:
                self.crash(b)
            elif self.up[b] and self.reachable[b]:
                self.reachable[b] = False
                self.emit(f"CutFromController({b})")

    # ------------------------------------------------------------------ the walk

    def run(self) -> list[str]:
        for line in self.lines:
            self.position[line.process] += 1
            if line.order not in self.used:
                self.take(line)
            if line.process in self.life and self.last_of_life.get((line.process, line.life)) == line.order:
                self.dead.add(line.process)
        for b in self.brokers:
            self.flush(b)
        return self.labels

    def take(self, line: Line) -> None:
        f, p = line.fields, line.process
        if p == CHAOS:
            return                              # read before the walk (tails)
        if p == CONTROLLER:
            if line.step == "FirstMaster":
                return                          # the spec's Init (only the first counts)
            if line.step == "ElectMaster":
                self.controller_view(f["alive"])
                self.emit("ElectMaster")
            else:
                m = f["master"]
                if not self.alter_pending[m] and not f["accepted"]:
                    return                      # a resent proposal the controller had decided already
                self.controller_view(f["alive"], keep=m)
                self.alter_pending[m] = False
                self.emit(f"AlterSyncStateSet({m})")
            return
        step = line.step
        if step == "Start":
            if self.up[p]:
                self.crash(p)                  # not placed yet: the controller never counted it dead
            self.life[p] = line.life
            self.up[p], self.slen[p], self.sack[p] = True, 0, 0
            self.emit(f"BrokerRestart({p})")
            return
        if step == "Transfer":
            self.pending[p].append(line)
            return
        if step == "Received":
            self.received[(p, line.life)] = f["records"]
            return
        if step == "Connect":
            return                              # a note: the old connection's records go at its end
        self.flush(p)                           # the process's own order
        # Init holds the epoch-1 roles: a first life's first role step in epoch 1 is Init's, no other
        in_init = line.life == 1 and p not in self.role_steps and f.get("epoch") == 1
        if step in ("ChangeToMaster", "ChangeToSlave"):
            self.role_steps.add(p)
        if step == "Put":
            self.requests[(p, line.life, f["req"])] = self.put(p)
        elif step in ("Respond", "Timeout"):
            i = self.requests.get((p, line.life, f["req"]))
            self.emit(f"{step}({i if i is not None else 0})")
        elif step in ("ReplicaConnect", "ReplicaAck", "ReplicaDisconnect") and not self.serves(p, f["slave"]):
            # a master the spec no longer has serving s (deposed, or s follows another): no step
            # of the spec is this master's connection to s; what it did with it is judged at its answers
            return
        elif step == "ReplicaConnect":
            s = f["slave"]
            self.flush(s)
            self.connected[s] = True
            self.slen[s] = self.sack[s] = f["records"]
            self.emit(f"ReplicaConnect({s})")
        elif step == "ReplicaAck":
            s = f["slave"]
            self.flush(s, upto_claim=f["claim"])
            # the spec's ack is the slave's whole log: only when that is no more than the report claims
            if self.sack[s] < self.slen[s] <= f["claim"]:
                self.sack[s] = self.slen[s]
                self.emit(f"ReplicaAck({s})")
        elif step == "ReplicaDisconnect":
            s = f["slave"]
            self.flush_in_flight(s)
            if self.connected[s]:
                self.connected[s], self.sack[s] = False, 0
                self.emit(f"ReplicaDisconnect({s})")
        elif step == "ChangeToMaster":
            if in_init and p == self.initial:
                return                          # in Init
            self.reach(p)
            if self.role[p] != MASTER:
                self.connected[p] = False
            self.role[p], self.follows[p] = MASTER, p
            self.emit(f"ChangeToMaster({p})")
        elif step == "ChangeToSlave":
            m = f["master"]
            if in_init and m == self.initial:
                return                          # in Init
            self.reach(p)
            if self.role[p] == MASTER:
                for s in self.slaves_of(p):
                    if self.connected[s]:
                        self.flush_in_flight(s)
                        self.connected[s] = False
            if not (self.role[p] == SLAVE and self.follows[p] == m):
                self.connected[p] = False
            self.role[p], self.follows[p] = SLAVE, m
            self.emit(f"ChangeToSlave({p})")
        elif step in ("ShrinkSyncStateSet", "ExpandSyncStateSet"):
            self.alter_pending[p] = True
            self.emit(f"{step}({p},{f['member']})")
        elif step == "ChangeSyncStateSet":
            self.reach(p)
            self.emit(f"ChangeSyncStateSet({p})")


def merge_process_traces(named: list[tuple[str, Iterable[str]]]) -> Merged:
    """The per-process files (name, lines) of one run, as one failover trace's steps."""
    lines: list[Line] = []
    processes: list[str] = []
    bugs: set[str] = set()
    for number, (name, content) in enumerate(named):
        process, got, b = read_process_file(content, name, number)
        if process in processes:
            raise ProcTraceError(f"{name}: a second file of process {process}")
        processes.append(process)
        lines += got
        bugs |= b
    if CONTROLLER not in processes:
        raise ProcTraceError("no controller file among the process traces: its FirstMaster is the spec's Init")
    lines.sort(key=lambda x: (x.t_ns, x.order))
    firsts = [x for x in lines if x.step == "FirstMaster"]
    if not firsts:
        raise ProcTraceError("the controller's file has no FirstMaster: the run never elected a first master")
    if len(firsts) > 1:
        raise ProcTraceError(f"{firsts[1].where}: a second FirstMaster: the files of one run, one group")
    first = firsts[0]
    early = next((x for x in lines if (x.t_ns, x.order) < (first.t_ns, first.order) and x.process != CHAOS), None)
    if early is not None:
        raise ProcTraceError(f"{early.where}: a step before the controller's first registration (FirstMaster): "
                             "the files of one run, from its start")
    named_brokers = {x for x in processes if BROKER.fullmatch(x)} | {first.fields["master"]}
    for x in lines:
        named_brokers |= set(x.fields.get("alive", ())) | {x.fields[k] for k in ("slave", "member", "broker", "master")
                                                           if k in x.fields and x.fields[k] != "none"}
    brokers = tuple(sorted(named_brokers, key=lambda b: int(b[1:])))
    missing = [b for b in brokers if b not in processes]
    if missing:
        raise ProcTraceError(f"no file of {', '.join(missing)}, which the run's files name: give every process's "
                             "file of the run (a broker's steps cannot be left out of its history)")
    if not 2 <= len(brokers) <= MAX_BROKERS:
        raise ProcTraceError(f"{len(brokers)} brokers named; a failover trace has 2..{MAX_BROKERS}")
    groups = {x.fields["group"] for x in lines if "group" in x.fields}
    if len(groups) > 1:
        raise ProcTraceError(f"the controller decided for {len(groups)} groups: merge the files of one group")
    walk = [x for x in lines if (x.t_ns, x.order) >= (first.t_ns, first.order)]
    merge = _Merge(walk, brokers, first)
    for x in lines:
        if x.step == "UnreplicatedTail":
            b = x.fields["broker"]
            life = max((y.life for y in lines if y.process == b and y.t_ns <= x.t_ns), default=1)
            merge.tails[(b, life)] += x.fields["records"]
    labels = merge.run()
    return Merged(brokers, first.fields["master"], tuple(sorted(bugs)), tuple(labels), tuple(processes))


def merge_files(paths: list[Path]) -> Merged:
    named = []
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8")
            named.append((str(path), [line + "\n" for line in text.split("\n")[:-1]] + [text.rsplit("\n", 1)[-1]]))
        except OSError as err:
            raise ProcTraceError(f"{path}: cannot read: {err.strerror}") from None
        except UnicodeDecodeError as err:
            raise ProcTraceError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    return merge_process_traces(named)
