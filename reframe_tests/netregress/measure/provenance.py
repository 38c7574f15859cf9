"""Provenance: did the payload cross the interconnect under test, and which transport did the MPI library pick?

Two independent witnesses, because a post-maintenance fault is usually a *silent* fallback (to shared memory, to
another NIC, to TCP instead of RDMA):

1. Byte counters. Before and after the measurement the job prints, on every node it uses, a snapshot made by
   :func:`snapshot_command` (``/proc/net/dev`` plus InfiniBand port counters). :func:`check_counters` compares the
   deltas of the interface under test with the bytes the kernel says it moved.
2. The library's own report. The variables in ``config/interconnects.yaml`` (``report:``) make each MPI print its
   choice; :func:`transports` reduces that output to names like ``btl:tcp`` or ``ucx:tcp/eth0`` and
   :func:`check_transports` matches them against the table's ``transport`` expression.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping

MARK = '### netregress-counters'
#: Launchers and Slurm talk over the node's interfaces during a run (tens of KB); a shared-memory payload
#: smaller than this cannot be told apart from that chatter by counters (the transport report still can).
SHM_NOISE_FLOOR_BYTES = 1 << 20
#: Share of the payload another (non-loopback) interface may carry beside the one under test (control traffic).
OTHER_IFACE_SHARE = 0.05
_SNAP_HEAD = re.compile(rf'^{MARK} host=(\S+) when=(\S+)\s*$')
_IB_LINE = re.compile(r'^ib:(\S+) xmit_words=(\d+) rcv_words=(\d+)(?: errors=(\d+))?\s*$')
#: The error counters of an InfiniBand port that a healthy link never raises (man ibqueryerrors; the kernel's
#: /sys/class/infiniband/<hca>/ports/<port>/counters): a bad cable or port shows here before anywhere else.
IB_ERROR_COUNTERS = ('symbol_error', 'link_error_recovery', 'link_downed', 'port_rcv_errors',
                     'port_rcv_remote_physical_errors', 'local_link_integrity_errors',
                     'excessive_buffer_overrun_errors', 'port_xmit_discards')


@dataclass(frozen=True)
class Counters:
    rx_bytes: int
    tx_bytes: int
    #: errors the port or interface counted (/proc/net/dev rx+tx errs; the IB error counters summed)
    errors: int = 0

    @property
    def total(self) -> int:
        return self.rx_bytes + self.tx_bytes


def snapshot_command(when: str) -> str:
    """A POSIX shell command printing one counter snapshot of the node it runs on."""
    return (f'echo "{MARK} host=$(hostname) when={when}"; cat /proc/net/dev; '
            'for d in /sys/class/infiniband/*/ports/*/counters; do if [ -r "$d/port_xmit_data" ]; then '
            'p=${d%/counters}; e=0; for c in ' + ' '.join(IB_ERROR_COUNTERS) + '; do '
            'v=$(cat $d/$c 2>/dev/null) && e=$((e + v)); done; echo "ib:$(basename ${p%/ports/*}):$(basename $p) '
            'xmit_words=$(cat $d/port_xmit_data) rcv_words=$(cat $d/port_rcv_data) errors=$e"; fi; done')


def parse_net_dev(text: str) -> dict[str, Counters]:
    """Parse /proc/net/dev (and ``ib:`` lines): interface -> rx/tx bytes. IB counters are in 4-byte words."""
    out: dict[str, Counters] = {}
    for line in text.splitlines():
        m = _IB_LINE.match(line.strip())
        if m:
            out[f'ib:{m.group(1)}'] = Counters(rx_bytes=4 * int(m.group(3)), tx_bytes=4 * int(m.group(2)),
                                               errors=int(m.group(4) or 0))
            continue
        if ':' not in line or '|' in line:
            continue
        name, _, rest = line.partition(':')
        fields = rest.split()
        if len(fields) < 16 or not all(f.isdigit() for f in fields[:16]):
            continue
        out[name.strip()] = Counters(rx_bytes=int(fields[0]), tx_bytes=int(fields[8]),
                                     errors=int(fields[2]) + int(fields[10]))
    return out


_LABEL = re.compile(r'^\s*(\d+): ?(.*)$')


def parse_snapshots(text: str) -> dict[str, dict[str, dict[str, Counters]]]:
    """Split concatenated snapshots: ``{when: {host: {iface: Counters}}}``.

    Snapshots taken in parallel on several nodes arrive interleaved; ``srun --label`` prefixes every line with
    the task number (``"1: ..."``), and labelled lines are regrouped per task before parsing.
    """
    streams: dict[str | None, list[str]] = {}
    for line in text.splitlines():
        m = _LABEL.match(line)
        key, body = (m.group(1), m.group(2)) if m else (None, line)
        streams.setdefault(key, []).append(body)
    snaps: dict[str, dict[str, dict[str, Counters]]] = {}
    for lines in streams.values():
        for when, hosts in _parse_stream(lines).items():
            for host, ifaces in hosts.items():
                snaps.setdefault(when, {})[host] = ifaces
    return snaps


def _parse_stream(stream: list[str]) -> dict[str, dict[str, dict[str, Counters]]]:
    snaps: dict[str, dict[str, dict[str, Counters]]] = {}
    current, lines = None, []

    def flush():
        if current is not None:
            snaps.setdefault(current[1], {})[current[0]] = parse_net_dev('\n'.join(lines))

    for line in stream:
        m = _SNAP_HEAD.match(line)
        if m:
            flush()
            current, lines = (m.group(1), m.group(2)), []
        elif current is not None:
            lines.append(line)
    flush()
    return snaps


def deltas(before: Mapping[str, Mapping[str, Counters]],
           after: Mapping[str, Mapping[str, Counters]]) -> dict[str, dict[str, Counters]]:
    """Per host and interface: after - before. Hosts or interfaces missing on one side are left out."""
    out: dict[str, dict[str, Counters]] = {}
    for host, ifaces in after.items():
        for iface, c1 in ifaces.items():
            c0 = before.get(host, {}).get(iface)
            if c0 is None:
                continue
            out.setdefault(host, {})[iface] = Counters(rx_bytes=c1.rx_bytes - c0.rx_bytes,
                                                       tx_bytes=c1.tx_bytes - c0.tx_bytes,
                                                       errors=max(0, c1.errors - c0.errors))
    return out


def check_counters(delta: Mapping[str, Mapping[str, Counters]], *, kind: str, iface: str | None,
                   hosts: Iterable[str], payload_bytes: float, fraction: float = 1.0) -> list[str]:
    """Failure messages (empty = fine) for one run.

    kind 'interface' / 'infiniband': on every host in ``hosts``, the interface under test must have carried at
      least ``fraction * payload_bytes`` (rx + tx), i.e. what the kernel says went over the wire between nodes,
      and no other interface but loopback may have carried a share of it (more than
      :data:`OTHER_IFACE_SHARE` of the payload and above :data:`SHM_NOISE_FLOOR_BYTES`): a payload split over
      two NICs is a wrong path too.
    kind 'none' (shared memory): no interface on any host may have carried ``payload_bytes`` or more (and at
      least :data:`SHM_NOISE_FLOOR_BYTES`, above the launcher's own traffic).
    """
    hosts = list(hosts)
    problems: list[str] = []
    if not hosts:
        return ['no counter snapshots recorded (snapshot step did not run on any node)']
    if kind != 'none' and not payload_bytes > 0:
        return [f'the benchmark reported no payload ({payload_bytes}), so its traffic cannot be verified']
    for host in hosts:
        if host not in delta:
            problems.append(f'{host}: no counter snapshots before and after the run')
            continue
        if kind == 'none':
            for name, d in sorted(delta[host].items()):
                if d.total >= max(payload_bytes, SHM_NOISE_FLOOR_BYTES) and payload_bytes > 0:
                    problems.append(f'{host}: {name} carried {d.total} B while the kernel moved {payload_bytes:.0f} '
                                    f'B over shared memory: the payload went over the network, not shm')
            continue
        name = iface if kind == 'interface' else _ib_name(delta[host], iface)
        d = delta[host].get(name) if name else None
        if d is None:
            problems.append(f'{host}: interface {iface!r} under test not found '
                            f'(have: {", ".join(sorted(delta[host]))})')
            continue
        if d.errors > 0:
            problems.append(f'{host}: {name} counted {d.errors} new errors during the run (rx/tx errors'
                            f'{"; symbol, link-downed, receive errors ..." if name.startswith("ib:") else ""}): '
                            f'a bad port, cable or NIC')
        need = fraction * payload_bytes
        if d.total < need:
            busiest = max(delta[host].items(), key=lambda kv: kv[1].total)
            problems.append(f'{host}: {name} carried {d.total} B (rx {d.rx_bytes}, tx {d.tx_bytes}), less than the '
                            f'{need:.0f} B the kernel moved; busiest interface was {busiest[0]} '
                            f'({busiest[1].total} B): the payload did not cross {name}')
            continue
        for other, od in sorted(delta[host].items()):
            if other in (name, 'lo') or other.startswith('ib:') != name.startswith('ib:'):
                continue
            if od.total > max(OTHER_IFACE_SHARE * payload_bytes, SHM_NOISE_FLOOR_BYTES):
                problems.append(f'{host}: {other} carried {od.total} B beside {name} under test (payload '
                                f'{payload_bytes:.0f} B): part of the payload took another interface')
    return problems


def _ib_name(ifaces: Mapping[str, Counters], iface: str | None) -> str | None:
    ib = sorted(n for n in ifaces if n.startswith('ib:'))
    if iface:
        ib = [n for n in ib if n.startswith(f'ib:{iface}:') or n == f'ib:{iface}']
    return ib[0] if ib else None


# --- transport reports -------------------------------------------------------------------------------------------

_OMPI_BML = re.compile(r'mca: bml: Using (\w+) btl for send to \S+ on node (\S+)')
_UCX_EP = re.compile(r'ep_cfg\[\d+\]: tag\(([^)]*)\)')
_OFI_PROVIDER = re.compile(r'^\s*libfabric provider:\s*([^\s,;]+)', re.M)
_IMPI_PROVIDER = re.compile(r'MPI startup\(\):\s*(?:libfabric\s+)?provider:\s*(\S+)')
_IMPI_SHM_ONLY = re.compile(r'MPI startup\(\):\s*(?:I_MPI_FABRICS=shm|shm segment size)', re.I)
#: MPICH's MPIR_CVAR_DEBUG_SUMMARY names the netmod it loaded; for UCX it prints no transport of its own, so a build
#: moved from OFI onto UCX would otherwise report nothing at all (the drill's wrong-transport fault)
_MPICH_UCX_NETMOD = re.compile(r'^(?:\d+: )?==== UCX netmod Capability ====', re.M)
#: LAM/MPI 7.1 with LAM_MPI_SSI_rpi_verbose: each rank prints ``n0<pid> ssi:rpi:<module>: module initializing`` for
#: the RPI it selected (the usysv/sysv modules go on to list the tcp module's parameters, which name no choice).
_LAM_RPI = re.compile(r'ssi:rpi:(\w+): module initializing')


def transports(output: str) -> set[str]:
    """Transport names the MPI library reported in ``output`` (stdout + stderr of the run)."""
    found: set[str] = set()
    for m in _OMPI_BML.finditer(output):
        if m.group(1) != 'self':
            found.add(f'btl:{m.group(1)}')
    for m in _UCX_EP.finditer(output):
        for tl in m.group(1).split():
            if not tl.startswith('self/'):
                found.add(f'ucx:{tl}')
    for m in _OFI_PROVIDER.finditer(output):
        found.add(f'ofi:{m.group(1).rstrip(",;")}')
    for m in _IMPI_PROVIDER.finditer(output):
        found.add(f'impi:{m.group(1).rstrip(",;")}')
    if _IMPI_SHM_ONLY.search(output) and not any(t.startswith('impi:') for t in found):
        found.add('impi:shm')
    if _MPICH_UCX_NETMOD.search(output) and not any(t.startswith('ucx:') for t in found):
        found.add('mpich:ucx-netmod')
    for m in _LAM_RPI.finditer(output):
        found.add(f'lam:{m.group(1)}')
    return found


def check_transports(found: Iterable[str], pattern: str | None) -> list[str]:
    """Failure messages: every reported transport must match ``pattern``; none reported is a failure too."""
    found = sorted(set(found))
    if pattern is None:
        return []
    if not found:
        return [f'the MPI library reported no transport (expected one matching {pattern!r}); the report '
                f'variables from config/interconnects.yaml produced nothing']
    rx = re.compile(pattern)
    wrong = [t for t in found if not rx.search(t)]
    if wrong:
        return [f'MPI took another path: reported {", ".join(wrong)} (all reported: {", ".join(found)}), '
                f'expected only transports matching {pattern!r}']
    return []
