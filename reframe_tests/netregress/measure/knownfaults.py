"""The faults an MPI build is declared to have (the environment extra ``known_faults``): what a run of it skips, and
which failures it explains.

Each entry: ``reason`` (said wherever it applies), and either ``checks`` (class names), optionally narrowed to
``interconnects`` and to oversubscribed runs (``oversubscribed: true``), which skips those runs; or ``failure`` (a
regular expression over a failed check's problems), which skips nothing and names the reason beside the failure.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence


def known_failure(faults: Sequence[Mapping], problems: Sequence[str]) -> str | None:
    """The reason of the first declared fault with a ``failure`` pattern that one of ``problems`` matches."""
    for fault in faults:
        if fault.get('failure') and any(re.search(fault['failure'], p) for p in problems):
            return fault['reason']
    return None


def known_fault(faults: Sequence[Mapping], check: str, interconnect: str, oversubscribed: bool) -> str | None:
    """The reason of the first declared fault (environment extra ``known_faults``) that matches this run, else None:
    the check is listed, the interconnect is among ``interconnects`` (where given), and the run is oversubscribed
    (where ``oversubscribed`` is set). Entries with a ``failure`` pattern skip nothing (:func:`known_failure`)."""
    for fault in faults:
        if (not fault.get('failure') and check in fault.get('checks', [])
                and ('interconnects' not in fault or interconnect in fault['interconnects'])
                and (not fault.get('oversubscribed') or oversubscribed)):
            return fault['reason']
    return None
