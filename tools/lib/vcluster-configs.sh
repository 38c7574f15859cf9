# Sourced by tools/vcluster: the configuration files of the cluster (Slurm, slurmdbd, MariaDB, munge, the
# nodes' hosts file and sysfs views). Uses the globals and helpers tools/vcluster defines before sourcing it.

# --- configuration files ---------------------------------------------------------------------------------------
write_configs() {
  mkdir -p "$S"/{etc,log,pids,run,ctld-state,spool,tmp,sysfs,munge}
  chmod 711 "$S/munge"            # clients need to reach the socket; the key itself stays 0400
  [ -s "$S/munge/munge.key" ] || { head -c 1024 /dev/urandom | write_secret "$S/munge/munge.key"; chmod 400 "$S/munge/munge.key"; }
  [ -s "$S/etc/db.pass" ] || head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | write_secret "$S/etc/db.pass"
  local sock=$S/munge/munge.sock f n pw
  pw=$(cat "$S/etc/db.pass")
  # the accounting user's client options: the password in a 0600 file, never on a command line
  printf '[client]\nuser=slurm\npassword=%s\nhost=127.0.0.1\nport=%s\n' "$pw" "$VC_MARIADB_PORT" \
    | write_secret "$S/etc/db-slurm.cnf"

  { echo "127.0.0.1 localhost"
    echo "$(gateway fast) $(hostname -s)"
    for n in $(all_nodes); do echo "$(node_ip "$n") $n"; done
  } >"$S/etc/hosts"

  {
    cat <<EOF
# written by tools/vcluster up; edit config/vcluster.env instead
ClusterName=$VC_CLUSTER
# slurmctld only runs where SlurmctldHost names this host; nodes reach it on the fast bridge's address
SlurmctldHost=$(hostname -s)($(gateway fast))
MailProg=/bin/true
SlurmctldPort=$VC_SLURMCTLD_PORT
SlurmdPort=$VC_SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$sock
CredType=cred/munge
StateSaveLocation=$S/ctld-state
SlurmdSpoolDir=$S/spool/%n
SlurmctldPidFile=$S/run/slurmctld.pid
SlurmdPidFile=$S/run/slurmd-%n.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd-%n.log
TmpFS=$S/tmp/%n
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmctldTimeout=30
# a dead node is pinged every SlurmdTimeout/3 s and set DOWN after SlurmdTimeout s without an answer; measured
# on a private one-node Slurm 22.05.8 here (slurmd SIGKILLed): 15 -> not responding (*) after 20.5-20.7 s, down*
# after 33.3-33.7 s (3 runs); 20 -> * 15.6-20.8 s, down* 28-42 s (3); 30 -> * 16-31 s, down* 29-44 s (2)
SlurmdTimeout=15
InactiveLimit=0
KillWait=5
MinJobAge=60
SchedulerType=sched/backfill
# slurmctld starts a batch job at its next scheduling pass, at most every batch_sched_delay s (default 3); one pass
# a second is what a suite of 400 short jobs in a row needs. Measured here, 2-node sbatch of \`srun true\`: submit ->
# start 2.9 s with the default, 0.4-0.9 s with 0 (the background pass runs once a second).
SchedulerParameters=batch_sched_delay=0
# One job at a time on the shared CPUs (config/vcluster.env), queued in Slurm rather than held back by ReFrame.
Licenses=$VC_HOST_LICENSE:1
# A job waiting for the license starts when the last one's epilog-complete message arrives: with no Epilog slurmd
# never sends it (the terminate reply stands in) and only the once-a-second pass starts the next job. Measured
# here, a queued 2-node job started 0.16-0.85 s after the one ahead ended without, 36-45 ms after with /bin/true.
Epilog=/bin/true
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$VC_SLURMDBD_PORT
# slurmctld authenticates to slurmdbd through munge: with a private munge socket this must name it
AccountingStoragePass=$sock
EOF
    if topology_on; then
      echo "# the switch tree of topology.conf (VC_<FABRIC>_LEAVES): scontrol show topology"
      echo "TopologyPlugin=topology/tree"
    fi
    for f in "${FABRICS[@]}"; do
      for n in $(nodes_of "$f"); do
        echo "NodeName=$n NodeAddr=$(node_ip "$n") CPUs=$VC_CPUS_PER_NODE State=UNKNOWN"
      done
    done
    local v
    for f in "${FABRICS[@]}"; do
      v="VC_PARTITION_${f^^}"
      echo "PartitionName=${!v} Nodes=$(nodes_of "$f" | tr ' ' ',') MaxTime=INFINITE State=UP OverSubscribe=YES"
    done
    if [ -n "${VC_ALL_PARTITION:-}" ]; then
      echo "PartitionName=$VC_ALL_PARTITION Nodes=ALL MaxTime=INFINITE State=UP OverSubscribe=YES"
    fi
  } >"$CONF"

  if topology_on; then
    local k spines=() members
    {
      echo "# written by tools/vcluster up from VC_<FABRIC>_LEAVES; switch <f>-leafK is bridge ${P}<f>-leafK,"
      echo "# <f>-spine is bridge ${P}<f>; the uplink of <f>-leafK is the veth pair ${P}<f>-upK / ${P}<f>-spK"
      for f in "${FABRICS[@]}"; do
        k=$(leaves "$f")
        if [ "$k" = 0 ]; then
          # a flat fabric is one switch: topology/tree only places jobs on nodes some switch holds
          echo "SwitchName=$f-spine Nodes=$(hostlist $(nodes_of "$f"))"
        else
          for l in $(seq 1 "$k"); do
            members=(); for n in $(nodes_of "$f"); do [ "$(leaf_of "$n")" = "$l" ] && members+=("$n"); done
            echo "SwitchName=$f-leaf$l Nodes=$(hostlist "${members[@]}")"
          done
          echo "SwitchName=$f-spine Switches=$(hostlist $(seq -f "$f-leaf%g" 1 "$k"))"
        fi
        spines+=("$f-spine")
      done
      # the fabrics meet only in the host namespace (the routes through the gateways); one root keeps the tree whole
      echo "SwitchName=host Switches=$(IFS=,; echo "${spines[*]}")"
    } >"$S/etc/topology.conf"
  else
    rm -f "$S/etc/topology.conf"
  fi

  {
    cat <<EOF
AuthType=auth/munge
AuthInfo=socket=$sock
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$VC_SLURMDBD_PORT
SlurmUser=root
PidFile=$S/run/slurmdbd.pid
LogFile=$S/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$VC_MARIADB_PORT
StorageUser=slurm
StoragePass=$pw
StorageLoc=slurm_acct_db
EOF
  } | write_secret "$S/etc/slurmdbd.conf"
}
