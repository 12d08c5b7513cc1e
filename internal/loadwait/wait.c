/*
 * The constructor that waits for the Go runtime (see loadwait.go). It runs
 * after the runtime's own initializer, which the linker puts first in the
 * library's init array (go.o comes before the cgo objects), so the runtime's
 * thread exists and the call returns once it is done. In an executable (a
 * package's go test binary) the runtime starts only after the
 * constructors: a call into Go there would never return, so it is skipped.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sys/auxv.h>
#include "_cgo_export.h"

static int in_executable(void) {
    Dl_info self, entry;
    if (!dladdr((void *)in_executable, &self)) return 1; /* unknown: do not risk the wait */
    if (!dladdr((void *)getauxval(AT_ENTRY), &entry)) return 1;
    return self.dli_fbase == entry.dli_fbase;
}

__attribute__((constructor)) static void wait_for_go(void) {
    if (!in_executable()) gocollLoadWait();
}
