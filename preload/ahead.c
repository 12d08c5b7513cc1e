/*
 * The one check the library makes at load time: that its MPI_Allreduce
 * is the one the program's calls reach. It is not when the executable
 * has its MPI linked in statically (libmpich.a: the executable's own
 * MPI_ functions take every call, linked or LD_PRELOADed gocoll never
 * sees one), or when a library that defines the MPI_ names comes first
 * in the lookup order (-lmpich before -lgocoll-preload, a tool
 * LD_PRELOADed ahead of it). The program would then run on the host's
 * collectives as if gocoll were absent; gocoll being present but unable
 * to run is an error instead: the process stops, before main, with a
 * message that names the cause and the fix, and exit status 1.
 *
 * Processes that never use MPI (shells, launchers, Python before mpi4py)
 * pass: the only MPI_Allreduce they have is this library's, and their
 * executables define no PMPI_Allreduce. A library opened with
 * dlopen(RTLD_LOCAL) is not in the global scope: nothing to check.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const shared_mpis[] = {"libmpi.so.40", "libmpi.so", "libmpich.so.12", "libmpi.so.12", "libmpich.so", NULL};

/* shared_mpi reports whether a shared host MPI is loaded. */
static int shared_mpi(void) {
    for (int i = 0; shared_mpis[i]; i++) {
        void *h = dlopen(shared_mpis[i], RTLD_LAZY | RTLD_NOLOAD);
        if (h) {
            dlclose(h);
            return 1;
        }
    }
    return 0;
}

/* static_mpi reports whether the executable defines PMPI_Allreduce in its
 * symbol table (not its dynamic one, which holds only what shared objects
 * needed at link time): an MPI linked in statically. A stripped executable
 * has no symbol table; it passes. */
static int static_mpi(void) {
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    struct stat st;
    int found = 0;
    void *m = MAP_FAILED;
    if (fstat(fd, &st) == 0 && st.st_size >= (off_t)sizeof(Elf64_Ehdr))
        m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return 0;
    const char *b = m;
    size_t n = (size_t)st.st_size;
    const Elf64_Ehdr *eh = m;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > n || eh->e_shnum > (n - eh->e_shoff) / sizeof(Elf64_Shdr))
        goto out;
    const Elf64_Shdr *sh = (const void *)(b + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum && !found; i++) {
        if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum) continue;
        const Elf64_Shdr *str = &sh[sh[i].sh_link];
        if (sh[i].sh_offset > n || sh[i].sh_size > n - sh[i].sh_offset || str->sh_offset > n ||
            str->sh_size > n - str->sh_offset)
            continue;
        const Elf64_Sym *sym = (const void *)(b + sh[i].sh_offset);
        for (size_t k = 0; k < sh[i].sh_size / sizeof *sym; k++) {
            if (sym[k].st_shndx == SHN_UNDEF || ELF64_ST_TYPE(sym[k].st_info) != STT_FUNC ||
                sym[k].st_name + sizeof "PMPI_Allreduce" > str->sh_size)
                continue;
            if (strcmp(b + str->sh_offset + sym[k].st_name, "PMPI_Allreduce") == 0) {
                found = 1;
                break;
            }
        }
    }
out:
    munmap(m, n);
    return found;
}

static void stop(const char *why, const char *fix) {
    fprintf(stderr, "gocoll: error: %s, so libgocoll-preload.so would never run a collective: %s\n", why, fix);
    exit(1);
}

__attribute__((constructor)) static void check_ahead(void) {
    Dl_info me, it, mark;
    struct link_map *mine = NULL, *theirs = NULL, *marked = NULL;
    if (!dladdr1((void *)check_ahead, &me, (void **)&mine, RTLD_DL_LINKMAP) || !mine) return;
    /* The program's handle looks names up as its calls are bound: in the
     * global scope, in load order (RTLD_DEFAULT would look in this
     * library first: Go links it -Bsymbolic). gocoll_test_counter is this
     * library's alone: where that scope does not find it here, the
     * library is not in it. */
    void *prog = dlopen(NULL, RTLD_LAZY | RTLD_NOLOAD);
    if (!prog) return;
    void *t = dlsym(prog, "gocoll_test_counter");
    if (!t || !dladdr1(t, &mark, (void **)&marked, RTLD_DL_LINKMAP) || marked != mine) return;
    void *p = dlsym(prog, "MPI_Allreduce");
    if (!p || !dladdr1(p, &it, (void **)&theirs, RTLD_DL_LINKMAP) || !theirs) return;
    const char *fix_static = "link the host MPI as a shared library (mpicc without -static, not libmpich.a or libmpi.a), "
                             "or leave libgocoll-preload.so out (no -lgocoll-preload, no LD_PRELOAD)";
    if (theirs == mine) {
        /* Only the executable's own symbol table can tell of a static MPI
         * that the link did not export (LD_PRELOAD). */
        if (!shared_mpi() && static_mpi())
            stop("this program has its MPI linked in statically (its own MPI_Allreduce takes its calls)", fix_static);
        return;
    }
    char why[4096 + 128];
    if (theirs->l_prev == NULL) { /* the executable */
        if (!shared_mpi())
            stop("this program has its MPI linked in statically (its own MPI_Allreduce takes its calls)", fix_static);
        stop("this program defines MPI_Allreduce itself (its calls never reach the library)",
             "leave libgocoll-preload.so out of a program that defines the MPI_ collectives");
    }
    snprintf(why, sizeof why, "MPI_Allreduce is %s's, which comes before libgocoll-preload.so in the lookup order",
             theirs->l_name && *theirs->l_name ? theirs->l_name : "another library");
    stop(why, "put -lgocoll-preload ahead of the MPI library on the link line (pkg-config --libs gocoll-preload before -lmpi or -lmpich), "
              "or LD_PRELOAD libgocoll-preload.so first");
}
