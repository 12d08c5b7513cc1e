#!/bin/sh
# Installs what tests/cluster needs, when it is missing: Slurm (slurmctld,
# slurmd, srun and the pmi2 and pmix plugins: Debian's slurm-wlm) and
# munge, its authentication. The tests start their own daemons; nothing is
# configured as a system service here (the packages may start their own). Debian packages; needs root (or sudo).
set -e
missing=""
need() { command -v "$1" >/dev/null 2>&1 || missing="$missing $2"; }
need slurmctld slurm-wlm
need slurmd slurm-wlm
need srun slurm-wlm
need munged munge
[ -z "$missing" ] && exit 0
echo "gocoll: installing$missing" >&2
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq $(echo $missing | tr ' ' '\n' | sort -u) >/dev/null
