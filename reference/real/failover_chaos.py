"""`ackorder chaos --failover` as a library: a controller and three broker
nodes (reference/real/node.py) on loopback under SYNC_FLUSH + SYNC_MASTER +
ALL_IN_SYNC load from the failover load client (reference/real/failover_load.py);
the current master is killed with SIGKILL at seeded random moments and
restarted on its directory (it rejoins as a slave and truncates), and killed
and restarted once more right after its cut (the cut must survive a crash).

After each election:

* every acknowledged message (key -> its bytes at its offset) must be in
  the new master's log (``lost``, ``corrupt``);
* the killed broker, restarted, must catch up and rejoin the SyncStateSet,
  and every acknowledged message its log reaches must be there, intact:
  a deposed master that kept a diverged tail fails this (``diverged``);
* the failover time is measured: master killed -> first PUT_OK from the new
  master (p50/p99 over the run).

``slow_member_lag_ms`` (``--slow-member-lag-ms``): every master's DATA to b3
leaves that late (a slow link, ``--inject-ha-lag-ms``), and the kill takes the
other slave and then, once the controller counts it dead, the master, so b3,
the one live SyncStateSet member, must take over (killed together, the
controller may elect the dead fast slave, and electing resets the
SyncStateSet to the one elected: the group would be stuck).  ALL_IN_SYNC
promises it holds every PUT_OK; BugNoAllAck (acks without the slaves) breaks
that and loses what b3 had not been sent yet.  One
failover only: afterwards b3 is the master and no link is slow.

Duplicates are allowed (the client resends the same key after an error:
at-least-once); loss and divergence are not.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import signal
import tempfile
import time
from pathlib import Path
from collections.abc import Callable

import attrs

import reference
from reference.bench.procs import Broker
from reference.failover.bugs import check_bugs
from reference.real.chaos import ChaosAborted, _free_ports, check_log
from reference.real.chaos_reach import CHAOS_CONTROLLER_BUGS, check_failover_reach
from reference.real.disk import SegmentStore
from reference.real.load import body_for
from reference.record import END_FILE_MIN_BLANK_LENGTH, encode, record_size, recover_log
from reference.real.controller_client import ControllerClient, ControllerClientError
from reference.real.failover_load import AckedAt, FailoverConsumer, FailoverLoad
from reference.real.options import MAX_HA_LAG_MS, check_segment_room
from spec.config import ConfigError

NODES = 3
GROUP = "broker-a"
TREE = Path(reference.__file__).resolve().parents[1]     # children run this very source tree
SETTLE_TIMEOUT_S = 30.0
FAILOVER_TIMEOUT_S = 30.0
SLOW_MEMBER = NODES          # --slow-member-lag-ms: the broker whose link lags
SLOW_MEMBER_STAYS_LAGS = 30  # the slow member's haMaxTimeSlaveNotCatchup, in lags
DEFAULT_SHRINK_AFTER_MS = 1_000   # a killed member leaves the SyncStateSet after this
PAUSE_MARGIN_MS = 1_000      # --pause-member-ms beyond haMaxTimeSlaveNotCatchup: a few SyncStateSet checks
MAX_PAUSE_MS = 60_000
MAX_CHAOS_CONTROLLERS = 5
CONTROLLER_LEASE_TTL_S = 2   # the controllers' etcd lease in a chaos run: a dead one's shards move after 2 s
# --controllers: each round one fault while the master lives (its group's shard may move: the takeover
# grace; a paused owner: its lease), and one during the failover (the election runs through it)
FAULTS_BEFORE = ("none", "controller", "etcd-leader", "etcd-follower", "pause-owner")
FAULTS_DURING = ("controller", "etcd-leader", "controller+etcd-leader")
TAIL_KEY_BASE = 10**15       # keys of the unreplicated tail: never sent by a producer, never acknowledged


@attrs.frozen
class FailoverChaosOptions:
    failovers: int = 10
    seed: int = 0
    producers: int = 8
    size: int = 200
    segment_bytes: int = 256 * 1024
    min_load_s: float = 0.2
    max_load_s: float = 1.0
    controller_heartbeat_timeout_ms: int = 1_000   # controllerHeartBeatTimeoutMills, short for a chaos run
    node_heartbeat_interval_ms: int = 200
    shrink_after_ms: int | None = None     # the nodes' --shrink-after-ms (None: node_shrink_after_ms's rule)
    settle_timeout_s: float = SETTLE_TIMEOUT_S    # how long a restarted broker may take to rejoin the SSS
    directory: Path | None = None
    keep: bool = False
    failover_bugs: tuple[str, ...] = ()
    slow_member_lag_ms: int = 0     # b3's link lags; the other slave is killed, then the master
    peer_secret_file: Path | None = None   # the controller and the nodes authenticate each other with it
    failover_trace: Path | None = None     # --failover-trace: the run's history as one AckOrderFailover trace
    pause_member_ms: int = 0    # each round first stops a slave (SIGSTOP) this long: a GC pause, a stuck disk
    controllers: int = 1        # > 1: that many controllers over a 3-member etcd (`controller --etcd`), and
                                # each round kills a controller and/or an etcd member (the leader too)
    controller_bugs: tuple[str, ...] = ()   # --controller-bug: the controllers' seeded defect (SHARD_BUG_NAMES)
    # --nemesis: every link through the fault proxy (reference/real/netfault.py) and, instead of the
    # kill rounds, a fault of these kinds (reference/real/nemesis.py) every interval for duration_s
    nemesis: tuple[str, ...] = ()
    nemesis_interval_s: float = 3.0     # mean load between a heal's checks and the next fault
    duration_s: float = 60.0
    unavailable_ms: int = 1_000         # no PUT_OK for longer than this is an unavailability window
    report_dir: Path | None = None      # --report: report.md, report.html, report.json, latency.png

    @property
    def node_shrink_after_ms(self) -> int:
        """haMaxTimeSlaveNotCatchup of the nodes: short, so a killed member leaves the SyncStateSet
        soon; with a slow member, long beside its lag (RocketMQ's 15 s against a lag of
        milliseconds), so the slow member stays in the set, which is what that run is about."""
        if self.shrink_after_ms is not None:
            return self.shrink_after_ms
        return max(DEFAULT_SHRINK_AFTER_MS, SLOW_MEMBER_STAYS_LAGS * self.slow_member_lag_ms)

    @property
    def peer_secret(self) -> bytes | None:
        from reference.real.peerauth import load_secret

        return load_secret(self.peer_secret_file) if self.peer_secret_file is not None else None

    def __attrs_post_init__(self) -> None:
        if self.failovers < 1:
            raise ConfigError(f"--failovers {self.failovers}: at least one failover")
        if self.producers < 1 or self.size < 1:
            raise ConfigError("--producers and --size must be positive")
        if not 0 < self.min_load_s <= self.max_load_s:
            raise ConfigError("the load time before a kill must be positive (min <= max)")
        check_bugs(self.failover_bugs)
        if not self.settle_timeout_s > 0:
            raise ConfigError(f"--settle-timeout-s {self.settle_timeout_s}: must be positive")
        check_segment_room(self.segment_bytes, self.size)
        if not 0 <= self.slow_member_lag_ms <= MAX_HA_LAG_MS:
            raise ConfigError(f"--slow-member-lag-ms {self.slow_member_lag_ms}: 0..{MAX_HA_LAG_MS}")
        if self.peer_secret_file is not None:
            self.peer_secret          # a file that is missing, open to others or too short: said now
        if self.nemesis:
            from reference.real.chaos_reach import check_nemesis_reach
            from reference.real.nemesis import NEMESES

            if bad := set(self.nemesis) - set(NEMESES):
                raise ConfigError(f"--nemesis {', '.join(sorted(bad))}: one of {', '.join(NEMESES)}")
            if self.failover_trace is not None:
                # the spec's HA connection is one bit both ends share, and its ack is sent and received in one
                # step: a slave's ack held by a partition and received after the slave's promotion has no spec
                # step, so the history of a correct run can be rejected (2 of 8 partition seeds did)
                raise ConfigError("--failover-trace with --nemesis: a partition can hold an ack past its slave's "
                                  "promotion, which AckOrderFailover cannot express yet, so a correct run's history "
                                  "may be rejected (docs/chaos.md); run --failover-trace without --nemesis")
            if self.slow_member_lag_ms or self.pause_member_ms or self.controller_bugs:
                raise ConfigError("--nemesis: not with --slow-member-lag-ms, --pause-member-ms or --controller-bug "
                                  "(the nemeses are the run's faults)")
            if not 1 <= self.duration_s <= 7 * 86_400 or not 0.2 <= self.nemesis_interval_s <= 600:
                raise ConfigError(f"--duration-s {self.duration_s:g} (1..604800) and --nemesis-interval-s "
                                  f"{self.nemesis_interval_s:g} (0.2..600)")
            if not 100 <= self.unavailable_ms <= 600_000:
                raise ConfigError(f"--unavailable-ms {self.unavailable_ms}: 100..600000")
            check_nemesis_reach(self.failover_bugs, self.nemesis, self.failover_trace is not None)
        else:
            check_failover_reach(self.failover_bugs, self.slow_member_lag_ms, self.failover_trace is not None,
                                 self.pause_member_ms)
        if self.slow_member_lag_ms and self.failovers != 1:
            # once the slow member is master no link is slow; and killed as master it would restart
            # as a lagging slave that never holds every acknowledged message under load (the
            # expansion's guard), so it could not rejoin
            raise ConfigError(f"--slow-member-lag-ms with --failovers {self.failovers}: one failover only")
        if not 1 <= self.controllers <= MAX_CHAOS_CONTROLLERS:
            raise ConfigError(f"--controllers {self.controllers}: 1..{MAX_CHAOS_CONTROLLERS}")
        if self.controllers > 1 and (self.slow_member_lag_ms or self.failover_trace is not None or self.failover_bugs):
            # a follower read names nobody alive (the slow-member run waits on that), and the spec's
            # trace of a run has one controller
            raise ConfigError(f"--controllers {self.controllers}: not with --slow-member-lag-ms, --failover-trace "
                              "or --failover-bug")
        if self.controller_bugs and (self.controllers < 2 or not set(self.controller_bugs) <= set(CHAOS_CONTROLLER_BUGS)):
            raise ConfigError(f"--controller-bug {', '.join(self.controller_bugs)}: needs --controllers 2 or more; "
                              f"a chaos run can catch {', '.join(CHAOS_CONTROLLER_BUGS)} (the fence bugs "
                              "of a commit without its compares need a stale write the real etcd test times: "
                              "reference/tests/test_controller_cluster.py)")
        if self.pause_member_ms:
            if self.slow_member_lag_ms:
                raise ConfigError("--pause-member-ms and --slow-member-lag-ms: one at a time")
            least = self.node_shrink_after_ms + PAUSE_MARGIN_MS
            if not least <= self.pause_member_ms <= MAX_PAUSE_MS:
                # shorter, the paused member is never dropped: the run would not exercise the shrink it is for
                raise ConfigError(f"--pause-member-ms {self.pause_member_ms}: {least}..{MAX_PAUSE_MS} (the nodes drop "
                                  f"a member that has not caught up for {self.node_shrink_after_ms} ms, "
                                  f"and check every {self.node_heartbeat_interval_ms} ms)")


@attrs.define
class FailoverRound:
    round: int
    killed: int                  # broker id
    new_master: int
    load_s: float
    failover_ms: float
    acked_total: int
    lost: int
    corrupt: int
    rejoined: bool
    diverged: int
    also_killed: tuple[int, ...] = ()    # --slow-member-lag-ms: the slave killed with the master
    paused: int | None = None            # --pause-member-ms: the slave stopped before the kill
    pause_dropped: bool = False          # ... and whether the controller's SyncStateSet dropped it meanwhile
    control_fault: str = ""              # --controllers: what was killed beside the master (FAULTS_BEFORE, _DURING)


@attrs.define
class FailoverReport:
    options: dict
    rounds: list[FailoverRound] = attrs.Factory(list)
    acked: int = 0
    lost: list[int] = attrs.Factory(list)
    corrupt: list[int] = attrs.Factory(list)
    diverged: list[int] = attrs.Factory(list)     # keys a rejoined broker holds other bytes for
    not_rejoined: list[int] = attrs.Factory(list)  # rounds whose killed broker never caught up
    stuck: str | None = None                       # a failover that never completed
    truncations: int = 0
    consumed: int = 0                              # records a consumer read (below confirmOffset)
    consumed_lost: list[int] = attrs.Factory(list)  # keys a consumer read that a later master lacks
    read_above_confirm: int = 0                    # READ replies with bytes past their confirmOffset
    consumer_bad_records: int = 0                  # records read that no producer sent
    statuses: dict = attrs.Factory(dict)
    resends: int = 0
    seconds: float = 0.0
    trace_steps: int | None = None                 # --failover-trace: the merged trace's steps the spec explains
    trace_rejected: str | None = None              # ... and the first it does not (the twin's verdict)
    two_masters: list[str] = attrs.Factory(list)   # --controllers: epochs etcd's history gives two masters
    epochs_back: list[str] = attrs.Factory(list)   # --controllers: a stored masterEpoch that went back
    control_kills: dict = attrs.Factory(dict)      # --controllers: kills by kind
    live_masters_deposed: list[str] = attrs.Factory(list)   # a running master made slave or re-elected

    @property
    def valid(self) -> bool:
        return not (self.lost or self.corrupt or self.diverged or self.not_rejoined or self.stuck
                    or self.consumed_lost or self.read_above_confirm or self.consumer_bad_records
                    or self.trace_rejected or self.two_masters or self.epochs_back or self.live_masters_deposed)

    def failover_ms(self, q: float) -> float:
        times = sorted(r.failover_ms for r in self.rounds)
        return round(times[min(len(times) - 1, int(q * len(times)))], 1) if times else 0.0

    def to_json(self) -> dict:
        return {"valid": self.valid, "failovers": len(self.rounds), "acked": self.acked, "lost": len(self.lost),
                "corrupt": len(self.corrupt), "diverged": len(self.diverged),
                "not_rejoined": len(self.not_rejoined), "stuck": self.stuck,
                "failover_ms_p50": self.failover_ms(0.50), "failover_ms_p99": self.failover_ms(0.99),
                "failover_ms_max": max((round(r.failover_ms, 1) for r in self.rounds), default=0.0),
                "truncations": self.truncations, "consumed": self.consumed,
                "consumed_lost": len(self.consumed_lost), "read_above_confirm": self.read_above_confirm,
                "consumer_bad_records": self.consumer_bad_records, "resends": self.resends, "statuses": self.statuses,
                "seconds": round(self.seconds, 1), "trace_steps": self.trace_steps,
                "trace_rejected": self.trace_rejected, "two_masters": self.two_masters[:20],
                "epochs_back": self.epochs_back[:20], "live_masters_deposed": self.live_masters_deposed[:20],
                "control_kills": self.control_kills, "lost_keys": self.lost[:50], "corrupt_keys": self.corrupt[:50],
                "diverged_keys": self.diverged[:50], "options": self.options,
                "rounds": [attrs.asdict(r) for r in self.rounds]}


async def _info(port: int, secret: bytes | None) -> dict | None:
    client = await ControllerClient.connect("127.0.0.1", port, secret=secret)
    try:
        return (await asyncio.wait_for(client.get_replica_info(GROUP), 5.0)).get("info")
    finally:
        await client.close()


def replica_info(port, secret: bytes | None = None) -> dict | None:
    """The controller's GetReplicaInfo for the group (None: not answered); with several
    controllers' ports, the first that answers."""
    for p in (port,) if isinstance(port, int) else port:
        try:
            info = asyncio.run(_info(p, secret))
        except (OSError, ControllerClientError, asyncio.TimeoutError):
            continue
        if info is not None:
            return info
    return None


class Cluster:
    """The controller and the three nodes as OS processes, logs under ``work/logs``."""

    def __init__(self, work: Path, opts: FailoverChaosOptions) -> None:
        self.work, self.opts = work, opts
        (work / "logs").mkdir(parents=True, exist_ok=True)
        ports = _free_ports(opts.controllers + 2 * NODES)
        self.controller_ports = [ports[0], *ports[2 * NODES + 1:]]       # the nodes' ports are 1..2 * NODES
        self.controller_port = ports[0]
        self.node_ports = {i: (ports[2 * i - 1], ports[2 * i]) for i in range(1, NODES + 1)}
        self.incarnations = {i: 0 for i in range(1, NODES + 1)}
        self.chaos_trace = None
        self.etcd = None
        self.controllers: dict[int, Broker] = {}
        self.controller_incarnations = [0] * opts.controllers
        self._spawned: dict[str, Broker] = {}      # each process's last life, by name
        self.net = None
        if opts.nemesis:
            self._network()
        if opts.controllers > 1:
            from reference.real.etcd_cluster import EtcdCluster, EtcdClusterError
            try:
                (work / "etcd").mkdir()
                self.etcd = EtcdCluster.start(work / "etcd", 3, *self._etcd_ports())
                self.name_etcd_members()
            except EtcdClusterError as err:
                raise ChaosAborted(str(err)) from None
            for c in range(opts.controllers):
                self.start_controller(c)
        else:
            self.start_single_controller()
        self.nodes: dict[int, Broker] = {}
        for i in range(1, NODES + 1):
            self.start_node(i)

    @property
    def controller(self) -> Broker:
        return self.controllers[0]

    def start_single_controller(self) -> None:
        """The one controller, on its directory (its file store): started again after a kill."""
        from reference.failover.controller import CONTROLLER_BUG_NAMES

        opts = self.opts
        self.controller_incarnations[0] += 1
        label = "controller" if self.controller_incarnations[0] == 1 else \
            f"controller-{self.controller_incarnations[0]:03d}"
        trace = self._trace_flag("controller" if self.controller_incarnations[0] == 1 else label)
        self.controllers[0] = self._spawn(label, ["controller", "--port", str(self.controller_port),
                                                  "--dir", str(self.work / "controller"),
                                                  "--controller-broker-heartbeat-timeout-ms",
                                                  str(opts.controller_heartbeat_timeout_ms),
                                                  *self._secret_flag(), *trace,
                                                  *(f for b in opts.failover_bugs if b in CONTROLLER_BUG_NAMES
                                                    for f in ("--bug", b))],
                                          r"listening host=\S+ port=\d+")

    ETCD_MEMBERS = ("m0", "m1", "m2")

    def _network(self) -> None:
        """--nemesis: the proxy with a link for every (caller, callee) of the run (reference/real/netfault.py):
        the client (producers, consumer) to every controller and broker, each broker to every controller and
        to the others' HA ports; with several controllers, each controller to every etcd member and to the
        other controllers (forwards), and one link into each member's peer port that names its sender."""
        from reference.real.etcd_cluster import free_ports
        from reference.real.netfault import ANY, Link, NetFault
        from reference.real.nemesis import CLIENT

        local = "127.0.0.1"
        controllers = [(f"c{c}", port) for c, port in enumerate(self.controller_ports)]
        links = [Link(CLIENT, name, (local, port)) for name, port in controllers]
        for i, (port, _ha) in self.node_ports.items():
            links += [Link(f"b{i}", name, (local, cport)) for name, cport in controllers]
            links.append(Link(CLIENT, f"b{i}", (local, port)))
            links += [Link(f"b{i}", f"b{j}", (local, ha)) for j, (_p, ha) in self.node_ports.items() if j != i]
        self.etcd_real_ports: list[int] = []
        if self.opts.controllers > 1:
            self.etcd_real_ports = free_ports(2 * len(self.ETCD_MEMBERS))
            for k, member in enumerate(self.ETCD_MEMBERS):
                client_port, peer_port = self.etcd_real_ports[2 * k], self.etcd_real_ports[2 * k + 1]
                links.append(Link(ANY, member, (local, peer_port)))
                links += [Link(name, member, (local, client_port)) for name, _ in controllers]
            links += [Link(a, b, (local, port)) for a, _ in controllers for b, port in controllers if a != b]
        try:
            self.net = NetFault(links, self.work)
        except RuntimeError as err:
            raise ChaosAborted(str(err)) from None

    def name_etcd_members(self) -> None:
        """Tell the proxy the etcd members' process ids (after each start): their peer connections that
        carry no X-PeerURLs (lease keep-alives forwarded to the leader) are named by their sockets."""
        if self.net is not None and self.etcd is not None:
            self.net.name_processes({m.popen.pid: m.name for m in self.etcd.members
                                     if m.popen is not None and m.popen.poll() is None})

    def _etcd_ports(self) -> tuple[list[int] | None, list[int] | None]:
        """The etcd members' real ports and the peer ports they advertise (the proxy's) in a nemesis run."""
        if self.net is None:
            return None, None
        from reference.real.netfault import ANY

        return self.etcd_real_ports, [self.net.port(ANY, m) for m in self.ETCD_MEMBERS]

    @property
    def domain(self) -> tuple[str, ...]:
        """The processes a nemesis partitions, pauses and kills."""
        return (*(f"c{c}" for c in range(self.opts.controllers)), *(f"b{i}" for i in self.node_ports),
                *(self.ETCD_MEMBERS if self.etcd is not None else ()))

    def routes_of(self, process: str) -> dict:
        """Where ``process`` reaches each broker's (and, a controller, each other controller's)
        advertised port: its own link of the proxy."""
        local = "127.0.0.1"
        if self.net is None:
            return {}
        out = {}
        controllers = [f"c{c}" for c in range(len(self.controller_ports))]
        if process in controllers:        # ("client" starts with a c too: an exact name, not a prefix)
            return {(local, port): (local, self.net.port(process, name))
                    for name, port in zip(controllers, self.controller_ports) if name != process}
        for j, (port, ha) in self.node_ports.items():
            if f"b{j}" == process:
                continue
            real = (local, port) if process == "client" else (local, ha)
            out[real] = (local, self.net.port(process, f"b{j}"))
        return out

    @property
    def client_controller(self):
        """Where the producers and the consumer reach the controller (several: each of them)."""
        if self.net is None:
            return self.controller_addresses if self.etcd is not None else ("127.0.0.1", self.controller_port)
        at = [("127.0.0.1", self.net.port("client", f"c{c}")) for c in range(len(self.controller_ports))]
        return at[0] if len(at) == 1 else at

    def start_controller(self, c: int) -> None:
        """Controller ``c`` over the etcd, its own member first (c mod 3)."""
        eps = self.etcd.endpoints.split(",")
        env = None
        if self.net is not None:          # through the proxy: to each etcd member and each other controller
            from reference.real.netroute import ENV, format_routes

            eps = [f"127.0.0.1:{self.net.port(f'c{c}', m)}" for m in self.ETCD_MEMBERS]
            env = {ENV: format_routes(self.routes_of(f"c{c}"))}
        mine = ",".join(eps[c % len(eps):] + eps[:c % len(eps)])
        self.controller_incarnations[c] += 1
        self.controllers[c] = self._spawn(
            f"controller{c}-{self.controller_incarnations[c]:03d}",
            ["controller", "--etcd", mine, "--controller-id", f"c{c}", "--port", str(self.controller_ports[c]),
             "--lease-ttl-s", str(CONTROLLER_LEASE_TTL_S), "--controller-broker-heartbeat-timeout-ms",
             str(self.opts.controller_heartbeat_timeout_ms), *self._secret_flag(),
             *(f for b in self.opts.controller_bugs for f in ("--bug", b))], r"listening host=\S+ port=\d+", env)

    def kill_controller(self, c: int) -> None:
        self.controllers[c].popen.kill()
        self.controllers[c].popen.wait(timeout=10)

    @property
    def controller_addresses(self) -> list[tuple[str, int]]:
        return [("127.0.0.1", p) for p in self.controller_ports]

    def shard_owner(self) -> int | None:
        """The controller that owns the group's shard now (etcd's shard key), if any."""
        from reference.failover import shards as sh

        key = sh.shard_key(sh.shard_of(GROUP, sh.SHARDS_DEFAULT))
        try:
            value = self.etcd.read_prefix(key.decode()).get(key)
        except Exception:       # noqa: BLE001 — no majority right now: no owner known
            return None
        parsed = sh.parse_owner(value) if value is not None else None
        return int(parsed[0][1:]) if parsed is not None else None

    def live_masters_deposed(self) -> list[str]:
        """Broker processes that were master and then, still running, were made slave or elected
        again: an election of a master that never stopped heartbeating.  Every master of a run is
        killed as master; the paused slave of --pause-member-ms is never master."""
        out = []
        for log in sorted((self.work / "logs").glob("b*.log")):
            master_at = None
            for line in log.read_text(errors="replace").splitlines():
                if line.startswith("role MASTER") and "(re-elected)" not in line:
                    master_at = line
                elif master_at and (line.startswith("role SLAVE") or "(re-elected)" in line):
                    out.append(f"{log.stem}: {master_at.split(' from ')[0]}, then {line.split(' from ')[0]}")
                    master_at = None
        return out

    def master_epochs(self) -> tuple[list[str], list[str]]:
        """From etcd's history of the group's key: (epochs held by two masters, epochs that went back)."""
        from reference.failover import shards as sh
        from reference.failover.metadata import scan

        history = self.etcd.history(sh.GROUPS)
        two, back = [], []
        for key, values in history.items():
            if not key.endswith(b"/m"):
                continue
            masters: dict[int, set[int]] = {}
            last = 0
            for v in values:
                got = scan(v).records
                if not got:
                    continue
                r = got[0]
                if r.master_id:
                    masters.setdefault(r.master_epoch, set()).add(r.master_id)
                if r.master_epoch < last:
                    back.append(f"{r.group}: masterEpoch {last} then {r.master_epoch}")
                last = max(last, r.master_epoch)
            two += [f"{key.decode()}: epoch {e} masters {sorted(m)}" for e, m in masters.items() if len(m) > 1]
        return two, back

    def check_etcd_history(self, report: FailoverReport) -> None:
        """With several controllers: etcd's history into ``report`` (two masters in an epoch, epochs back)."""
        if self.etcd is None:
            return
        try:
            report.two_masters, report.epochs_back = self.master_epochs()
        except Exception as err:       # noqa: BLE001 — an unreadable history is a failed check, not a pass
            report.two_masters = [f"etcd's history not read: {type(err).__name__}: {err}"]

    @property
    def traces(self) -> Path:
        return self.work / "traces"

    def _trace_flag(self, process: str) -> list[str]:
        """--failover-trace: each process appends its spec steps to its own file (proctrace.py)."""
        if self.opts.failover_trace is None:
            return []
        self.traces.mkdir(exist_ok=True)
        return ["--failover-trace", str(self.traces / f"{process}.ndjson")]

    def fault(self, step: str, **fields) -> None:
        """A fault the harness itself makes that the spec names (proctrace.py: the chaos file)."""
        if self.opts.failover_trace is None:
            return
        if self.chaos_trace is None:
            from reference.failover.proctrace import ProcessTrace
            self.traces.mkdir(exist_ok=True)
            self.chaos_trace = ProcessTrace(self.traces / "chaos.ndjson", "chaos")
        self.chaos_trace.step(step, **fields)

    def _secret_flag(self) -> list[str]:
        file = self.opts.peer_secret_file
        return ["--peer-secret-file", str(file)] if file is not None else []

    def info(self) -> dict | None:
        return replica_info(self.controller_ports if self.etcd is not None else self.controller_port,
                            self.opts.peer_secret)

    def _spawn(self, label: str, argv: list[str], ready: str, env: dict[str, str] | None = None) -> Broker:
        old = self._spawned.pop(label.split("-")[0], None)
        if old is not None:
            old.stop()           # a killed process's log file: closed before its next life opens another
        proc = Broker(argv, self.work / "logs" / f"{label}.log", tree=TREE, env=env)
        try:
            proc.wait_for(ready)
        except (RuntimeError, TimeoutError) as err:
            proc.stop()
            last = proc.text().strip().splitlines()[-1:] or [str(err)]
            raise ChaosAborted(f"{label} did not start: {last[0]}") from None
        self._spawned[label.split("-")[0]] = proc
        return proc

    def node_dir(self, i: int) -> Path:
        return self.work / f"b{i}"

    def start_node(self, i: int) -> None:
        opts = self.opts
        port, ha_port = self.node_ports[i]
        self.incarnations[i] += 1
        rotated = self.controller_ports[i % len(self.controller_ports):] + self.controller_ports[:i % len(self.controller_ports)]
        env = None
        if self.net is not None:          # through the proxy: to the controller and to each other's HA port
            from reference.real.netroute import ENV, format_routes

            ports = [self.net.port(f"b{i}", f"c{c}") for c in range(len(self.controller_ports))]
            rotated = ports[i % len(ports):] + ports[:i % len(ports)]
            env = {ENV: format_routes(self.routes_of(f"b{i}"))}
        argv = ["broker", "node", "--controller", ",".join(f"127.0.0.1:{p}" for p in rotated), "--id", str(i),
                "--dir", str(self.node_dir(i)), "--port", str(port), "--ha-port", str(ha_port),
                "--heartbeat-interval-ms", str(opts.node_heartbeat_interval_ms),
                "--shrink-after-ms", str(opts.node_shrink_after_ms),
                "--mapped-file-size-commit-log", str(opts.segment_bytes),
                "--max-message-size", str(opts.size + 64), *self._secret_flag(), *self._trace_flag(f"b{i}")]
        for bug in opts.failover_bugs:
            argv += ["--failover-bug", bug]
        if opts.slow_member_lag_ms and i != SLOW_MEMBER:
            argv += ["--inject-ha-lag-ms", str(opts.slow_member_lag_ms), "--inject-ha-lag-to", str(SLOW_MEMBER)]
        self.nodes[i] = self._spawn(f"b{i}-{self.incarnations[i]:03d}", argv, r"node b\d+ serving", env)

    def kill(self, i: int) -> None:
        self.nodes[i].popen.kill()
        self.nodes[i].popen.wait(timeout=10)

    def pause(self, i: int, pause_s: float) -> bool:
        """SIGSTOP node ``i`` for ``pause_s`` (its connections stay open, as in a long GC pause), then
        SIGCONT: whether the controller's SyncStateSet dropped it meanwhile (haMaxTimeSlaveNotCatchup)."""
        popen = self.nodes[i].popen
        popen.send_signal(signal.SIGSTOP)
        dropped = False
        try:
            deadline = time.monotonic() + pause_s
            while (left := deadline - time.monotonic()) > 0:
                info = self.info()
                dropped = dropped or (info is not None and i not in info["sync_state_set"])
                time.sleep(min(0.1, max(left, 0)))
        finally:
            popen.send_signal(signal.SIGCONT)
        return dropped

    def settled(self) -> dict | None:
        """Wait until a master serves with every node in its SyncStateSet (what a kill needs to
        be survivable under ALL_IN_SYNC); None when that did not happen in time."""
        deadline = time.monotonic() + self.opts.settle_timeout_s
        while time.monotonic() < deadline:
            info = self.info()
            if info and info["master_id"] and len(info["sync_state_set"]) == NODES:
                return info
            time.sleep(0.05)
        return None

    def truncations(self) -> int:
        return sum(p.read_text().count("truncated the log at") for p in (self.work / "logs").glob("b*.log"))

    def stop(self) -> None:
        for proc in [*self.nodes.values(), *self.controllers.values()]:
            proc.stop()
        if self.etcd is not None:
            self.etcd.stop()
        if self.net is not None:
            self.net.close()
        if self.chaos_trace is not None:
            self.chaos_trace.close()

    def write_failover_trace(self, out: Path):
        """The processes' files merged into one AckOrderFailover trace (spec/failover/procmerge.py),
        written to ``out`` and checked by the twin: its verdict (spec/failover/tracecheck.py)."""
        from spec.failover.procmerge import merge_files
        from spec.failover.tracecheck import check_failover_lines

        merged = merge_files(sorted(self.traces.glob("*.ndjson")))
        text = merged.text(f"chaos --failover --seed {self.opts.seed}")
        out.write_text(text, encoding="utf-8")
        return check_failover_lines(text.splitlines(keepends=True), str(out))


def run_failover_chaos(opts: FailoverChaosOptions,
                       progress: Callable[[int, str], None] = lambda n, text: None) -> FailoverReport:
    if opts.nemesis:
        from reference.real.nemesis_chaos import run_nemesis_chaos

        return run_nemesis_chaos(opts, progress)
    rng = random.Random(opts.seed)
    work = Path(opts.directory) if opts.directory else Path(tempfile.mkdtemp(prefix="ackorder-failover-"))
    if opts.directory and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    report = FailoverReport(options={k: (str(v) if isinstance(v, Path) else v)
                                     for k, v in attrs.asdict(opts).items()})
    started = time.monotonic()
    cluster = load = consumer = None
    try:
        cluster = Cluster(work, opts)
        progress(0, "waiting for the first SyncStateSet")
        if cluster.settled() is None:
            raise ChaosAborted("the three nodes did not form a SyncStateSet within "
                               f"{opts.settle_timeout_s:.0f} s (see {work / 'logs'})")
        where = cluster.controller_addresses if cluster.etcd is not None else ("127.0.0.1", cluster.controller_port)
        load = FailoverLoad(where, GROUP, opts.producers, opts.size, secret=opts.peer_secret)
        load.start()
        consumer = FailoverConsumer(where, GROUP, opts.size, opts.segment_bytes, secret=opts.peer_secret)
        consumer.start()
        for n in range(1, opts.failovers + 1):
            info = cluster.settled()
            if info is None:
                _not_settled(cluster, report, load, f"round {n}")
                break
            if report.rounds:
                _check_rejoined(cluster, report, load)
            paused = dropped = None
            if opts.pause_member_ms:
                paused = rng.choice(sorted(b for b in info["sync_state_set"] if b != info["master_id"]))
                progress(n - 1, f"SIGSTOP b{paused} for {opts.pause_member_ms} ms")
                dropped = cluster.pause(paused, opts.pause_member_ms / 1000)
                if not dropped:
                    # the run is for the drop: one that never came exercised nothing it claims to
                    report.stuck = (f"round {n}: b{paused} was stopped {opts.pause_member_ms} ms and the "
                                    "SyncStateSet never dropped it")
                    break
                info = cluster.settled()
                if info is None:
                    report.stuck = (f"round {n}: b{paused} did not rejoin the SyncStateSet within "
                                    f"{opts.settle_timeout_s:.0f} s of the end of its pause")
                    break
            undo: list[Callable[[], None]] = []
            fault = ""
            if cluster.etcd is not None:
                # under load, with the master alive: its group's shard may move to another controller,
                # which must not depose a master it simply has not heard from yet (the takeover grace)
                fault = _control_fault(cluster, rng, rng.choice(FAULTS_BEFORE), undo, report, "before")
                if fault:
                    progress(n - 1, f"{fault}; the shards move")
                    time.sleep(CONTROLLER_LEASE_TTL_S + opts.controller_heartbeat_timeout_ms / 1000 + 0.5)
            load_s = rng.uniform(opts.min_load_s, opts.max_load_s)
            progress(n - 1, f"load {load_s:.2f} s, then kill -9 b{info['master_id']}")
            time.sleep(load_s)
            victim = info["master_id"]
            # --slow-member-lag-ms: the fast slave dies first, then the master, so the slow member
            # is the one live SyncStateSet member, which ALL_IN_SYNC promises holds every PUT_OK
            also = [] if not opts.slow_member_lag_ms or victim == SLOW_MEMBER else \
                [b for b in cluster.nodes if b not in (victim, SLOW_MEMBER)]
            for b in also:
                cluster.kill(b)
                if not _controller_sees_dead(cluster, b):
                    report.stuck = (f"round {n}: the controller still counts b{b} alive "
                                    f"{FAILOVER_TIMEOUT_S:.0f} s after its kill")
                    break
            if report.stuck:
                break
            before = len(load.acked)
            cluster.kill(victim)
            killed_at = time.monotonic()
            if cluster.etcd is not None:          # and the election runs through another fault
                during = _control_fault(cluster, rng, rng.choice(FAULTS_DURING), undo, report, "during")
                fault = f"{fault}; {during}" if fault else during
            first = _first_ack_from_other(load, before, (victim, *also), killed_at)
            for fn in undo:
                fn()
            if first is None:
                report.stuck = f"round {n}: no PUT_OK from a new master within {FAILOVER_TIMEOUT_S:.0f} s of the kill"
                break
            progress(n - 1, f"b{first.broker_id} took over; checking")
            check = check_log(cluster.node_dir(first.broker_id) / "commitlog", opts.segment_bytes,
                              _acked_by_key(load.acked_since(0)), opts.size)
            report.lost += check.lost
            report.corrupt += check.corrupt
            read = check_log(cluster.node_dir(first.broker_id) / "commitlog", opts.segment_bytes,
                             consumer.consumed_by_key(), opts.size)
            report.consumed_lost += read.lost + read.corrupt
            tail = rng.randint(1, 5)
            if unreplicated_tail(cluster.node_dir(victim) / "commitlog", opts.segment_bytes, opts.size,
                                 TAIL_KEY_BASE + 10 * n, tail):
                cluster.fault("UnreplicatedTail", broker=f"b{victim}", records=tail)
            cluster.start_node(victim)
            if not crash_after_cut(cluster, victim):
                # its log ends with records no one else holds: a restart that cuts nothing is not
                # the check this round was to make (and a run must not say "nothing lost" without it)
                report.stuck = f"round {n}: the restarted b{victim} made no cut within 10 s of its start"
                break
            for b in also:
                cluster.start_node(b)
            report.rounds.append(FailoverRound(n, victim, first.broker_id, round(load_s, 3),
                                               round((first.at_s - killed_at) * 1000, 1), len(load.acked),
                                               len(check.lost), len(check.corrupt), False, 0, tuple(also),
                                               paused, bool(dropped), fault))
            progress(n, f"failover {n}: {report.rounds[-1].failover_ms:.0f} ms")
        if report.rounds and report.stuck is None and not report.not_rejoined:
            if cluster.settled() is None:
                _not_settled(cluster, report, load, "after the last failover")
            else:
                _check_rejoined(cluster, report, load)
    finally:
        stop_clients(report, load, consumer)
        if cluster is not None:
            report.live_masters_deposed = cluster.live_masters_deposed()
            cluster.check_etcd_history(report)
            cluster.stop()
            report.truncations = cluster.truncations()
            if opts.failover_trace is not None and report.rounds:
                try:
                    verdict = cluster.write_failover_trace(Path(opts.failover_trace))
                except ConfigError as err:     # what the processes wrote: an unexpected outcome, not usage
                    report.trace_rejected = f"not checked: {err}"
                else:
                    report.trace_steps = verdict.steps if verdict.ok else verdict.steps - 1
                    report.trace_rejected = None if verdict.ok else f"step {verdict.steps} ({verdict.label})"
        report.seconds = time.monotonic() - started
        if not opts.keep and not opts.directory:
            shutil.rmtree(work, ignore_errors=True)
    return report


def stop_clients(report: FailoverReport, load: FailoverLoad | None, consumer: FailoverConsumer | None) -> None:
    """Stop the producers and the consumer, and count what they saw into ``report``."""
    if consumer is not None:
        consumer.stop()
        report.consumed = len(consumer.consumed)
        report.read_above_confirm = consumer.above_confirm
        report.consumer_bad_records = len(consumer.bad_records)
    if load is not None:
        load.stop()
        report.acked = len(load.acked)
        report.statuses = dict(sorted(load.statuses.items()))
        report.resends = load.resends


def unreplicated_tail(directory: Path, segment_size: int, size: int, first_key: int, count: int) -> int:
    """Append ``count`` whole records the slaves never got to a killed master's log: what its
    page cache holds when it dies between a write and the transfer (on loopback the transfer
    follows the write so closely that a kill rarely leaves one).  They were never acknowledged:
    the restarted broker must cut them.  Returns the bytes appended."""
    store = SegmentStore(directory, segment_size)
    try:
        end = recover_log(store.read_all(), segment_size).end_offset
        start, pos = end - end % segment_size, end % segment_size
        data = b"".join(encode(first_key + i, body_for(first_key + i, size)) for i in range(count))
        if pos + len(data) + END_FILE_MIN_BLANK_LENGTH > segment_size or record_size(size) > len(data) // count:
            return 0                         # no room before the segment's end: no tail this round
        store.write(start, pos, data)
        store.fsync(start, start + pos + len(data))
        return len(data)
    finally:
        store.close()


def _control_fault(cluster: Cluster, rng: random.Random, kind: str, undo: list[Callable[[], None]],
                   report: FailoverReport, when: str) -> str:
    """One fault of the controllers' side (FAULTS_BEFORE, FAULTS_DURING), never below a live
    controller and an etcd majority; what brings it back is appended to ``undo`` (run after the
    round's failover).  Returns what was done ("" for none), counted in ``report.control_kills``."""
    done = []
    live = [c for c, p in cluster.controllers.items() if p.popen.poll() is None]
    # drawn whether used or not: a seed's later draws do not move with what is alive
    owner, coin, other = cluster.shard_owner(), rng.random(), rng.choice(sorted(cluster.controllers))
    target = owner if owner is not None and coin < 0.5 else other
    if kind == "pause-owner" and owner is not None and owner in live:
        # SIGSTOP the owner of the group's shard past its lease, as a long GC pause: etcd hands the
        # shard to another; resumed, the old owner must not act on what it believed before
        pause_s = CONTROLLER_LEASE_TTL_S + 1.5
        cluster.controllers[owner].popen.send_signal(signal.SIGSTOP)
        time.sleep(pause_s)
        cluster.controllers[owner].popen.send_signal(signal.SIGCONT)
        done.append((f"paused controller c{owner} {pause_s:.1f} s", "paused owner"))
    if "controller" in kind and target in live and len(live) > 1:
        cluster.kill_controller(target)
        undo.append(lambda c=target: cluster.start_controller(c))
        done.append((f"controller c{target}", "controller"))
    if "etcd" in kind and len(cluster.etcd.alive()) == len(cluster.etcd.members):
        leader = cluster.etcd.leader()
        followers = [m for m in cluster.etcd.alive() if m is not leader]
        member = leader if "leader" in kind else followers[int(coin * len(followers)) % len(followers)]
        cluster.etcd.kill(member)
        undo.append(lambda m=member: (cluster.etcd.start_member(m), cluster.etcd.wait_ready()))
        role = "leader" if member is leader else "follower"
        done.append((f"etcd {role} {member.name}", f"etcd {role}"))
    for _, kind_done in done:
        key = f"{when}: {kind_done}"
        report.control_kills[key] = report.control_kills.get(key, 0) + 1
    return f"{when} the master's kill: " + " + ".join(d for d, _ in done) if done else ""


def _acked_by_key(acked: list[AckedAt]) -> dict:
    return {a.acked.key: a.acked for a in acked}


def _first_ack_from_other(load: FailoverLoad, index: int, killed: tuple[int, ...],
                          killed_at: float) -> AckedAt | None:
    deadline = killed_at + FAILOVER_TIMEOUT_S
    while time.monotonic() < deadline:
        for a in load.acked_since(index):
            if a.broker_id not in killed and a.at_s >= killed_at:
                return a
        time.sleep(0.01)
    return None


def _controller_sees_dead(cluster: Cluster, broker: int) -> bool:
    """Wait until the controller no longer counts ``broker`` alive: an election before that
    could pick it (it reported the largest offset), and electing resets the SyncStateSet to
    the one elected, so the group would have no live candidate left (DefaultElectPolicy)."""
    deadline = time.monotonic() + FAILOVER_TIMEOUT_S
    while time.monotonic() < deadline:
        info = cluster.info()
        if info is not None and broker not in info.get("alive", ()):
            return True
        time.sleep(0.05)
    return False


def crash_after_cut(cluster: Cluster, broker: int, timeout_s: float = 10.0) -> bool:
    """The restarted broker cuts its diverged tail on its first handshake; kill -9 it right after
    and start it again: the cut must survive a crash (B14).  A cut made in memory only
    (BugTruncateNotDurable) comes back with the restart, under the epoch the cut's epoch file
    names, and the master refuses the diverged log (not_rejoined) or it is kept (diverged)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if "truncated the log at" in cluster.nodes[broker].text():
            cluster.kill(broker)
            cluster.start_node(broker)
            return True
        time.sleep(0.02)
    return False


def _check_rejoined(cluster: Cluster, report: FailoverReport, load: FailoverLoad) -> None:
    """The broker killed last round is back in the SyncStateSet: every acknowledged message
    its log reaches must be there, intact (a kept diverged tail is not)."""
    last = report.rounds[-1]
    last.rejoined = True
    for broker in (last.killed, *last.also_killed):
        check = check_log(cluster.node_dir(broker) / "commitlog", cluster.opts.segment_bytes,
                          _acked_by_key(load.acked_since(0)), cluster.opts.size)
        last.diverged += len(check.corrupt)
        report.diverged += check.corrupt


def _not_settled(cluster: Cluster, report: FailoverReport, load: FailoverLoad, when: str) -> None:
    """No full SyncStateSet in time: the broker restarted last did not catch up (a diverged
    log the master refuses), or the group is stuck."""
    info = cluster.info() or {}
    last = report.rounds[-1] if report.rounds else None
    if last and info.get("master_id") and {last.killed, *last.also_killed} - set(info.get("sync_state_set", ())):
        report.not_rejoined.append(report.rounds[-1].round)
        _check_rejoined(cluster, report, load)
        report.rounds[-1].rejoined = False
    else:
        report.stuck = (f"{when}: no master with a full SyncStateSet within {cluster.opts.settle_timeout_s:.0f} s "
                        f"({info})")
