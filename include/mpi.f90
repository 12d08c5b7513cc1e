! The Fortran `mpi` module: the constants of mpif.h. Routines are not
! declared with interfaces, so buffers of any type and rank may be passed,
! as with mpif.h. The Makefile compiles this file with gfortran into
! build/include/mpi.mod.
module mpi
  implicit none
  include 'mpif.h'
end module mpi
