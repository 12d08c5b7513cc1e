/*
 * mainfirst: writes "main" to standard error first thing, for
 * TestLoadingWaitsForGo, which runs it with a gocoll library loaded and
 * GODEBUG=inittrace=1 and checks that the library's Go start-up (whose
 * last line is "init main @...") was over before main began. Calls no MPI:
 * like a shell or launcher under LD_PRELOAD.
 */
#include <unistd.h>

int main(void) {
    write(2, "main\n", 5);
    return 0;
}
