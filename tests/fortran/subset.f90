! subset from Fortran (`use mpi`): the collectives, point-to-point and
! communicator calls, each result checked against a reference computed
! here. Each rank judges itself: it prints `rank R: N passed, N failed`
! and stops with status 1 if any of its checks failed; the launcher's
! exit status combines the ranks', not a collective of gocoll's.
program subset
  use mpi
  implicit none
  integer :: ierr, rank, nranks, i, q, passed, failed
  integer :: left, right, newcomm, nsize, status(MPI_STATUS_SIZE), req(2)
  integer :: counts(64), displs(64), ival, provided, ires
  double precision :: x(10), y(640), t
  logical :: flag, ok
  character(len=MPI_MAX_PROCESSOR_NAME) :: pname
  integer :: plen
  passed = 0
  failed = 0
  call MPI_Init_thread(MPI_THREAD_SINGLE, provided, ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  call MPI_Initialized(flag, ierr)
  call check(flag, 'initialized')
  call MPI_Get_processor_name(pname, plen, ierr)
  call check(plen > 0, 'processor name')
  t = MPI_Wtime()
  call check(t > 0 .and. MPI_Wtick() > 0, 'wtime')
  do i = 1, 10
    x(i) = rank + i
  end do
  call MPI_Allreduce(x, y, 10, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  ok = ierr == MPI_SUCCESS
  do i = 1, 10
    ok = ok .and. y(i) == dble(nranks * (nranks - 1) / 2 + i * nranks)
  end do
  call check(ok, 'allreduce')
  call MPI_Allgather(x, 10, MPI_DOUBLE_PRECISION, y, 10, MPI_DOUBLE_PRECISION, MPI_COMM_WORLD, ierr)
  ok = ierr == MPI_SUCCESS
  do q = 0, nranks - 1
    do i = 1, 10
      ok = ok .and. y(10 * q + i) == dble(q + i)
    end do
  end do
  call check(ok, 'allgather')
  ! rank r contributes y(i) = 1000 r + i; rank r's block of the sum is
  ! elements 10 r + 1 .. 10 r + 10
  do i = 1, 10 * nranks
    y(i) = 1000 * rank + i
  end do
  x = -1
  call MPI_Reduce_scatter_block(y, x, 10, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  ok = ierr == MPI_SUCCESS
  do i = 1, 10
    ok = ok .and. x(i) == dble(1000 * nranks * (nranks - 1) / 2 + nranks * (10 * rank + i))
  end do
  call check(ok, 'reduce_scatter_block')
  do i = 1, nranks
    counts(i) = 1
    displs(i) = 2 * (i - 1)
  end do
  y = -1
  x(1) = rank
  call MPI_Allgatherv(x, 1, MPI_DOUBLE_PRECISION, y, counts, displs, MPI_DOUBLE_PRECISION, MPI_COMM_WORLD, ierr)
  call check(y(2 * nranks - 1) == dble(nranks - 1) .and. y(2) == -1, 'allgatherv')
  x = rank
  call MPI_Reduce_scatter(x, y, counts, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, ierr)
  call check(y(1) == dble(nranks - 1), 'reduce_scatter')
  ival = rank
  call MPI_Bcast(ival, 1, MPI_INTEGER, nranks - 1, MPI_COMM_WORLD, ierr)
  call check(ival == nranks - 1, 'bcast')
  call MPI_Reduce(rank, ival, 1, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) call check(ival == nranks * (nranks - 1) / 2, 'reduce')
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  right = mod(rank + 1, nranks)
  left = mod(rank + nranks - 1, nranks)
  call MPI_Sendrecv(rank, 1, MPI_INTEGER, right, 3, ival, 1, MPI_INTEGER, left, 3, MPI_COMM_WORLD, status, ierr)
  call check(ival == left .and. status(MPI_SOURCE) == left .and. status(MPI_TAG) == 3, 'sendrecv')
  call MPI_Irecv(ival, 1, MPI_INTEGER, left, 4, MPI_COMM_WORLD, req(1), ierr)
  call MPI_Isend(rank, 1, MPI_INTEGER, right, 4, MPI_COMM_WORLD, req(2), ierr)
  call MPI_Waitall(2, req, MPI_STATUSES_IGNORE, ierr)
  call check(ival == left .and. req(1) == MPI_REQUEST_NULL, 'isend/irecv/waitall')
  call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), rank, newcomm, ierr)
  call MPI_Comm_size(newcomm, nsize, ierr)
  call check(nsize == (nranks + 1 - mod(rank, 2)) / 2, 'comm_split')
  call MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_WORLD, ires, ierr)
  call check(ires == MPI_IDENT, 'comm_compare')
  call MPI_Comm_free(newcomm, ierr)
  call check(newcomm == MPI_COMM_NULL, 'comm_free')
  ! One host: the node communicator is the world, reversed by the keys.
  call MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, -rank, MPI_INFO_NULL, newcomm, ierr)
  call check(ierr == MPI_SUCCESS, 'comm_split_type')
  call MPI_Comm_size(newcomm, nsize, ierr)
  call MPI_Comm_rank(newcomm, ires, ierr)
  call check(nsize == nranks .and. ires == nranks - 1 - rank, 'comm_split_type ranks')
  call MPI_Comm_free(newcomm, ierr)
  call MPI_Comm_split_type(MPI_COMM_WORLD, MPI_UNDEFINED, 0, MPI_INFO_NULL, newcomm, ierr)
  call check(ierr == MPI_SUCCESS .and. newcomm == MPI_COMM_NULL, 'comm_split_type MPI_UNDEFINED')
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN, ierr)
  call MPI_Allreduce(x, y, 1, MPI_DOUBLE_PRECISION, MPI_BAND, MPI_COMM_WORLD, ierr)
  call check(ierr == MPI_ERR_OP, 'error class with MPI_ERRORS_RETURN')
  call MPI_Finalize(ierr)
  call check(ierr == MPI_SUCCESS, 'finalize')
  print '(a,i0,a,i0,a,i0,a)', 'rank ', rank, ': ', passed, ' passed, ', failed, ' failed'
  if (failed /= 0) stop 1
contains
  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (ok) then
      passed = passed + 1
    else
      failed = failed + 1
      print '(a,i0,2a)', 'rank ', rank, ': FAIL ', what
    end if
  end subroutine check
end program subset
