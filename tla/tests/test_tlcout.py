"""The -tool output parser: verdicts, traces, and errors with their place."""



from tla.tlcout import ToolOutput, action_name


def feed(text: str) -> ToolOutput:
    out = ToolOutput()
    for line in text.splitlines():
        out.feed(line)
    return out


def msg(code: int, severity: int, body: str) -> str:
    return f"@!@!@STARTMSG {code}:{severity} @!@!@\n{body}\n@!@!@ENDMSG {code} @!@!@\n"


def test_invariant_violation_and_trace():
    out = feed(
        msg(2110, 1, "Invariant AO!NoAckBeforeFlush is violated.")
        + msg(2121, 1, "The behavior up to this point is:")
        + msg(2217, 4, "1: <Initial predicate>\n/\\ log = <<>>\n/\\ reqs = <<>>")
        + msg(2217, 4, "2: <MCPut line 56, col 25 to line 56, col 53 of module MCAckOrder>\n"
                       "/\\ log = <<1>>\n/\\ reqs = << [status |-> \"WAITING\",\n   off |-> 1] >>")
        + msg(2199, 0, "30 states generated, 23 distinct states found, 15 states left on queue.")
    )
    assert out.violated_property() == "NoAckBeforeFlush"
    trace = out.trace()
    assert [s.action for s in trace] == ["Init", "Put"]
    assert trace[1].as_dict()["reqs"] == '<< [status |-> "WAITING", off |-> 1] >>'
    assert out.stats() == (30, 23)


def test_action_names():
    assert action_name("AO!Flush line 36, col 1 to line 48, col 73 of module MCAckOrder") == "Flush"
    assert action_name("MCReplicaCrash line 60, col 1 to line 60, col 9 of module MCAckOrder") == "ReplicaCrash"
    assert action_name("Initial predicate") == "Init"


def test_nested_messages_and_progress():
    seen = []
    out = ToolOutput(on_progress=lambda g, d, q: seen.append((g, d, q)))
    for line in (msg(2200, 0, "Progress(12) at 2026-11-22: 15,990 states generated (237,592 s/min), "
                             "7,335 distinct states found (108,989 ds/min), 1,863 states left on queue.")
                 + "@!@!@STARTMSG 1000:1 @!@!@\nTLC threw an unexpected exception.\n: @!@!@STARTMSG 2184:0 @!@!@\n"
                 "Attempted to apply Head to the empty sequence.\n@!@!@ENDMSG 2184 @!@!@\n@!@!@ENDMSG 1000 @!@!@\n"
                 ).splitlines():
        out.feed(line)
    assert seen == [(15990, 7335, 1863)]
    assert any("unexpected exception" in e for e in out.errors())
    assert {m.code for m in out.messages} >= {2184, 1000}


def test_sany_parse_error_names_the_file_and_line():
    out = feed(
        msg(2220, 0, "Starting SANY...")
        + "Parsing file /x/tla/AckOrder.tla\n***Parse Error***\n"
          'Encountered "====" at line 6, column 1 and token "+"\n'
        + msg(3002, 1, "Parsing or semantic analysis failed.")
    )
    assert out.errors()[0].startswith("/x/tla/AckOrder.tla:6:1: Encountered")


def test_sany_semantic_error_names_the_module_file():
    out = feed(
        "Parsing file /x/tla/MCAckOrder.tla\nParsing file /x/tla/AckOrder.tla\n"
        "Semantic errors:\n*** Errors: 1\nline 5, col 14 to line 5, col 14 of module AckOrder\n"
        "Unknown operator: `y'.\n" + msg(3002, 1, "Parsing or semantic analysis failed.")
    )
    assert out.errors()[0] == "/x/tla/AckOrder.tla:5:14: Unknown operator: `y'."


def test_lasso_and_stuttering_steps():
    out = feed(
        msg(2217, 4, "1: <Initial predicate>\nx = 0")
        + msg(2217, 4, "2: <Next line 5, col 9 to line 5, col 24 of module Lasso>\nx = 1")
        + msg(2122, 4, "1: Back to state: <Next line 5, col 9 to line 5, col 24 of module Lasso>")
        + msg(2218, 4, "9: Stuttering")
    )
    trace = out.trace()
    assert [s.action for s in trace] == ["Init", "Next", "Back to state 1", "Stuttering"]
    assert trace[1].as_dict() == {"x": "1"}
