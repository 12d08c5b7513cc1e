! nonblocking from Fortran (`use mpi`): every nonblocking and persistent
! collective binding and the completion calls (MPI_Wait, a Test loop,
! Testall, Waitany and Testany with 1-based indices and MPI_UNDEFINED,
! Start, Startall, Request_free), each result checked against a
! reference computed here from small integers, exact in any sum. Each
! rank judges itself: it prints `rank R: N passed, N failed` and stops
! with status 1 if any of its checks failed.
program nonblocking
  use mpi
  implicit none
  integer, parameter :: n = 7, maxp = 16
  integer :: ierr, rank, nranks, i, q, k, idx, got, passed, failed
  integer :: req, reqs(4), counts(maxp)
  integer :: a(n), b(n), c(n * maxp), d(n * maxp)
  double precision :: x(n), y(n * maxp)
  logical :: flag, ok, seen(4)
  double precision :: deadline
  passed = 0
  failed = 0
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  if (nranks > maxp) stop 2

  ! Iallreduce + Wait, then in place
  do i = 1, n
    a(i) = value(rank, i, 0)
  end do
  call MPI_Iallreduce(a, b, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, req, ierr)
  call check(ierr == MPI_SUCCESS, 'iallreduce')
  call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  call check(ierr == MPI_SUCCESS .and. req == MPI_REQUEST_NULL, 'wait')
  call check(all(b == [(total(i, 0), i = 1, n)]), 'iallreduce result')
  b = a
  call MPI_Iallreduce(MPI_IN_PLACE, b, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, req, ierr)
  call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  call check(all(b == [(total(i, 0), i = 1, n)]), 'in-place iallreduce result')

  ! Iallgather + a Test loop
  do i = 1, n
    x(i) = value(rank, i, 1)
  end do
  y = -1
  call MPI_Iallgather(x, n, MPI_DOUBLE_PRECISION, y, n, MPI_DOUBLE_PRECISION, MPI_COMM_WORLD, req, ierr)
  flag = .false.
  deadline = MPI_Wtime() + 20
  do while (.not. flag .and. MPI_Wtime() < deadline)
    call MPI_Test(req, flag, MPI_STATUS_IGNORE, ierr)
  end do
  call check(flag .and. req == MPI_REQUEST_NULL, 'iallgather completed by a Test loop')
  if (.not. flag) call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  ok = .true.
  do q = 0, nranks - 1
    do i = 1, n
      ok = ok .and. y(q * n + i) == dble(value(q, i, 1))
    end do
  end do
  call check(ok, 'iallgather result')

  ! Ireduce_scatter_block and Ireduce_scatter, completed by a Testall loop
  do i = 1, n * nranks
    c(i) = value(rank, i, 2)
  end do
  do q = 1, nranks
    counts(q) = mod(q, 3)
  end do
  reqs(3) = MPI_REQUEST_NULL
  call MPI_Ireduce_scatter_block(c, b, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Ireduce_scatter(c, d, counts, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, reqs(2), ierr)
  flag = .false.
  deadline = MPI_Wtime() + 20
  do while (.not. flag .and. MPI_Wtime() < deadline)
    call MPI_Testall(3, reqs, flag, MPI_STATUSES_IGNORE, ierr)
  end do
  call check(flag .and. all(reqs(1:3) == MPI_REQUEST_NULL), 'testall')
  if (.not. flag) call MPI_Waitall(3, reqs, MPI_STATUSES_IGNORE, ierr)
  call check(all(b == [(total(rank * n + i, 2), i = 1, n)]), 'ireduce_scatter_block result')
  k = sum(counts(1:rank))
  call check(all(d(1:counts(rank + 1)) == [(total(k + i, 2), i = 1, counts(rank + 1))]), 'ireduce_scatter result')

  ! Waitany: 1-based indices, each once, then MPI_UNDEFINED
  reqs(2) = MPI_REQUEST_NULL
  call MPI_Iallreduce(a, b, n, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Iallreduce(a, c, n, MPI_INTEGER, MPI_MIN, MPI_COMM_WORLD, reqs(3), ierr)
  call MPI_Iallreduce(a, d, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, reqs(4), ierr)
  seen = .false.
  do k = 1, 3
    call MPI_Waitany(4, reqs, idx, MPI_STATUS_IGNORE, ierr)
    ok = ierr == MPI_SUCCESS .and. (idx == 1 .or. idx == 3 .or. idx == 4)
    if (ok) ok = .not. seen(idx)
    call check(ok, 'waitany index')
    if (.not. ok) exit
    seen(idx) = .true.
    call check(reqs(idx) == MPI_REQUEST_NULL, 'waitany sets the request to MPI_REQUEST_NULL')
  end do
  call MPI_Waitany(4, reqs, idx, MPI_STATUS_IGNORE, ierr)
  call check(idx == MPI_UNDEFINED, 'waitany of MPI_REQUEST_NULLs: MPI_UNDEFINED')
  call check(all(d(1:n) == [(total(i, 0), i = 1, n)]), 'waitany results')

  ! Testany: spun until all three are done, then flag with MPI_UNDEFINED
  reqs(4) = MPI_REQUEST_NULL
  do k = 1, 3
    call MPI_Iallreduce(a, c((k - 1) * n + 1), n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, reqs(k), ierr)
  end do
  got = 0
  seen = .false.
  deadline = MPI_Wtime() + 20
  do while (got < 3 .and. MPI_Wtime() < deadline)
    call MPI_Testany(4, reqs, idx, flag, MPI_STATUS_IGNORE, ierr)
    if (.not. flag) cycle
    ok = idx >= 1 .and. idx <= 3
    if (ok) ok = .not. seen(idx)
    call check(ok, 'testany index')
    if (.not. ok) exit
    seen(idx) = .true.
    got = got + 1
  end do
  call check(got == 3, 'testany completed all three')
  if (got < 3) call MPI_Waitall(4, reqs, MPI_STATUSES_IGNORE, ierr)
  call MPI_Testany(4, reqs, idx, flag, MPI_STATUS_IGNORE, ierr)
  call check(flag .and. idx == MPI_UNDEFINED, 'testany of MPI_REQUEST_NULLs')
  call check(all(c(1:3 * n) == [((total(i, 0), i = 1, n), k = 1, 3)]), 'testany results')

  ! Allreduce_init, started three times with new contents, then freed
  call MPI_Allreduce_init(a, b, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, req, ierr)
  call check(ierr == MPI_SUCCESS .and. req /= MPI_REQUEST_NULL, 'allreduce_init')
  do k = 1, 3
    do i = 1, n
      a(i) = value(rank, i, 10 + k)
    end do
    call MPI_Start(req, ierr)
    call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
    call check(req /= MPI_REQUEST_NULL, 'a persistent request stays after MPI_Wait')
    call check(all(b == [(total(i, 10 + k), i = 1, n)]), 'persistent allreduce result')
  end do
  call MPI_Request_free(req, ierr)
  call check(ierr == MPI_SUCCESS .and. req == MPI_REQUEST_NULL, 'request_free')

  ! the other three *_init, started together twice by MPI_Startall
  call MPI_Reduce_scatter_block_init(c, b, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, reqs(1), ierr)
  call MPI_Reduce_scatter_init(c, d, counts, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, reqs(2), ierr)
  call MPI_Allgather_init(x, n, MPI_DOUBLE_PRECISION, y, n, MPI_DOUBLE_PRECISION, MPI_COMM_WORLD, MPI_INFO_NULL, &
                          reqs(3), ierr)
  do k = 1, 2
    do i = 1, n * nranks
      c(i) = value(rank, i, 20 + k)
    end do
    do i = 1, n
      x(i) = value(rank, i, 30 + k)
    end do
    call MPI_Startall(3, reqs, ierr)
    call MPI_Waitall(3, reqs, MPI_STATUSES_IGNORE, ierr)
    call check(ierr == MPI_SUCCESS .and. all(reqs(1:3) /= MPI_REQUEST_NULL), 'startall + waitall')
    call check(all(b(1:n) == [(total(rank * n + i, 20 + k), i = 1, n)]), 'persistent reduce_scatter_block result')
    q = sum(counts(1:rank))
    call check(all(d(1:counts(rank + 1)) == [(total(q + i, 20 + k), i = 1, counts(rank + 1))]), &
               'persistent reduce_scatter result')
    ok = .true.
    do q = 0, nranks - 1
      do i = 1, n
        ok = ok .and. y(q * n + i) == dble(value(q, i, 30 + k))
      end do
    end do
    call check(ok, 'persistent allgather result')
  end do
  do k = 1, 3
    call MPI_Request_free(reqs(k), ierr)
  end do
  call check(all(reqs(1:3) == MPI_REQUEST_NULL), 'request_free of three')

  call MPI_Finalize(ierr)
  print '(a,i0,a,i0,a,i0,a)', 'rank ', rank, ': ', passed, ' passed, ', failed, ' failed'
  if (failed /= 0) stop 1
contains
  ! value is rank r's element i in round k: a small integer.
  integer function value(r, i, k)
    integer, intent(in) :: r, i, k
    value = mod(r * 7 + i * 3 + k * 5, 101) - 50
  end function value
  ! total is the sum of value over the ranks.
  integer function total(i, k)
    integer, intent(in) :: i, k
    integer :: r
    total = 0
    do r = 0, nranks - 1
      total = total + value(r, i, k)
    end do
  end function total
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
end program nonblocking
