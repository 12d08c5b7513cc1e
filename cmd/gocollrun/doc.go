// Command gocollrun starts the ranks of a gocoll (or any PMI-1) program
// and serves them PMI-1, as MPICH's mpiexec does:
//
//	gocollrun -n N [--host h1,h2,... | --host h1:2,h2:2 | --host node[01-16] | --hostfile FILE]
//	          [--map-by slot|node] [--launcher 'ssh %h'] [--proxy-path PATH]
//	          [--bind ADDR] [--timeout DUR] [--tag-output] [-v] prog [args...]
//	gocollrun --info
//
// Hosts come from --host, --hostfile or, when neither is given inside a
// Slurm allocation, SLURM_JOB_NODELIST, with SLURM_TASKS_PER_NODE as the
// slots where set (-v says which). A host list is
// comma-separated, each entry a host or host:slots, and a host may be a
// Slurm-style range: node[01-16,20] (zero-padding kept), a[1-2]-ib,
// r[1-2]n[1-4]. A hostfile has a host per line, as "host", "host:N" or
// "host slots=N", and # comments. Without hosts every rank runs here.
//
// Placement (--map-by slot, the default) is in blocks: with h1,h2 and
// -n 4, ranks 0 and 1 run on h1, 2 and 3 on h2; with slot counts
// (h1:2,h2:2) hosts fill in order. --map-by node deals the ranks round
// robin over the hosts (0 and 2 on h1, 1 and 3 on h2), skipping hosts
// whose slots are full. With slot counts, N may not exceed the slots.
//
// Ranks on "localhost" are started directly and reach the PMI server
// through an inherited socket (PMI_FD). For every other host gocollrun
// starts one proxy, all hosts at once: the launcher template, %h replaced
// by the host (`ip netns exec %h` for hosts emulated by network
// namespaces), runs `gocollrun --proxy ADDR INDEX` there (this gocollrun's
// own path, or --proxy-path), which dials gocollrun at --bind (by default
// every interface, advertised by host name) and proves that it knows the
// job secret, which it reads from standard input (never the command line;
// on the wire only an HMAC of it travels). The proxy starts its host's
// ranks, each with PMI_FD on a socket it relays to gocollrun's PMI server,
// all of them over its one connection, with their output and exit
// statuses; it signals its ranks when gocollrun says so, and kills them
// if the connection drops, so that no rank outlives its job.
//
// Every rank gets gocollrun's environment plus PMI_RANK, PMI_SIZE,
// PMI_FD, GOCOLL_JOB_ID, GOCOLL_JOB_SECRET and GOCOLL_HOST (its host
// entry, "localhost" otherwise). A remote rank's environment is its
// proxy's (what the launcher or remote login sets) with gocollrun's
// variables set over it, less those that describe gocollrun's host or
// session (HOSTNAME, PWD, SSH_*, DISPLAY, ...); it starts in gocollrun's
// working directory where that exists. Ranks read standard input from
// /dev/null. Their output is forwarded a whole line at a time, stdout to
// stdout and stderr to stderr, prefixed with [rank] under --tag-output.
//
// gocollrun waits for every rank and exits with the first non-zero status
// (128+n for a death by signal n). A rank that fails or is killed while
// others run, a rank that calls PMI abort, a PMI barrier that an exited
// rank can never enter, a proxy or launcher that ends before reporting
// its ranks (or whose proxy does not connect within 60 s), --timeout
// (exit 124) and SIGINT, SIGTERM or SIGHUP to gocollrun (passed on to the
// ranks; exit 128+n) all end the job: each rank's process group gets
// SIGTERM (or the signal received) and, 3 s later, SIGKILL, and gocollrun
// says on standard error which rank (and host) did what. A rank that
// exits 0 without PMI finalize while others still run draws a warning.
// Finally gocollrun deletes the job's leftover shared-memory segments,
// /dev/shm/gocoll-<GOCOLL_JOB_ID>-*, on this host, and each proxy those
// on its own.
package main
