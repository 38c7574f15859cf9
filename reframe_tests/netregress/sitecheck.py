"""``python -m netregress.sitecheck``: load the site layer (if any) and print what it defines.

The tools run it on ``--site DIR`` before anything else (tools/lib/common.sh): a wrong site is one line naming the
file and exit 2, never a traceback in the middle of a run. It lives outside :mod:`.measure.site` so that the site
layer and the interconnect table, which loads through it, do not import each other.
"""
from __future__ import annotations

import argparse
import sys

from .measure import interconnects, site


def main(argv: list[str] | None = None) -> int:
    """Print the site, its ReFrame settings and systems, interconnect tables and references; 2 naming what is wrong."""
    ap = argparse.ArgumentParser(prog='python -m netregress.sitecheck', description=__doc__.split('\n\n')[0])
    ap.add_argument('action', choices=['check'], nargs='?', default='check')
    ap.parse_args(argv)
    try:
        where = site.directory()
        names = list(site.systems())
        table = interconnects.load()
    except (site.SiteError, interconnects.InterconnectError) as err:
        print(f'site: {err}', file=sys.stderr)
        return 2
    print(f'site: {where or "none (the embedded configuration)"}')
    print(f'  ReFrame settings: {" + ".join(str(f) for f in site.settings_files())}; systems: {", ".join(names)}')
    print(f'  interconnects: {" + ".join(str(f) for f in site.interconnect_files())} ({", ".join(table.names)})')
    print(f'  references: {site.reference_dir()}')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
