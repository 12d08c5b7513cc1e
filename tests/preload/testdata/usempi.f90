! usempi.f90: `use mpi` under the LD_PRELOAD library: each collective, in
! place and not, on MPI_COMM_WORLD and on a split communicator in reverse
! rank order, checked against values computed here.
program usempi
  use mpi
  implicit none
  integer, parameter :: n = 29
  integer :: ierr, wrank, nproc, pass, fail, calls, tot(3), comm, rank, p, i, j
  integer :: ia(n*8), ib(n*8), counts(8), members(8)
  double precision :: da(n)
  logical :: ok
  call mpi_init(ierr)
  call mpi_comm_rank(MPI_COMM_WORLD, wrank, ierr)
  call mpi_comm_size(MPI_COMM_WORLD, nproc, ierr)
  pass = 0; fail = 0; calls = 0
  call mpi_comm_split(MPI_COMM_WORLD, 0, -wrank, comm, ierr)
  call run(MPI_COMM_WORLD)
  call run(comm)
  call mpi_comm_free(comm, ierr)
  call mpi_reduce([pass, fail, calls], tot, 3, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
  if (wrank == 0) then
    write (*, '(a,i0,a)') 'expect gocoll=', tot(3), ' host=0'
    write (*, '(i0,a,i0,a)') tot(1), ' passed, ', tot(2), ' failed'
  end if
  call mpi_finalize(ierr)
  if (fail /= 0) stop 1
contains
  subroutine check(good, what)
    logical, intent(in) :: good
    character(*), intent(in) :: what
    if (good) then
      pass = pass + 1
    else
      fail = fail + 1
      write (0, *) 'FAIL rank', wrank, ': ', what
    end if
  end subroutine

  subroutine run(c)
    integer, intent(in) :: c
    call mpi_comm_rank(c, rank, ierr)
    call mpi_comm_size(c, p, ierr)
    call mpi_allgather(wrank, 1, MPI_INTEGER, members, 1, MPI_INTEGER, c, ierr)
    calls = calls + 6
    do i = 1, n
      ia(i) = wrank + i
      da(i) = dble(wrank * i)
    end do
    call mpi_allreduce(ia, ib, n, MPI_INTEGER, MPI_SUM, c, ierr)
    ok = ierr == MPI_SUCCESS .and. all(ib(1:n) == [(sum(members(1:p)) + p*i, i = 1, n)])
    call check(ok, 'allreduce')
    call mpi_allreduce(MPI_IN_PLACE, da, n, MPI_DOUBLE_PRECISION, MPI_MIN, c, ierr)
    ok = ierr == MPI_SUCCESS .and. all(da == [(dble(minval(members(1:p)) * i), i = 1, n)])
    call check(ok, 'allreduce in place')
    do i = 1, n*p
      ia(i) = i + wrank
    end do
    call mpi_reduce_scatter_block(ia, ib, n, MPI_INTEGER, MPI_SUM, c, ierr)
    ok = ierr == MPI_SUCCESS .and. all(ib(1:n) == [(p*(rank*n+i) + sum(members(1:p)), i = 1, n)])
    call check(ok, 'reduce_scatter_block')
    counts(1:p) = [(i, i = 1, p)]
    ia(1:p*(p+1)/2) = [(i * (wrank + 1), i = 1, p*(p+1)/2)]
    call mpi_reduce_scatter(MPI_IN_PLACE, ia, counts, MPI_INTEGER, MPI_SUM, c, ierr)
    ok = ierr == MPI_SUCCESS .and. &
      all(ia(1:rank+1) == [((rank*(rank+1)/2 + i) * (sum(members(1:p)) + p), i = 1, rank+1)])
    call check(ok, 'reduce_scatter in place')
    ib(rank*n+1:rank*n+n) = [(1000*wrank + i, i = 1, n)]
    call mpi_allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ib, n, MPI_INTEGER, c, ierr)
    ok = ierr == MPI_SUCCESS
    do j = 0, p - 1
      ok = ok .and. all(ib(j*n+1:j*n+n) == [(1000*members(j+1) + i, i = 1, n)])
    end do
    call check(ok, 'allgather in place')
  end subroutine
end program
