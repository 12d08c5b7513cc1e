! cg: a small but real application of the kind that makes thousands of
! small MPI_Allreduce calls a second: conjugate gradients on the 2-D
! Poisson equation (the 5-point Laplacian, Dirichlet boundary, an n x n
! grid), for nrhs right-hand sides at once (several fields or sources
! solved together), the grid's rows split in blocks over the ranks.
! Each iteration exchanges one halo row with each neighbour
! (MPI_Sendrecv) and makes two MPI_Allreduce of nrhs doubles (the dot
! products r.r and p.Ap of every system: 112 bytes at nrhs = 14), plus
! one of nrhs at each solve's end (the true residual). It solves
! `solves` times (each from zero, the sources moved) and prints the
! wall time of the solves, the iterations and the largest relative
! residual, which it checks (FAIL above 1e-6).
!
!   mpif90.openmpi -O2 -o cg bench/cg.f90     (or mpif90.mpich)
!   mpirun.openmpi -np 4 [-x LD_PRELOAD=.../libgocoll-preload.so] ./cg [n nrhs solves]
!
! bench/cg.sh runs it natively and under the preload, interleaved.
program cg
  use mpi
  implicit none
  integer :: n = 64, nrhs = 14, solves = 40
  integer :: ierr, rank, np, rows, first, up, down, it, k, s, i, iters, maxit, nargs
  character(len=32) :: arg
  double precision, allocatable :: x(:,:,:), r(:,:,:), p(:,:,:), ap(:,:,:), b(:,:,:)
  double precision, allocatable :: rr(:), rrnew(:), pap(:), alpha(:), beta(:), bb(:), res(:)
  double precision :: t0, t1, worst
  integer :: reductions

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, np, ierr)
  nargs = command_argument_count()
  if (nargs >= 1) then
    call get_command_argument(1, arg); read (arg, *) n
  end if
  if (nargs >= 2) then
    call get_command_argument(2, arg); read (arg, *) nrhs
  end if
  if (nargs >= 3) then
    call get_command_argument(3, arg); read (arg, *) solves
  end if

  ! This rank's rows: first .. first+rows-1 of 1..n, in blocks.
  rows = n / np
  first = rank * rows + min(rank, mod(n, np)) + 1
  if (rank < mod(n, np)) rows = rows + 1
  up = rank - 1
  down = rank + 1
  if (up < 0) up = MPI_PROC_NULL
  if (down >= np) down = MPI_PROC_NULL

  ! Arrays (k, column, row), one halo row above (0) and below (rows+1).
  allocate (x(nrhs, n, 0:rows + 1), r(nrhs, n, 0:rows + 1), p(nrhs, n, 0:rows + 1), ap(nrhs, n, 0:rows + 1), &
            b(nrhs, n, 0:rows + 1))
  allocate (rr(nrhs), rrnew(nrhs), pap(nrhs), alpha(nrhs), beta(nrhs), bb(nrhs), res(nrhs))
  maxit = 4 * n
  iters = 0
  reductions = 0
  worst = 0
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  t0 = MPI_Wtime()
  do s = 1, solves
    ! Sources: a point source per system, moved each solve.
    b = 0
    do k = 1, nrhs
      call source(k, s)
    end do
    x = 0
    r = b
    p = r
    call dots(r, r, rr)
    bb = rr
    do it = 1, maxit
      call laplacian(p, ap)
      call dots(p, ap, pap)
      alpha = rr / pap
      do i = 1, rows
        x(:, :, i) = x(:, :, i) + spread(alpha, 2, n) * p(:, :, i)
        r(:, :, i) = r(:, :, i) - spread(alpha, 2, n) * ap(:, :, i)
      end do
      call dots(r, r, rrnew)
      iters = iters + 1
      if (all(rrnew <= 1d-20 * bb)) exit
      beta = rrnew / rr
      rr = rrnew
      do i = 1, rows
        p(:, :, i) = r(:, :, i) + spread(beta, 2, n) * p(:, :, i)
      end do
    end do
    ! The true residual of each system, b - A x.
    call laplacian(x, ap)
    r(:, :, 1:rows) = b(:, :, 1:rows) - ap(:, :, 1:rows)
    call dots(r, r, res)
    worst = max(worst, maxval(sqrt(res / bb)))
  end do
  t1 = MPI_Wtime()
  if (rank == 0) then
    print '(a,i0,a,i0,a,i0,a,i0,a,f8.3,a,i0,a,i0,a,es9.2)', 'cg: np=', np, ' n=', n, ' nrhs=', nrhs, ' solves=', solves, &
      ' time=', t1 - t0, ' s iterations=', iters, ' allreduces=', reductions, ' worst residual=', worst
    if (worst > 1d-6) then
      print '(a)', 'cg: FAIL'
    else
      print '(a)', 'cg: PASS'
    end if
  end if
  call MPI_Finalize(ierr)

contains

  ! source puts system k's unit source of solve s at a point of the grid.
  subroutine source(k, s)
    integer, intent(in) :: k, s
    integer :: gi, gj
    gi = 1 + mod(7 * k + 3 * s, n)
    gj = 1 + mod(11 * k + 5 * s, n)
    if (gi >= first .and. gi < first + rows) b(k, gj, gi - first + 1) = 1
  end subroutine

  ! laplacian: y = A v (A = 4I - the four neighbours), after the halo
  ! exchange with the neighbouring ranks.
  subroutine laplacian(v, y)
    double precision, intent(inout) :: v(:, :, 0:)
    double precision, intent(out) :: y(:, :, 0:)
    integer :: j, i
    call MPI_Sendrecv(v(:, :, 1), nrhs * n, MPI_DOUBLE_PRECISION, up, 1, v(:, :, rows + 1), nrhs * n, &
                      MPI_DOUBLE_PRECISION, down, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    call MPI_Sendrecv(v(:, :, rows), nrhs * n, MPI_DOUBLE_PRECISION, down, 2, v(:, :, 0), nrhs * n, &
                      MPI_DOUBLE_PRECISION, up, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    if (up == MPI_PROC_NULL) v(:, :, 0) = 0
    if (down == MPI_PROC_NULL) v(:, :, rows + 1) = 0
    do i = 1, rows
      do j = 1, n
        y(:, j, i) = 4 * v(:, j, i) - v(:, j, i - 1) - v(:, j, i + 1)
        if (j > 1) y(:, j, i) = y(:, j, i) - v(:, j - 1, i)
        if (j < n) y(:, j, i) = y(:, j, i) - v(:, j + 1, i)
      end do
    end do
  end subroutine

  ! dots: d(k) = u_k . v_k over the whole grid, for every system: one
  ! MPI_Allreduce of nrhs doubles.
  subroutine dots(u, v, d)
    double precision, intent(in) :: u(:, :, 0:), v(:, :, 0:)
    double precision, intent(out) :: d(:)
    double precision :: mine(nrhs)
    integer :: i, j
    mine = 0
    do i = 1, rows
      do j = 1, n
        mine = mine + u(:, j, i) * v(:, j, i)
      end do
    end do
    call MPI_Allreduce(mine, d, nrhs, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
    reductions = reductions + 1
  end subroutine
end program cg
