"""Every `ackorder` command's command line, fuzzed: argv made of the command's real flags with
hostile values (negative, huge, other scripts' digits such as '²' and '١', empty, NUL, lone
surrogates, very long, paths that are files, directories or missing).  The command must refuse
in one line on stderr with exit 2 (or 3 for the environment), or accept and reach its work —
never another exception, never a traceback.

Only the parse-and-validate stage runs: each command runs in this process (as
test_exit_codes.ackorder_in_process runs it, with stdout and stderr encoded as a process's are:
UTF-8, stderr with backslashreplace), and the calls where its work starts (a simulation, TLC,
Spark, a server, a benchmark, a subprocess, a socket's connect or bind) raise ``ReachedWork``
instead: the command accepted its arguments.  A command that runs past all of them for
WATCHDOG_S seconds fails the test, naming what to stop.  Name resolution is numeric only
(``AI_NUMERICHOST``): a host name is refused as one that does not resolve, without a resolver.

`ackorder trace-check` is left out: its files are fuzzed by their own tests.  What each property
caught when it was written is in its docstring."""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import os
import re
import signal
import socket
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from hypothesis._settings import default_variable

from cli import errors
from cli.main import build_parser, main
from stateful_tests import profiles  # noqa: F401  (the project's profiles, as `ackorder stateful` loads them)
from spec.config import BUG_NAMES, bug_alias
from spec.failover.config import FAILOVER_BUG_NAMES
from tla.manifest import TLA_DIR

ROOT = Path(__file__).resolve().parents[2]
WATCHDOG_S = 20
LEFT_OUT = {"trace-check"}


class ReachedWork(BaseException):
    """The command accepted its arguments: it was about to start its work (stopped here)."""


class Overran(BaseException):
    """The command ran for WATCHDOG_S without reaching a stop: a work entry point is missing."""


def _stop(what: str):
    def stop(*args, **kwargs):
        raise ReachedWork(what)
    return stop


def _serve_stop(what: str):
    """A server's start, stopped: first the check its socket's bind makes of the host it was given
    (a str host is encoded with IDNA: a lone surrogate is a TypeError there, a label of over 63
    characters a UnicodeError), then ReachedWork."""
    def stop(opts, *args, **kwargs):
        try:
            socket.socket(socket.AF_INET6 if ":" in opts.host else socket.AF_INET).close()
            _REAL_GETADDRINFO(opts.host, 0, 0, socket.SOCK_STREAM, 0, socket.AI_NUMERICHOST | socket.AI_PASSIVE)
        except socket.gaierror:
            pass                                   # a name, not an address: the real bind resolves it
        raise ReachedWork(what)
    return stop


SERVERS = {("reference.real.master_server", "serve_master"), ("reference.real.node", "serve_node"),
           ("reference.real.controller_server", "serve_controller")}


# Where each command's work starts (module, attribute path).  Generic ones first: no process, no
# connection, no listening socket, no fork, whatever the command.
WORK = [
    ("subprocess", "Popen.__init__"), ("os", "fork"), ("os", "posix_spawn"), ("socket", "socket.connect"),
    ("socket", "socket.connect_ex"), ("socket", "socket.bind"), ("socket", "socket.listen"),
    ("concurrent.futures", "ProcessPoolExecutor.__init__"),
    ("reference.sim.world", "World.run"),                       # sim, replay --seed
    ("cli.replay", "replay_program"),                           # replay --program (a program's steps run)
    ("reference.failover.drive", "simulate"),                   # replay --failover
    ("cli.tlc", "new_log_dir"),                                 # tlc: TLC's logs, then TLC
    ("spark_fuzz.campaign", "spark_session"),                   # fuzz, tlc --traces
    ("cli.twin", "twin_check"),
    ("cli.prove", "prove_manifest"),
    ("hypothesis.stateful", "run_state_machine_as_test"),       # stateful
    ("reference.real.master_server", "serve_master"), ("reference.real.replica_server", "serve_replica"),
    ("reference.real.node", "serve_node"), ("reference.real.load", "run_load"),
    ("reference.real.controller_server", "serve_controller"),
    ("reference.real.chaos", "run_chaos"), ("reference.real.powerloss", "explore_power_loss"),
    ("reference.real.failover_chaos", "run_failover_chaos"),
    ("reference.bench.scenarios", "ack"), ("reference.bench.scenarios", "groupcommit"),
    ("reference.bench.scenarios", "tsp"), ("reference.bench.scenarios", "rss"), ("reference.bench.scenarios", "cpu"),
    ("reference.bench.controller", "controller"), ("spark_fuzz.tlabench", "trace_check_rates"),
    ("spark_fuzz.tlabench", "simulation_rates"), ("spark_fuzz.tlabench", "bug_find_times"),
    ("reference.bench.simrates", "sim_rates"),
    ("cli.run", "new_run_dir"), ("cli.run", "print_plan"),      # run: its run directory, its plan
    ("spark_fuzz.report", "write_report"),                      # fuzz-report
]


def _resolve(module: str, path: str):
    import importlib

    owner = importlib.import_module(module)
    *parents, name = path.split(".")
    for p in parents:
        owner = getattr(owner, p)
    return owner, name


_REAL_GETADDRINFO = socket.getaddrinfo


def _numeric_getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):
    """getaddrinfo as the real one checks and encodes its arguments, without asking a resolver: a
    name is EAI_NONAME (does not resolve), an address is itself."""
    return _REAL_GETADDRINFO(host, port, family, type, proto, flags | socket.AI_NUMERICHOST)


@contextlib.contextmanager
def work_stopped():
    with contextlib.ExitStack() as stack:
        for module, path in WORK:
            owner, name = _resolve(module, path)
            stop = (_serve_stop if (module, path) in SERVERS else _stop)(f"{module}.{path}")
            stack.enter_context(mock.patch.object(owner, name, stop))
        stack.enter_context(mock.patch.object(socket, "getaddrinfo", _numeric_getaddrinfo))
        # `ackorder stateful` loads its Hypothesis profile and freezes the collector for its run: not
        # for the tests of this process that run after it
        stack.enter_context(mock.patch.object(gc, "freeze", lambda: None))
        stack.callback(_restore_hypothesis_profile, hsettings._current_profile, default_variable.value)
        yield


def _restore_hypothesis_profile(name, value) -> None:
    hsettings._current_profile = name
    default_variable.value = value


def _overran(signum, frame):
    raise Overran(f"ran {WATCHDOG_S} s past its argument checks: add the call where its work starts to WORK")


def ackorder(argv: list[str], cwd: Path) -> tuple[int | str, str, str]:
    """(exit code, or "work" when the command reached its work; stdout; stderr) of ``ackorder
    ARGV`` run in this process; an exception other than SystemExit escapes."""
    out_bytes, err_bytes = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(out_bytes, encoding="utf-8", errors="strict", write_through=True)
    err = io.TextIOWrapper(err_bytes, encoding="utf-8", errors="backslashreplace", write_through=True)
    environ, here = dict(os.environ), os.getcwd()
    os.environ["COLUMNS"] = "200"
    previous = signal.signal(signal.SIGALRM, _overran)
    signal.setitimer(signal.ITIMER_REAL, WATCHDOG_S)
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), work_stopped():
            try:
                code: int | str = main(list(argv))
            except SystemExit as exit_:            # argparse's own usage errors and --help
                code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
            except ReachedWork:
                code = "work"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        os.chdir(here)
        os.environ.clear()
        os.environ.update(environ)
    return code, out_bytes.getvalue().decode(), err_bytes.getvalue().decode()


# --- the command lines -------------------------------------------------------------------------

def commands() -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """Every (sub)command path and its parser."""
    found = {}

    def walk(parser, path):
        sub = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not sub:
            found[path] = parser
            return
        for name, child in sub[0].choices.items():
            walk(child, (*path, name))

    walk(build_parser(), ())
    return {path: p for path, p in found.items() if path[0] not in LEFT_OUT}


COMMANDS = commands()

# Numbers as people and scripts mistype them.  '²' is a digit to str.isdigit() and not to int();
# '١' (Arabic-Indic one) is a digit to both: int('١') == 1, which no other program reads so.
NUMBERS = ["-1", "0", "1", "2", "3", "-0", "+1", "007", "1_000", " 3 ", "1e3", "0.5", "nan", "inf", "-inf", "1e999",
           "9" * 20, "9" * 5000, "65536", "99999", "2147483648", "²", "١", "١٢", "𝟙", "①", "0x10"]
HOSTILE = ["", " ", "\x00", "x\x00y", "\udcff", "é", "a" * 5000, "-", "--", "-x", "a b", "\n", "none"]
PATHS = ["file.txt", "dir", "missing/x.json", "file.txt/x", "dir/new.json", "new.json", ".", "/", "/dev/null",
         "/nonexistent/d/x", "bin.dat", "matrix.json", "bad.json", "huge.json", "deep.json", "My.cfg", "Bad.cfg",
         "Binary.cfg", "campaign", "badcampaign", "plan", "prog.py", "x.py", "My.tla"]
# Paths into the project only where a command reads (a model named by its cfg): an output flag given the
# project's own cfg overwrote it (`sim --trace` opens its file before the simulation starts).
READ_ONLY = [str(TLA_DIR / "MCAckOrder_sync_flush.cfg")]
BUGS = [*BUG_NAMES[:4], bug_alias(BUG_NAMES[0]), *FAILOVER_BUG_NAMES[:3], "BugNope", "none"]
# Realistic values of each flag (by dest); their digits are replaced with NUMBERS too.
PLAUSIBLE = {
    "master": ["local[*]", "local[2]", "local[1,2]", "spark://127.0.0.1:7077", "spark://\udcff:7077",
               "spark://" + "x" * 300 + ":7077", "yarn", "127.0.0.1:10912", "\udcff:10912"],
    "conf": ["spark.driver.memory=1g", "spark.executor.memory=512m", "spark.executor.memoryOverhead=384m",
             "spark.driver.extraJavaOptions=-Xmx1g", "spark.ui.port=4040"],
    "config": ["replicas=2", "net_delay_ms=0,2", "fsync_failure_probability=0.1", "flush_disk_type=SYNC_FLUSH",
               "bug=BugAckOnWrote", "mapped_file_size_commit_log=4096", "My.cfg"],
    "target": ["127.0.0.1:10911", ":10911", "[::1]:10911", "localhost:10911", "\udcff:10911", "x" * 300 + ":1",
               "é:10911", "a b:1"],
    "controller": ["127.0.0.1:9876", "\udcff:9876"],
    "etcd_endpoints": ["127.0.0.1:2379,127.0.0.1:2380", "h:2379"],
    "replicas": ["r1,r2", "r1", "", "1"],
    "heap": ["4g", "512m", "64M"],
    "producers": ["1,4,16", "4"], "tsp_producers": ["4,64"], "groups": ["1,20"], "sim_steps": ["10000,100000"],
    "sim_seeds": ["0,9"], "trace_events": ["2000,20000"], "compare_bugs": ["BugAckOnWrote,BugDoubleResponse", "none"],
    "models": ["sync_flush", "BugAckOnWrote", "ack_on_wrote_bug", "sync_flush,BugAckOnWrote", "My.cfg", "x.tla",
               "nope", *READ_ONLY],
    "bug": BUGS, "failover_bug": BUGS,
    "machine": ["spec", "refinement", "RealStoreMachine", "nope"],
    "expect_hash": ["0" * 16, "a" * 64, "zz", "A" * 16],
    "program": ["prog.py", "file.txt", "bin.dat", "dir"],
    "resume": ["plan", "dir", "latest"],
    "name": ["r1", "a b", "", "r" * 65], "group": ["broker-a", "", "g" * 300], "host": ["127.0.0.1", "::1", "a b", "", "\udcff", "x" * 300, "é"],
    "sim_model": ["sync_both_all_large", "nope"],
}
TEMPLATES = {k: v for k, v in PLAUSIBLE.items()}


@st.composite
def renumbered(draw, text: str) -> str:
    """``text`` with some of its runs of digits replaced by hostile numbers."""
    return re.sub(r"\d+", lambda m: draw(st.sampled_from(NUMBERS)) if draw(st.booleans()) else m.group(0), text)


def _numeric(action: argparse.Action) -> bool:
    kind = action.type
    return kind in (int, float) or getattr(kind, "__qualname__", "").startswith(("int_at_least", "float_at_least"))


def values_for(action: argparse.Action, hostile: bool) -> st.SearchStrategy[str]:
    """A value for ``action``: a plausible one, or (``hostile``) one of any kind."""
    plausible = list(PLAUSIBLE.get(action.dest, [])) + (["1", "2", "3", "10"] if _numeric(action) else [])
    if action.type is Path or getattr(action.type, "__name__", "").startswith("output_file") or action.dest == "dir":
        plausible += PATHS
    if action.choices:
        plausible += [str(c) for c in action.choices]
    if action.default not in (None, [], (), False, True, argparse.SUPPRESS) and not isinstance(action.default, Path):
        plausible.append(str(action.default))
    anything = st.sampled_from(NUMBERS + HOSTILE + PATHS) | st.text(max_size=6)
    if not plausible:
        return anything
    good = st.sampled_from(plausible)
    return st.one_of(good, good.flatmap(renumbered), anything) if hostile else good


@st.composite
def command_lines(draw) -> list[str]:
    """A command, its required arguments, and up to four of its other flags: most values plausible
    (so that the checks behind the first ones are reached), some hostile."""
    path = draw(st.sampled_from(sorted(COMMANDS)))
    parser = COMMANDS[path]
    argv = list(path)
    actions = [a for a in parser._actions if not isinstance(a, (argparse._HelpAction, argparse._VersionAction))]
    optional = [a for a in actions if a.option_strings and not a.required]
    chosen = draw(st.lists(st.sampled_from(optional), max_size=4, unique_by=id)) if optional else []
    given = [a for a in actions if a.required or not a.option_strings] + chosen
    # one value of any kind (or, a third of the time, any number of them); the others plausible, so
    # that the checks behind the first are reached
    wild = draw(st.sampled_from(range(len(given)))) if given else None
    everywhere = draw(st.integers(0, 2)) == 0
    for k, action in enumerate(given):
        values = values_for(action, hostile=everywhere or k == wild)
        if not action.option_strings:                     # a positional: as many values as it takes
            n = {None: 1, "?": draw(st.integers(0, 1)), "*": draw(st.integers(0, 2)),
                 "+": draw(st.integers(1, 2))}.get(action.nargs, 1)
            argv += [draw(values) for _ in range(n)]
            continue
        for _ in range(draw(st.integers(1, 2)) if isinstance(action, argparse._AppendAction) else 1):
            argv.append(action.option_strings[-1])
            if action.nargs == 0 or (action.nargs == "?" and draw(st.booleans())):
                continue
            argv.append(draw(values))
    if draw(st.integers(0, 19)) == 0:
        argv.insert(draw(st.integers(1, len(argv))), draw(st.sampled_from(["--bogus", "--", "-h"] + HOSTILE)))
    return argv


@pytest.fixture(scope="module")
def playground(tmp_path_factory) -> Path:
    """The working directory the commands run in: files, directories and inputs of every kind
    that a path flag may name."""
    d = tmp_path_factory.mktemp("argv")
    (d / "file.txt").write_text("not what any flag wants\n")
    (d / "dir").mkdir()
    (d / "bin.dat").write_bytes(b"\xff\xfe\x00\x01" * 8)
    (d / "matrix.json").write_text(json.dumps([{"replicas": 2}, {"flush_disk_type": "SYNC_FLUSH"}]))
    (d / "bad.json").write_text('[{"replicas": "x"}')
    (d / "huge.json").write_text('[{"replicas": ' + "9" * 5000 + "}]")
    (d / "deep.json").write_text("[" * 50_000)
    (d / "My.cfg").write_text((TLA_DIR / "MCAckOrder_sync_flush.cfg").read_text())
    (d / "My.tla").write_text((TLA_DIR / "MCAckOrder.tla").read_text())
    (d / "Bad.cfg").write_text("CONSTANTS MaxPuts = " + "9" * 5000 + "\n")
    (d / "Binary.cfg").write_bytes(b"\xff" * 40)
    (d / "campaign").mkdir()
    (d / "campaign" / "summary.json").write_text('{"campaign": "c", "seeds": ' + "1" * 5000 + "}")
    (d / "badcampaign").mkdir()
    (d / "badcampaign" / "summary.json").write_text("[" * 50_000)
    (d / "plan").mkdir()
    (d / "plan" / "plan.json").write_text('{"full": false, "models": 3}')
    (d / "prog.py").write_text("state = RefinementMachine()\nstate.teardown()\n")
    return d


def _short(argv: list[str]) -> list[str]:
    return [a if len(a) < 80 else f"{a[:30]}...({len(a)} chars)" for a in argv]


def check_command_line(argv: list[str], cwd: Path) -> None:
    assert not any(a.startswith(str(ROOT)) for a in argv if a not in READ_ONLY), argv    # the harness's own rule
    code, out, err = ackorder(argv, cwd)
    event(f"{argv[0]}: {'accepted' if code == 'work' else f'exit {code}'}")
    assert "Traceback" not in out + err, (_short(argv), err[-2000:])
    if code == "work":
        return
    assert code in (errors.OK, errors.VIOLATION, errors.USAGE, errors.ENVIRONMENT), (_short(argv), code, err[-2000:])
    if code in (errors.USAGE, errors.ENVIRONMENT):
        lines = err.splitlines()           # a terminal's lines, and str.splitlines' other separators
        assert len(lines) == 1 and lines[0].strip() and err.endswith("\n"), (_short(argv), code, err[-2000:])
    if code == errors.USAGE:
        assert out == "", (_short(argv), out[-500:])            # refused before any work


FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                         HealthCheck.too_slow])


@FUZZ
@given(command_lines())
def test_every_command_line_is_refused_in_one_line_or_accepted(playground, argv):
    """Caught (each was a traceback and exit 1, or two lines): an output path too long for the file
    system (`stateful --save`, any output_file: OSError ENAMETOOLONG from argparse's type); an
    argument holding a newline quoted back in a usage error (two lines); `fuzz-report --out DIR`
    whose summary.json has a 5,000-digit integer or deep nesting; `run --resume DIR` with a
    plan.json of other types (TypeError); `load --target`, `fuzz --master spark://` and the
    servers' --host with a host the socket layer cannot encode (UnicodeError, TypeError at bind);
    `tlc --manifest` of bytes that are not UTF-8, deep nesting or a huge integer."""
    check_command_line(argv, playground)


@pytest.mark.full
@settings(FUZZ, max_examples=5_000)
@given(command_lines())
def test_every_command_line_is_refused_in_one_line_or_accepted_full(playground, argv):
    check_command_line(argv, playground)


def test_every_command_is_fuzzed():
    """A command added to cli/main.py is fuzzed (or left out here on purpose)."""
    from cli.main import COMMANDS as NAMES

    assert {p[0] for p in COMMANDS} | LEFT_OUT == set(NAMES)


def test_the_runner_sees_work_usage_errors_and_crashes(playground):
    """The harness itself: a command that reaches its work, a usage error, and an escaping crash."""
    assert ackorder(["sim", "--seed", "1", "--steps", "5"], playground)[0] == "work"
    code, out, err = ackorder(["sim", "--seed", "²"], playground)
    assert code == errors.USAGE and len(err.splitlines()) == 1
    import cli.sim

    with mock.patch.object(cli.sim, "parse_overrides", lambda items: 1 / 0), pytest.raises(ZeroDivisionError):
        ackorder(["sim", "--seed", "1"], playground)


# --- what `ackorder fuzz` hands Spark and the JVM as written ------------------------------------------

SIZES = st.one_of(st.sampled_from(NUMBERS + HOSTILE), st.tuples(st.sampled_from(NUMBERS), st.sampled_from(
    ["", "k", "m", "g", "t", "p", "b", "kb", "gb", "G", "K", "\u212a", "ｍ"])).map("".join))


def check_spark_settings(key: str, value: str, master: str) -> None:
    from cli.fuzz import HEAPS, LOCAL_MASTER, heap_ok, parse_conf
    from spec.config import ConfigError

    try:
        conf = parse_conf([f"{key}={value}"])
    except ConfigError as err:
        assert "\n" not in str(err)
    else:
        taken = conf[key]
        if key.endswith((".memory", ".memoryOverhead")):
            # Spark and the JVM read ASCII digits and units only ('١g' or a Kelvin sign 'K' passed,
            # and the JVM refused to start: exit 3 for what was bad input)
            assert taken.isascii(), taken
        if key in HEAPS:
            assert heap_ok(key, taken)
    assert LOCAL_MASTER.fullmatch(master) is None or master.isascii(), master


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["spark.driver.memory", "spark.executor.memory", "spark.executor.memoryOverhead"]), SIZES,
       st.tuples(st.sampled_from(["local", "local[", "local[*", "local[2,"]), st.sampled_from(NUMBERS + ["", "*"]),
                 st.sampled_from(["]", ",3]", ""])).map("".join))
def test_spark_sizes_and_masters_are_ascii_or_refused(key, value, master):
    """Caught: '١g' (Arabic-Indic digits, re's \\d) and a Kelvin sign for 'k' (re.IGNORECASE) were
    taken as sizes, 'local[١]' as a master; a heap of 5,000 digits raised int()'s ValueError."""
    check_spark_settings(key, value, master)
