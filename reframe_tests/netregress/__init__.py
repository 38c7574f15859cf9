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
  base           abstract checks: NetregressCheck -> KernelCheck -> MPI/TCP benchmark bases
  peers          checks that run a peer (iperf3, NetPIPE, IMB) beside our kernels
  allpairs       every link of a fabric; nodeprobe: every node
  osu_npb        OSU and NAS output parsing
"""
