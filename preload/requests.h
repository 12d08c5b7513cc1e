/*
 * What the collectives' entry points (shim.c) ask of gocoll's requests
 * (requests.c).
 *
 * The dependency goes one way, shim.c to requests.c. shim.c decides every
 * collective call, blocking, nonblocking (MPI_I*) or persistent
 * (MPI_*_init), with one skeleton; it hands requests.c the calls that
 * gocoll runs as requests, and the communicator states it frees.
 * requests.c keeps the request slots and the completion calls (MPI_Wait,
 * MPI_Test, MPI_Start, ...) and never calls into the decision: it counts
 * through counters.h and moves requests through the Go half. That is why
 * the MPI_I* and MPI_*_init entry points are in shim.c, beside the
 * blocking ones whose decision they share, and not here.
 */
#ifndef GOCOLL_PRELOAD_REQUESTS_H
#define GOCOLL_PRELOAD_REQUESTS_H

#include "preload.h"

/* gc_requests_movable reports whether something moves gocoll's requests
 * while the program blocks in a host call (else the host runs the
 * nonblocking and persistent forms: GC_R_PROGRESS). */
int gc_requests_movable(void);

/* gc_request_run makes a request of call c, which gocoll runs, in form f
 * and hands the application its handle; it returns as shim.c's run. */
int gc_request_run(struct gc_call *c, const struct gc_form *f);

/* gc_requests_forget: cs is being freed; no request may use it. */
void gc_requests_forget(struct gc_comm *cs);

#endif
