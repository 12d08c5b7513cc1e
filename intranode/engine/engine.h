/*
 * The C half of gocoll's shared-memory collective engine (package
 * intranode is the Go half): small collectives on a communicator's
 * segment, run entirely in C by code that must not enter Go for them (the
 * C ABI's entry points, capi/fast.c). Both halves follow one protocol on
 * one layout (intranode/doc.go), and the C half's constants come from Go,
 * generated into engine_gen.h (go generate ./intranode/engine).
 */
#ifndef GOCOLL_ENGINE_H
#define GOCOLL_ENGINE_H
#include "engine_gen.h"

/* GOCOLL_SHM_DECLINE: the call is not one for the engine (too large, an
 * unknown kind or op, ...); nothing was done, run it elsewhere. */
#define GOCOLL_SHM_DECLINE (-1)
/* The largest message (bytes) the reductions take: intranode.DefaultSlot,
 * the longest allreduce the Go half takes in one step by default. Less
 * where the segment's steps are shorter (GOCOLL_SHM_SLOT). */
#define GOCOLL_SHM_MAX (128 << 10)

struct gocoll_shm;
/* A wait function finishes a step the engine stopped spinning for (Go:
 * sleep on the bell, watch for dead peers and the timeout) and returns 0
 * or the caller's error code, which the engine returns as it is. call is
 * a GOCOLL_CALL_ code. */
typedef int (*gocoll_shm_wait_fn)(struct gocoll_shm *s, int call);

/* One rank's view of a segment (intranode.Layout). */
struct gocoll_shm {
    char *base;
    int p, rank, spins, crowded;
    int warm; /* the data slots are mapped (warm in engine.c) */
    long slot, data_off;
    gocoll_shm_wait_fn wait; /* NULL: spin (sched_yield) until done */
    long id;                 /* the owner's name for it (capi: the MPI_Comm) */
};

void gocoll_shm_init(struct gocoll_shm *s, void *base, int p, int rank, long slot, long data_off, int crowded,
                     gocoll_shm_wait_fn wait, long id);

/* Each returns GOCOLL_SHM_DECLINE, 0, or a wait function's error code.
 * in == NULL means in place (the input is in out, where MPI_IN_PLACE
 * puts it). kind is a GOCOLL_SHM_K_ code, size its bytes, op a
 * GOCOLL_SHM_OP_ code. Every rank of the segment must make the same call
 * with the same counts: it decides alike on every rank. */
/* gocoll_shm_canonical: reductions combine the p contributions in the
 * canonical association of reproducible mode (set from GOCOLL_REPRODUCIBLE
 * before the first call); 0: left to right, as the Go half's Folded. */
extern int gocoll_shm_canonical;
int gocoll_shm_allreduce(struct gocoll_shm *s, const void *in, void *out, long count, int kind, int size, int op);
/* counts: elements of block q, or NULL for count each (reduce_scatter_block). */
int gocoll_shm_reduce_scatter(struct gocoll_shm *s, const void *in, void *out, const int *counts, long count, int kind,
                              int size, int op, int call);
/* bytes: this rank's block; out holds p blocks. */
int gocoll_shm_allgather(struct gocoll_shm *s, const void *in, void *out, long bytes);
int gocoll_shm_bcast(struct gocoll_shm *s, void *buf, long bytes, int root);
int gocoll_shm_barrier(struct gocoll_shm *s);

#ifdef GOCOLL_ENGINE_PROFILE
/* Built with -DGOCOLL_ENGINE_PROFILE (bench/engineprof.c, never the
 * libraries), each call adds the time stamp counter's ticks it spends in
 * each stage here: copying into its slot, publishing, waiting for the
 * peers, and reducing or copying out of the slots. */
enum { GOCOLL_PROF_IN, GOCOLL_PROF_PUBLISH, GOCOLL_PROF_WAIT, GOCOLL_PROF_OUT, GOCOLL_PROF_STAGES };
extern unsigned long long gocoll_shm_prof[GOCOLL_PROF_STAGES];
#endif
#endif
