"""netregress: the measuring library every netregress check builds on.

It holds no site data: systems, partitions and MPI builds come from the ReFrame configuration and its ``extras``
(netregress.site loads ours and a site's), how an interconnect is forced for an MPI family from the interconnect
table, what a result must reach from the references. It imports nothing from ``netregress_postrun``, the package
that reads finished runs (tests/python/test_packages.py keeps it so); what is in this package is what the host
baseline's measurement version hashes.

Modules:
  paths          repository-relative locations (config, run directory, prebuilt kernels)
  site           the site layer: ReFrame settings, interconnects, references, Spack environments of a site
  results        the one helper that reads a kernel's JSON result (sanity + performance)
  references     reference lookup: missing reference -> error, never a silent pass
  baselines      the host baseline of the embedded systems and its bands
  figures        what a figure is (latency, ratio, link-bound or CPU-bound throughput)
  interconnects  loader for the interconnect x MPI-family table
  provenance     /proc/net/dev arithmetic and MPI transport reports
  launch         a launcher built from the environment's launch template
  slurm          Slurm's node states and node lists, as the checks need them
  build          build fixtures (prebuilt | cmake | spack seam); spack_build: the Spack path
  base           the abstract check: NetregressCheck (interconnect, placement, counters, sanity, references)
  bands          where each figure's reference and band come from (host baseline, committed, fixed bands)
  plugins        exit status, exponential sweeps, our kernels' build fixture and JSON result
  mpicheck       MpiCheck, MpiKernelCheck: an MPI environment forced onto the interconnect
  tcppair        TcpPairCheck, TcpKernelCheck: a server on the first node, a client on the last
  peers          NetPIPE and IMB checks; roundtrip: a peer's round trip beside ours; iperf: iperf3 and yardstick
  allpairs       every link of a fabric (linkplan: rounds and job scripts; linkverdict: results and verdicts);
                 nodeprobe: every node
  osu_npb        OSU and NAS output parsing
"""
