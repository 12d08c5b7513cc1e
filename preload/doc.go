// Command preload is libgocoll-preload.so: gocoll's collectives for an
// application already built with Open MPI or MPICH, in C or Fortran,
// without relinking it:
//
//	mpirun.openmpi -np 8 -x LD_PRELOAD=$GOCOLL/build/lib/libgocoll-preload.so ./app
//	mpiexec.mpich  -n 8 -genv LD_PRELOAD $GOCOLL/build/lib/libgocoll-preload.so ./app
//
// # Interception
//
// The library defines MPI_Allreduce, MPI_Reduce_scatter,
// MPI_Reduce_scatter_block and MPI_Allgather, their MPI-4 large-count
// _c forms, and the Fortran names Open MPI's bindings use (mpi_allreduce_,
// mpi_allreduce, mpi_allreduce__, MPI_ALLREDUCE and the mpi_f08 module's
// mpi_allreduce_f08_, and the same for the other three), the
// nonblocking and persistent forms and the calls that take requests (see
// Nonblocking and persistent collectives), and nothing else but
// gocoll_test_counter, a query for tests that no MPI library defines:
// a linker version script (exports.map) keeps the Go runtime's and cgo's
// symbols local, so the library can interpose on nothing but these.
// Preloaded, its definitions come before the host library's; every other
// MPI call goes straight to the host. Open MPI's Fortran libraries call
// PMPI_ functions directly, hence the Fortran names (fortran.c: handles
// converted with PMPI_Comm_f2c, PMPI_Type_f2c, PMPI_Op_f2c; Fortran
// MPI_IN_PLACE and MPI_BOTTOM recognised by the addresses of
// mpi_fortran_in_place_ and mpi_fortran_bottom_). MPICH's Fortran library
// calls the C MPI_ functions, so under MPICH the Fortran names forward to
// MPICH's own and the C interception does the rest.
//
// # Nonblocking and persistent collectives
//
// The library also defines MPI_Iallreduce, MPI_Ireduce_scatter,
// MPI_Ireduce_scatter_block, MPI_Iallgather, MPI_Allreduce_init,
// MPI_Reduce_scatter_init, MPI_Reduce_scatter_block_init,
// MPI_Allgather_init, their _c forms, and Open MPI 4.1's MPIX_ names of
// the persistent ones (its pcollreq extension). Each is decided as the
// blocking call is (the same checks, the tuner's choice, native,
// exclusions, reasons; never from a thread's memos nor on the engine's C
// half): where the host runs it, the host's PMPI_ form (PMPI_Iallreduce,
// PMPI_Allreduce_init or PMPIX_Allreduce_init, looked up with dlsym; a
// form the host lacks fails with a message) makes the request and the
// application gets the host's handle. Where gocoll runs it, the Go half
// makes a coll.Request (Comm.Iallreduce, Comm.AllreduceInit, ...) and the
// C half (requests.c) keeps its id in a slot of a static table of 4096,
// handing the application a handle the host never makes: on Open MPI,
// whose MPI_Request is a pointer, the slot's address; on MPICH, whose
// MPI_Request is an int, 0x04000000 | (slot + 1), whose top two bits
// (MPICH's handle kind) are 0, HANDLE_KIND_INVALID, and which is not
// MPI_REQUEST_NULL (0x2c000000): MPICH rejects such a handle as invalid
// should one ever reach it. GOCOLL_DEBUG=info prints a gocoll request's
// line when it is made (once for a persistent one), ending in
// " nonblocking" or " persistent".
//
// So the library also defines the calls that take requests: MPI_Wait,
// MPI_Test, MPI_Waitall, MPI_Testall, MPI_Waitany, MPI_Testany,
// MPI_Waitsome, MPI_Testsome, MPI_Start, MPI_Startall, MPI_Request_free,
// MPI_Request_get_status and MPI_Cancel. While no gocoll request exists
// in the process each goes straight to its PMPI_ function after one
// load; while some does, one compare per request (an address range, or a
// mask) tells them apart, and a call with none of gocoll's goes to PMPI
// unchanged. Mixed arrays are served request by request: gocoll's tested
// (which moves every gocoll request on), the host's with PMPI_Test
// (Waitall, Testall; Testall first looks at all of them with
// PMPI_Request_get_status and completes none unless all are complete:
// MPICH 4.0's own PMPI_Testall rejects its persistent collective
// requests) or with PMPI_Testany and PMPI_Testsome on their subset
// (Waitany, Testany, Waitsome, Testsome: the host knows which of its
// persistent requests are inactive), yielding the processor after 64
// idle rounds and sleeping 20 us after 1024. A completed gocoll request's
// status is empty (MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_ERROR MPI_SUCCESS or
// the error, count 0; each host's layout); a nonblocking one becomes
// MPI_REQUEST_NULL, a persistent one stays, inactive, until
// MPI_Request_free (which completes an active one first). Errors are the
// host's classes on the communicator's error handler, as for the
// blocking calls; a failed request in an array makes the call return
// MPI_ERR_IN_STATUS. MPI_Cancel of a gocoll request is an error
// (MPI_ERR_REQUEST): a collective cannot be cancelled.
//
// While a communicator has gocoll requests in flight (gc_comm.held), the
// engine's C half declines its blocking calls: they enter Go, where coll
// runs them after the requests, in call order. A blocking call the
// tuner gives the host runs at once: the host's collective and gocoll's
// requests use different communicators.
//
// gocoll's requests move when the application calls MPI_Wait, MPI_Test,
// or another intercepted call that tests them, and, as MPI's progress
// rule asks, while it blocks in any host call: under Open MPI from its
// progress loop (opal_progress_register, requests.c), with
// GOCOLL_PROGRESS_THREAD=1 on the progress thread. The thread calls the
// host's point-to-point functions from a thread of its own, which MPI
// allows only at MPI_THREAD_MULTIPLE: the start refuses it unless
// PMPI_Query_thread says the host provides that. Where neither moves
// them (MPICH without the thread) the nonblocking and persistent forms go
// to the host (GC_R_PROGRESS).
//
// Fortran: Open MPI's Fortran bindings call PMPI_ functions directly, so
// under Open MPI a Fortran program's nonblocking and persistent
// collectives and its MPI_Wait and friends go to the host untouched (only
// the blocking collectives have Fortran names here; a request made in C
// by gocoll must not be completed from Fortran there). MPICH's Fortran
// library calls the C MPI_ names, and its Fortran request handles are the
// C ints, so under MPICH Fortran programs get gocoll's requests as C
// programs do.
//
// Counters: gocoll_test_counter("MPI_Allreduce.requests") counts the
// nonblocking calls and persistent starts gocoll ran as requests,
// "MPI_Allreduce.requests_host" the nonblocking and persistent calls
// handed to the host (in no report).
//
// # Detection
//
// The library has no load-time reference to any MPI symbol, so it loads
// into shells, launchers and any process that never calls MPI, and into
// programs that load libmpi with RTLD_LOCAL (Python's mpi4py). Its one
// constructor (ahead.c) only checks that the program's calls can reach
// it: where the executable has its MPI linked in statically, or a library
// defining MPI_Allreduce comes before it in the lookup order, gocoll could
// never run, and the process stops with exit status 1 and a message
// naming the cause and the fix. At the first intercepted
// call it finds the host library with dlopen(RTLD_NOLOAD) of its soname
// (libmpi.so.40: Open MPI; libmpich.so.12: MPICH), falling back to the
// global scope (ompi_mpi_comm_world, MPIR_Dup_fn), and looks up the
// PMPI_ functions it needs with dlsym on that handle (pmpi.c). It starts
// gocoll only once PMPI_Initialized says MPI is running: a call before
// MPI_Init or after MPI_Finalize goes to the host, which reports it.
//
// # Handles
//
// The two ABIs disagree on every handle, so the C half carries handles
// as 64-bit integers (gc_handle). MPICH's are ints: the upper half of the
// register is garbage and is masked off. Predefined datatypes and ops are
// recognised by handle in small hash tables filled at start-up: MPICH's
// are fixed integers (the MPICH ABI, as in gocoll's own mpi.h); Open MPI's
// are the addresses of its predefined objects (ompi_mpi_double,
// ompi_mpi_op_sum, ...), looked up with dlsym(RTLD_DEFAULT) first, since an
// executable has its own copy-relocated copies and the application's
// handles point there. A datatype is registered only if the host agrees
// with gocoll on its extent. MPI_IN_PLACE is (void*)1 on Open MPI and
// (void*)-1 on MPICH; MPI_ANY_SOURCE, status layouts and error classes
// differ too (pmpi.c). Rank and size come from PMPI_Comm_rank and
// PMPI_Comm_size.
//
// # Communicators
//
// gocoll keeps its state of a user communicator as an attribute of it
// (PMPI_Comm_set_attr): one lookup per call finds it, its copy callback
// keeps it off MPI_Comm_dup's copies, and its delete callback frees it
// with the communicator. At the first call gocoll runs on a communicator
// (a collective moment: every rank is in the same call), it makes a
// private communicator with the same group (PMPI_Comm_create, so that the
// application's attribute copy callbacks never run for it), errors on it
// returning to gocoll; gocoll's own traffic uses only that communicator,
// so it can never match the application's receives, wildcards included.
// The delete callback frees it. MPI_Finalize deletes MPI_COMM_SELF's
// attributes first, while MPI still works: an attribute there frees
// whatever is left and, with GOCOLL_DEBUG=info, prints a report per rank
// (communicators set up and freed, private duplicates made, freed and
// live, calls run by gocoll and by the host).
//
// # Transports
//
// Setting a communicator up exchanges host names (bootstrap.HostID) with
// a key-value space whose fence is a PMPI_Allgather over the private
// communicator (bootstrap.Gathered). Ranks of one host talk through
// gocoll's shared-memory transport (transport/shm); ranks on other hosts
// through the host MPI's own PMPI_Isend/Irecv/Test on the private
// communicator (transport/hostmpi), so gocoll runs on any network the
// host MPI runs on; transport/route picks per pair (same host or not is
// symmetric). When every rank shares the host, the communicator also gets
// a shared segment (coll.Comm.AttachShared) for the shm algorithms.
// Setup ends with a PMPI_Allreduce on the user's communicator in which
// every rank says whether it succeeded: if any did not, all of them give
// the communicator to the host for good, so that no rank waits in gocoll
// for ranks that went to the host. GOCOLL_TRANSPORT=hostmpi uses the host
// MPI between every pair (for tests, and for comparisons).
//
// Every PMPI call gocoll makes runs on the goroutine that entered Go from
// the intercepted call, and a C -> Go -> C call stays on one OS thread, so
// the application's thread is the only one calling MPI: programs
// initialized with MPI_THREAD_FUNNELED or SERIALIZED keep their promise.
//
// # Fallback
//
// A call goes to the host's PMPI_ function, decided in C before entering
// Go wherever possible (entering Go costs about 0.2 us, a small native
// collective about 0.5 us), when: MPI is not running; the communicator is
// MPI_COMM_NULL or an intercommunicator; GOCOLL_<COLLECTIVE>_ALGORITHM is
// native; a datatype is derived or one gocoll does not know; the op is
// MPI_OP_NULL, MPI_REPLACE or MPI_NO_OP, or a predefined op gocoll does not
// define on the datatype; allgather's send and receive sizes differ; a
// buffer with data is NULL; a buffer is CUDA device memory and gocoll has
// no CUDA runtime (GOCOLL_CUDA=off, or no driver; device.c: if the
// process has loaded libcuda, cuPointerGetAttribute says so); the
// communicator could not be set up; or the tuner chose native (never for
// device memory, see below, nor for a pair the host is wrong on: host.go
// probes the host's reductions at the start, the communicator's ranks
// agree on the exclusions at its first call, and the tuner chooses among
// gocoll's algorithms for such a call). User-defined ops are gocoll's: it applies them with
// PMPI_Reduce_local, so C and Fortran functions alike, and honours
// PMPI_Op_commutative (non-commutative ops are reduced in rank order).
// With GOCOLL_DEBUG=info each call prints one line, gocoll's
//
//	gocoll: rank R: MPI_Allreduce comm=NAME bytes=B p=P algorithm=X (tuned|forced)[ memory=device][ nonblocking| persistent]
//
// or the host's, with the reason:
//
//	gocoll: rank R: MPI_Allreduce -> host MPI (intercommunicator)
//
// Every rank of a communicator must make the same choice for a call, or
// some would wait in gocoll for ranks in the host's collective. The
// tuner's choice depends only on what all ranks share (collective, total
// bytes, ranks, op commutativity, whether they share a host). Fallbacks
// are per rank: the MPI standard already requires the same datatype and
// op on every rank of a reduction, but a program that passes a derived
// datatype (or device memory) on some ranks and a predefined one (host
// memory) on others, legal for MPI_Allgather, would hang.
//
// # CUDA device memory
//
// loadConfig reads GOCOLL_CUDA and GOCOLL_CUDA_IPC (coll.Config.LoadDevice):
// unless GOCOLL_CUDA is off, the driver is loaded (dlopen of libcuda.so.1,
// never initialised in auto mode) at the first collective after MPI_Init,
// and gc_go_start tells the C half (gc_cuda) whether gocoll has a CUDA
// runtime. With one, gocoll runs calls on device memory itself, whether
// the host MPI is CUDA-aware or not: coll.Comm classifies the buffers and
// runs the schedule on the device executor (staged through pinned host
// memory, or CUDA IPC between the processes of a node; user-defined ops
// are applied with PMPI_Reduce_local to staged host segments). The C half
// asks the driver about the buffers before its decision cache
// (gocoll_cuda_is_device, the question capi's fast path and gocoll's
// classification ask: nothing until the process has initialised CUDA,
// then one cuPointerGetAttributes per buffer); a call on device memory is
// marked (gc_call.device), bypasses the cache, which holds the choices
// for host memory, and is decided in Go with Params.DeviceMemory by the
// device tuner: the same GOCOLL_*_ALGORITHM, GOCOLL_FALLBACK, tuning file
// and measured rules, less every native one (config.gocollOnly, which
// also serves the calls the host must not run), so that it never picks the
// host MPI (which may not be CUDA-aware) nor an shm algorithm (the CPU
// cannot touch device memory); a forced shm algorithm falls back to its
// choice, as GOCOLL_FALLBACK says. GOCOLL_<COLLECTIVE>_ALGORITHM=native
// still sends such calls to the host: the user asked. Before running a
// device call, Go checks that gocoll's own classification agrees (it
// fails the call rather than let the host executor touch device memory).
// Without a runtime (GOCOLL_CUDA=off, or no driver) device buffers go to
// the host MPI, as in the fallback list above. GOCOLL_DEBUG=info ends the
// line of a device call with memory=device, and the finalize report
// counts the device calls gocoll ran. As with host memory, every rank of
// a call must pass device memory, or every rank host memory.
//
// # Choosing native or gocoll
//
// The preload registers the host MPI's collective with the tuner as one
// more candidate, "native" (package preload/native, as
// tuner.Options.Extra); the tuner answers with a typed tuner.Choice (its
// Source, the algorithm or the candidate, the reason). With
// GOCOLL_*_ALGORITHM=auto the rules are GOCOLL_TUNING_FILE's, then the
// crossovers measured on the reference machine for this host MPI
// (rules.go, generated by preload/tune), then tuner.Defaults. The C half
// caches the tuner's answer per communicator, collective, size and op
// commutativity, so a repeated call never enters Go to be handed to the
// host. Before a communicator is set up the tuner assumes its ranks share
// a host; once set up it knows, and is asked again (gc_forget empties the
// communicator's cache). Calls on device memory are never cached (see
// CUDA device memory). GOCOLL_DEBUG=info bypasses the cache, asking the
// tuner at every call. In front of the cache, each thread remembers its
// last two calls of each collective that the tuner gave the host
// (shim.c, "the fast path"): a call with the same communicator,
// datatype, predefined op and count goes to the host without the
// checks, void once a communicator state is deleted, a cache emptied or
// MPI finalized.
//
// # Counters
//
// The library counts, per collective, which path each call took, in the
// same table as libgocoll.so (coll/counters: coll counts the calls
// gocoll runs; the C half, preload.h, the host's calls and the cache's
// decisions, each thread in a block of its own, a host call decided from
// the cache costing one, as before there were counters): the calls gocoll
// ran (go) and, of those, each algorithm's; the calls whose forced
// algorithm could not run, so that the tuner's choice ran (fallback,
// gocoll's or the host's); the calls the host MPI ran, for any reason
// (host); the calls decided from the cache without entering Go
// (cached); and the small shm calls the shared-memory engine's C half ran
// without entering Go (fast: not in go, nor in shm). GOCOLL_REPORT=1 changes nothing about the calls and prints
// them at MPI_Finalize, one line per collective with a count other than
// zero, on every rank:
//
//	gocoll: rank R: report: MPI_Allreduce fast=4 go=5 ring=3 shm=2 fallback=1 host=7 cached=9
//
// (the algorithms sorted by name; zero counts left out but go's). Tests
// read the same counters with gocoll_test_counter("MPI_Allreduce.cached"),
// found with dlsym(RTLD_DEFAULT): 0 for a counter never counted, -1 for
// an unknown key. "MPI_Allreduce.remembered", in no report, counts the
// host calls that took the fast path (also counted as host and cached).
//
// # Robustness
//
// No Go panic crosses into C: every exported Go function recovers, and a
// panic in a collective becomes MPI_ERR_INTERN through the communicator's
// error handler (PMPI_Comm_call_errhandler), as every gocoll error does,
// after a message on stderr unless the handler is MPI_ERRORS_RETURN.
// GOCOLL_PRELOAD_FAULT=N injects a panic into the Nth call, for tests, in
// a library built with -tags gocolltest only (fault.go).
// Bad GOCOLL_ variables are reported once and fail every collective the
// same way.
//
// # Signals
//
// Loading a Go library installs the Go runtime's handlers for SIGSEGV,
// SIGBUS, SIGFPE, SIGPIPE and the signals it uses itself (SIGURG for
// preemption), chaining to handlers installed before it. Open MPI then
// finds those signals taken and does not install its own backtrace
// handlers: a crash under the preload prints no Open MPI backtrace (run
// without the preload to get one). MPICH's and UCX's handlers, installed
// before, are chained and still run. A crash in the application's own
// code is still a crash; a crash inside gocoll's Go code prints a Go
// stack trace.
//
// # Costs
//
// Each rank gains the Go runtime's few threads and a few MB of memory;
// each communicator gocoll runs on, a private communicator, a
// shared-memory segment per host (4 MiB for 4 local ranks) and, on one
// host, the shm algorithms' segment; at its first call on device memory,
// the device executor's streams and pinned staging buffers; they are
// freed with the communicator.
package main
