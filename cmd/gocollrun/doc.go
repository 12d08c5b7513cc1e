// Command gocollrun starts the ranks of a gocoll (or any PMI-1) program
// and serves them PMI-1, as MPICH's mpiexec does:
//
//	gocollrun -n N [--host h1,h2,... | --host h1:2,h2:2] [--launcher 'ssh %h']
//	          [--bind ADDR] [--timeout DUR] [--tag-output] prog [args...]
//	gocollrun --info
//
// Placement is in blocks: with --host h1,h2 and -n 4, ranks 0 and 1 run on
// h1, 2 and 3 on h2; with slot counts (h1:2,h2:2) hosts fill in order.
// Ranks on "localhost" (all of them without --host) are started directly
// and reach the PMI server through an inherited socket (PMI_FD). Ranks on
// other hosts are started through the launcher template, %h replaced by
// the host (`ip netns exec %h` for hosts emulated by network namespaces),
// and dial the server (PMI_PORT) at --bind, by default every interface,
// advertised by host name. They identify themselves with PMI_ID, which is
// random (a positive int32, as MPICH's client parses it) rather than the
// rank as under hydra, so that no other process can take a rank's place.
//
// Every rank gets gocollrun's environment plus PMI_RANK, PMI_SIZE,
// PMI_FD or PMI_PORT and PMI_ID, GOCOLL_JOB_ID, GOCOLL_JOB_SECRET and
// GOCOLL_HOST (its --host entry, "localhost" otherwise). An exec-style
// launcher passes the environment on by itself; through ssh or rsh the
// rank runs under a small shell script that sets it, with the secret read
// from standard input rather than the command line. Ranks read standard
// input from /dev/null. Their output is forwarded a whole line at a time,
// prefixed with [rank] under --tag-output.
//
// gocollrun waits for every rank and exits with the first non-zero status
// (128+n for a death by signal n). A rank that fails or is killed while
// others run, a rank that calls PMI abort, a PMI barrier that an exited
// rank can never enter, --timeout (exit 124) and SIGINT, SIGTERM or SIGHUP
// to gocollrun (passed on to the ranks; exit 128+n) all end the job: each
// rank's process group gets SIGTERM (or the signal received) and, 3 s
// later, SIGKILL, and gocollrun says on standard error which rank did
// what. A rank that exits 0 without PMI finalize while others still run
// draws a warning. Finally gocollrun deletes the job's leftover
// shared-memory segments, /dev/shm/gocoll-<GOCOLL_JOB_ID>-*, on this host.
package main
