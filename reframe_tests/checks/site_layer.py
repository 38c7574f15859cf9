"""Not a check: the site's settings against the code, on every ReFrame command that loads the checks.

ReFrame loads this file with the checks on every ``--list``, ``--dry-run`` and run, and it warns once about each
thing a site's settings say that the code cannot use (an unknown mpi_family, a feature ``ic-<name>`` missing from
the interconnect table, a fabric without a path for an environment's MPI family: netregress.sitecheck). With
``--warn-as-error`` (tools/validate loads the checks so before it measures) the first one stops the run.
"""
from reframe.core.logging import getlogger

from netregress import sitecheck
from netregress.measure import site

if site.directory() is not None:
    sitecheck.warn_in_reframe(getlogger())
