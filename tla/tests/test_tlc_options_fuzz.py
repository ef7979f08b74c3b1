"""TLC's options as `ackorder tlc` takes them from its command line (tla/tlc.TlcOptions), fuzzed:
a ConfigError in one line, or options whose -Xmx and counts TLC and the JVM accept — never another
exception.  What it caught is in its docstring."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spec.config import ConfigError
from tla.tlc import MIN_HEAP_MIB, TlcOptions

NUMBERS = ["0", "1", "64", "512", "4", "-1", "007", "1_0", " 8", "²", "١", "١٢٨", "𝟙", "9" * 30, "9" * 5000, ""]
UNITS = ["m", "g", "M", "G", "k", "", "mb", "ｍ", "\u212a"]
HEAPS = st.one_of(st.tuples(st.sampled_from(NUMBERS), st.sampled_from(UNITS)).map("".join),
                  st.tuples(st.integers(0, 10**7).map(str), st.sampled_from(UNITS)).map("".join),
                  st.text(max_size=6))
COUNTS = st.one_of(st.none(), st.integers(-2, 10**12))       # what argparse's type=int gives


def check_options(heap, workers, depth) -> None:
    try:
        options = TlcOptions(heap=heap, workers=workers, depth=depth)
    except ConfigError as err:
        assert str(err) and "\n" not in str(err)
        return
    if options.heap is not None:        # what the JVM's -Xmx takes: ASCII digits, then m or g
        assert re.fullmatch(r"[0-9]+[mMgG]", options.heap, re.ASCII), options.heap
        assert int(options.heap[:-1]) * (1024 if options.heap[-1] in "gG" else 1) >= MIN_HEAP_MIB
    assert type(options.workers) is int and options.workers >= 1


@settings(max_examples=300, deadline=None)
@given(HEAPS | st.none(), COUNTS.filter(lambda v: v is not None), COUNTS)
def test_tlc_options_are_what_tlc_takes_or_a_config_error(heap, workers, depth):
    """Caught: --heap '²m' (str.isdigit() said yes, int() raised ValueError) and a heap of 5,000
    digits (int()'s ValueError) were tracebacks; '١٢٨m' went to the JVM as -Xmx١٢٨m."""
    check_options(heap, workers, depth)


@pytest.mark.full
@settings(max_examples=10_000, deadline=None)
@given(HEAPS | st.none(), COUNTS.filter(lambda v: v is not None), COUNTS)
def test_tlc_options_are_what_tlc_takes_or_a_config_error_full(heap, workers, depth):
    check_options(heap, workers, depth)
