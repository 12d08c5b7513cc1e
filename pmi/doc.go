// Package pmi speaks PMI-1, the "simple" process-management protocol of
// MPICH's launchers, from both ends: Client is how a rank started by
// mpiexec.hydra or gocollrun finds its rank, size and peers (it implements
// bootstrap.Launcher), and Server is the launcher's side, which gocollrun
// runs. Client2 speaks PMI-2, the client side only, for Slurm's srun
// --mpi=pmi2 and hydra (pmi2.go, wire2.go); FromEnv picks the version.
//
// The wire protocol is one line per command or reply, fields separated by
// single spaces:
//
//	cmd=init pmi_version=1 pmi_subversion=1   -> cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0
//	cmd=get_maxes                             -> cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024
//	cmd=get_appnum                            -> cmd=appnum appnum=0
//	cmd=get_my_kvsname                        -> cmd=my_kvsname kvsname=<name>
//	cmd=put kvsname=<name> key=k value=v      -> cmd=put_result rc=0 msg=success
//	cmd=barrier_in                            -> cmd=barrier_out (once every rank is in)
//	cmd=get kvsname=<name> key=k              -> cmd=get_result rc=0 msg=success value=v
//	                                             (rc=-1 msg=key_k_not_found value=unknown)
//	cmd=finalize                              -> cmd=finalize_ack
//	cmd=abort exitcode=N                      (no reply: the launcher kills the job)
//
// A rank reaches its server through an inherited socket named by PMI_FD,
// with PMI_RANK and PMI_SIZE, or by dialing PMI_PORT=host:port; there it
// first sends "cmd=initack pmiid=<PMI_ID>" and is told its size and rank
// ("cmd=initack", "cmd=set size=N", "cmd=set rank=R", "cmd=set debug=0").
//
// What MPICH 4.0.2's hydra does, measured (see hydra_test.go):
//
//   - By default it sets PMI_FD (a Unix socket), PMI_RANK and PMI_SIZE;
//     with -pmi-port it sets PMI_PORT=<hostname>:<port> and PMI_ID=<rank>
//     but neither PMI_RANK nor PMI_SIZE, so initack is the only way to learn
//     them.
//   - maxes are kvsname_max=256 keylen_max=64 vallen_max=1024, counting a
//     terminating NUL: longer keys and values are silently cut to 63 and
//     1023 bytes. The client therefore refuses them.
//   - A put is invisible to every get, the putting rank's own included,
//     until the next barrier; a second put of a key after a barrier
//     replaces the value. Values may be empty and may contain '='; a space
//     ends a value.
//   - abort: hydra kills every rank and exits with the exit code; it reads
//     no message (extra fields are ignored), so Client.Abort prints its
//     message itself — but hydra may kill the job before forwarding that
//     last stderr output, so under hydra the message is sometimes lost.
//   - A rank that exits (even with status 0) without finalize makes hydra
//     kill the job; an unknown command also ends the job.
//   - hydra also speaks PMI-2 on PMI_FD and PMI_PORT. There a key put
//     again after a fence keeps its first value, and PMI-2's abort is an
//     unknown command: the job ends with status 255, not the code.
//
// What Slurm 22.05's pmi2 plugin (srun --mpi=pmi2) does, measured (see
// tests/cluster):
//
//   - It sets PMI_FD, PMI_RANK, PMI_SIZE and PMI_JOBID (<job>.<step>),
//     and speaks both versions, chosen by the init line.
//   - PMI-2: fullinit must carry pmijobid, pmirank and threaded; appnum is
//     -1; kvs-get ignores jobid and srcid. It has no escape for ';'. An
//     abort with isworld=TRUE kills the step (tasks end by SIGKILL).
//   - PMI-1: a request is read with one read() of at most 1024 bytes, so a
//     longer put line (a value near vallen_max) is cut and the job hangs;
//     Client keeps its Allgather's lines within 1024 bytes.
package pmi
