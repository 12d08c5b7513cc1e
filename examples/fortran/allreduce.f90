! allreduce from Fortran with `use mpi`: every rank contributes
! x(i) = rank + i; everyone checks the sum, also with MPI_IN_PLACE, prints
! its own PASS or FAIL and stops with status 1 on a failure.
program allreduce
  use mpi
  implicit none
  integer, parameter :: n = 100
  integer :: ierr, rank, nranks, i, bad
  double precision :: x(n), s(n)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  do i = 1, n
    x(i) = rank + i
  end do
  call MPI_Allreduce(x, s, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  bad = 0
  do i = 1, n
    if (s(i) /= dble(nranks * (nranks - 1) / 2 + nranks * i)) bad = bad + 1
  end do
  call MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, ierr)
  do i = 1, n
    if (x(i) /= dble(nranks - 1 + i)) bad = bad + 1
  end do
  if (bad == 0) then
    print '(a,i0,a,i0,a)', 'fortran allreduce on ', nranks, ' ranks, rank ', rank, ': PASS'
  else
    print '(a,i0,a,i0,a)', 'fortran allreduce on ', nranks, ' ranks, rank ', rank, ': FAIL'
  end if
  call MPI_Finalize(ierr)
  if (bad /= 0) stop 1
end program allreduce
