C     fixed.f: mpif.h (fixed form) under the LD_PRELOAD library. Each
C     collective in place and not, checked against values computed here;
C     rank 0 prints what it expects gocoll to run and `N passed, N failed`.
      program fixed
      implicit none
      include 'mpif.h'
      integer ierr, rank, nproc, i, j, n, pass, fail, tot(3), mine(3)
      parameter (n = 37)
      integer ia(n*8), ib(n*8), counts(8)
      double precision da(n), db(n)
      logical ok
      call mpi_init(ierr)
      call mpi_comm_rank(MPI_COMM_WORLD, rank, ierr)
      call mpi_comm_size(MPI_COMM_WORLD, nproc, ierr)
      pass = 0
      fail = 0
C     MPI_ALLREDUCE, INTEGER and DOUBLE PRECISION, then in place
      do i = 1, n
         ia(i) = rank + i
         da(i) = dble(rank * i)
      end do
      call mpi_allreduce(ia, ib, n, MPI_INTEGER, MPI_SUM,
     &                   MPI_COMM_WORLD, ierr)
      ok = ierr .eq. MPI_SUCCESS
      do i = 1, n
         ok = ok .and. ib(i) .eq. nproc*(nproc-1)/2 + nproc*i
      end do
      call tally(ok, pass, fail, 'allreduce integer')
      call mpi_allreduce(MPI_IN_PLACE, da, n, MPI_DOUBLE_PRECISION,
     &                   MPI_MAX, MPI_COMM_WORLD, ierr)
      ok = ierr .eq. MPI_SUCCESS
      do i = 1, n
         ok = ok .and. da(i) .eq. dble((nproc-1) * i)
      end do
      call tally(ok, pass, fail, 'allreduce in place')
C     MPI_REDUCE_SCATTER_BLOCK: block of n per rank
      do i = 1, n*nproc
         ia(i) = i + rank
      end do
      call mpi_reduce_scatter_block(ia, ib, n, MPI_INTEGER, MPI_SUM,
     &                              MPI_COMM_WORLD, ierr)
      ok = ierr .eq. MPI_SUCCESS
      do i = 1, n
         j = rank*n + i
         ok = ok .and. ib(i) .eq. nproc*j + nproc*(nproc-1)/2
      end do
      call tally(ok, pass, fail, 'reduce_scatter_block')
C     MPI_REDUCE_SCATTER in place: rank r gets r+1 elements
      do i = 1, nproc
         counts(i) = i
      end do
      do i = 1, nproc*(nproc+1)/2
         ia(i) = i * (rank + 1)
      end do
      call mpi_reduce_scatter(MPI_IN_PLACE, ia, counts, MPI_INTEGER,
     &                        MPI_SUM, MPI_COMM_WORLD, ierr)
      ok = ierr .eq. MPI_SUCCESS
      do i = 1, rank + 1
         j = rank*(rank+1)/2 + i
         ok = ok .and. ia(i) .eq. j * nproc*(nproc+1)/2
      end do
      call tally(ok, pass, fail, 'reduce_scatter in place')
C     MPI_ALLGATHER, then in place
      do i = 1, n
         ia(i) = 1000*rank + i
      end do
      call mpi_allgather(ia, n, MPI_INTEGER, ib, n, MPI_INTEGER,
     &                   MPI_COMM_WORLD, ierr)
      ok = ierr .eq. MPI_SUCCESS
      do j = 0, nproc - 1
         do i = 1, n
            ok = ok .and. ib(j*n + i) .eq. 1000*j + i
         end do
      end do
      call tally(ok, pass, fail, 'allgather')
      do i = 1, n
         ib(rank*n + i) = -(1000*rank + i)
      end do
      call mpi_allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ib, n,
     &                   MPI_INTEGER, MPI_COMM_WORLD, ierr)
      ok = ierr .eq. MPI_SUCCESS
      do j = 0, nproc - 1
         do i = 1, n
            ok = ok .and. ib(j*n + i) .eq. -(1000*j + i)
         end do
      end do
      call tally(ok, pass, fail, 'allgather in place')
      mine(1) = pass
      mine(2) = fail
      mine(3) = 6
      call mpi_reduce(mine, tot, 3, MPI_INTEGER, MPI_SUM, 0,
     &                MPI_COMM_WORLD, ierr)
      if (rank .eq. 0) then
         write (*, '(a,i0,a)') 'expect gocoll=', tot(3), ' host=0'
         write (*, '(i0,a,i0,a)') tot(1), ' passed, ', tot(2),
     &        ' failed'
      end if
      call mpi_finalize(ierr)
      if (fail .ne. 0) stop 1
      end

      subroutine tally(ok, pass, fail, what)
      logical ok
      integer pass, fail
      character*(*) what
      if (ok) then
         pass = pass + 1
      else
         fail = fail + 1
         write (0, *) 'FAIL: ', what
      end if
      end
