# find_package(gocoll) for an installed gocoll (make install). Imported
# targets:
#   gocoll::mpi      gocoll's own mpi.h and libgocoll.so (standalone
#                    programs, run with gocollrun, hydra, srun or mpirun)
#   gocoll::preload  libgocoll-preload.so, to link ahead of a host MPI's
#                    library (a program built against Open MPI or MPICH;
#                    no include directory: it keeps the host's mpi.h)
# The prefix is found from this file's place, so a moved tree works.
get_filename_component(_gocoll_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)

foreach(_gocoll_need lib/libgocoll.so lib/libgocoll-preload.so include/gocoll/mpi.h)
  if(NOT EXISTS "${_gocoll_prefix}/${_gocoll_need}")
    set(gocoll_FOUND FALSE)
    set(gocoll_NOT_FOUND_MESSAGE "gocoll in ${_gocoll_prefix} lacks ${_gocoll_need}: reinstall it (make install)")
    return()
  endif()
endforeach()

if(NOT TARGET gocoll::mpi)
  # Linked by path; the program records the soname (libgocoll.so.MAJOR).
  add_library(gocoll::mpi SHARED IMPORTED)
  set_target_properties(gocoll::mpi PROPERTIES
    IMPORTED_LOCATION "${_gocoll_prefix}/lib/libgocoll.so"
    IMPORTED_SONAME "libgocoll.so.${gocoll_VERSION_MAJOR}"
    INTERFACE_INCLUDE_DIRECTORIES "${_gocoll_prefix}/include/gocoll"
    INTERFACE_LINK_OPTIONS "-Wl,-rpath,${_gocoll_prefix}/lib")
  # An imported library, not an interface one carrying gocoll-preload.pc's
  # --no-as-needed: CMake puts an interface's libraries after the
  # program's own (gocoll::preload mpi would link -lmpi first, and
  # gocoll would stop the program at load, preload/ahead.c). A program
  # that calls none of gocoll's names (MPICH's mpi_f08) adds
  # target_link_options(app PRIVATE "LINKER:--no-as-needed").
  add_library(gocoll::preload SHARED IMPORTED)
  set_target_properties(gocoll::preload PROPERTIES
    IMPORTED_LOCATION "${_gocoll_prefix}/lib/libgocoll-preload.so"
    IMPORTED_SONAME "libgocoll-preload.so.${gocoll_VERSION_MAJOR}"
    INTERFACE_LINK_OPTIONS "-Wl,-rpath,${_gocoll_prefix}/lib")
endif()
set(gocoll_PREFIX "${_gocoll_prefix}")
unset(_gocoll_prefix)
