"""`ackorder bench loris`: slow-loris peers against a real master (issue 34).

Attackers hold connections by sending one byte of a frame they never finish
every ``byte_interval_s``, and reconnect at once when the master closes one;
meanwhile a producer tries a fresh connection and one put every
``attempt_interval_s``.  Each tree is measured twice, side by side in one run:
without attackers and with them; the figure is the producer's PUT_OK rate
under attack over its rate without (1.0: the attack costs nothing; 0: locked
out), and the time to its first PUT_OK under attack.  ``baseline``: the same
points run from another source tree (the code before the frame deadline).
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

from reference.bench.procs import start_master
from reference.frames import FrameDecoder, Put, encode
from reference.status import PutStatus

FLAGS = ["--max-connections", "50", "--idle-timeout-ms", "3000", "--mapped-file-size-commit-log", str(1 << 20),
         "--max-message-size", "4096"]
CONNECT_TIMEOUT_S = 1.0
ANSWER_TIMEOUT_S = 2.0
MAX_ATTACKERS = 10_000


def _attacker(port: int, stop: threading.Event, byte_interval_s: float, stats: dict, lock: threading.Lock) -> None:
    frame = encode(Put(1, 1, b"l" * 3000))
    sock, sent = None, 0
    while not stop.is_set():
        try:
            if sock is None:
                sock = socket.create_connection(("127.0.0.1", port), timeout=CONNECT_TIMEOUT_S)
                sent = 0
                with lock:
                    stats["attacker_connections"] += 1
            sock.sendall(frame[sent:sent + 1])
            sent = (sent + 1) % (len(frame) - 1)        # never the last byte
        except OSError:
            if sock is not None:
                sock.close()
            sock = None
            with lock:
                stats["attacker_closed"] += 1
            stop.wait(0.05)
            continue
        stop.wait(byte_interval_s)
    if sock is not None:
        sock.close()


def _attempt(port: int, key: int) -> str:
    """One producer put on a fresh connection: 'ok', 'refused' (closed or reset before an answer),
    'timeout', or the status it got."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=CONNECT_TIMEOUT_S) as sock:
            sock.settimeout(ANSWER_TIMEOUT_S)
            sock.sendall(encode(Put(key, key, b"producer")))
            decoder = FrameDecoder()
            while True:
                data = sock.recv(4096)
                if not data:
                    return "refused"
                if frames := decoder.feed(data):
                    status = PutStatus(frames[0].status)
                    return "ok" if status is PutStatus.PUT_OK else status.name
    except socket.timeout:
        return "timeout"
    except OSError:
        return "refused"


def _measure(port: int, attackers: int, seconds: float, byte_interval_s: float, attempt_interval_s: float) -> dict:
    stop, lock = threading.Event(), threading.Lock()
    stats = {"attacker_connections": 0, "attacker_closed": 0}
    threads = [threading.Thread(target=_attacker, args=(port, stop, byte_interval_s, stats, lock), daemon=True)
               for _ in range(attackers)]
    for t in threads:
        t.start()
    if attackers:
        time.sleep(min(2.0, seconds / 4))          # every slot taken before the producer starts
    outcomes: dict[str, int] = {}
    first_ok_s = None
    start = time.monotonic()
    key = 1
    while (elapsed := time.monotonic() - start) < seconds:
        outcome = _attempt(port, key)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if outcome == "ok" and first_ok_s is None:
            first_ok_s = round(time.monotonic() - start, 2)
        key += 1
        time.sleep(max(0.0, attempt_interval_s - (time.monotonic() - start - elapsed)))
    stop.set()
    for t in threads:
        t.join(byte_interval_s + CONNECT_TIMEOUT_S + 1)
    attempts = sum(outcomes.values())
    return {"attempts": attempts, "put_ok": outcomes.get("ok", 0), "outcomes": dict(sorted(outcomes.items())),
            "put_ok_fraction": round(outcomes.get("ok", 0) / attempts, 3) if attempts else 0.0,
            "first_put_ok_s": first_ok_s, **stats}


def loris(work: Path, attackers: int = 50, seconds: float = 15.0, byte_interval_s: float = 1.0,
          attempt_interval_s: float = 0.1, baseline: Path | None = None, progress=print) -> dict:
    assert 0 < attackers <= MAX_ATTACKERS and seconds > 0 and byte_interval_s > 0 and attempt_interval_s > 0
    rows = []
    for tree_name, tree in (("before", baseline), ("after", None)):
        if tree_name == "before" and baseline is None:
            continue
        for under_attack in (False, True):
            label = f"{tree_name} {'with' if under_attack else 'without'} {attackers} slow-loris peers"
            progress(f"loris: {label}")
            directory = work / f"loris-{tree_name}-{int(under_attack)}"
            master = start_master(directory, FLAGS, tree)
            try:
                row = _measure(master.port, attackers if under_attack else 0, seconds, byte_interval_s,
                               attempt_interval_s)
            finally:
                master.stop()
            deadline_closes = master.text().count("the frame deadline is")
            evictions = master.text().count("takes its place at the connection limit")
            rows.append({"tree": tree_name, "attackers": attackers if under_attack else 0, **row,
                         "closed_at_frame_deadline": deadline_closes, "evicted_at_the_limit": evictions})
    ratios = []
    for tree_name in dict.fromkeys(r["tree"] for r in rows):
        calm = next(r for r in rows if r["tree"] == tree_name and r["attackers"] == 0)
        hit = next(r for r in rows if r["tree"] == tree_name and r["attackers"] > 0)
        ratios.append({"tree": tree_name, "put_ok_under_attack_over_calm":
                       round(hit["put_ok"] / calm["put_ok"], 3) if calm["put_ok"] else None,
                       "first_put_ok_under_attack_s": hit["first_put_ok_s"]})
    return {"scenario": "loris", "flags": " ".join(FLAGS), "seconds": seconds, "byte_interval_s": byte_interval_s,
            "attempt_interval_s": attempt_interval_s, "rows": rows, "ratios": ratios}
