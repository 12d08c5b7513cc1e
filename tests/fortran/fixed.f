C     fixed: a fixed-form program with mpif.h, the classic way in.
C     Every rank checks its own result, prints PASS or FAIL, and stops
C     with status 1 on a failure.
      PROGRAM FIXED
      INCLUDE 'mpif.h'
      INTEGER IERR, RANK, NRANKS, ISUM
      CALL MPI_INIT(IERR)
      CALL MPI_COMM_RANK(MPI_COMM_WORLD, RANK, IERR)
      CALL MPI_COMM_SIZE(MPI_COMM_WORLD, NRANKS, IERR)
      ISUM = -1
      CALL MPI_ALLREDUCE(RANK, ISUM, 1, MPI_INTEGER, MPI_SUM,
     &                   MPI_COMM_WORLD, IERR)
      CALL MPI_FINALIZE(IERR)
      IF (ISUM .EQ. NRANKS*(NRANKS-1)/2) THEN
        PRINT '(A,I0,A)', 'rank ', RANK, ': fixed-form allreduce: PASS'
      ELSE
        PRINT '(A,I0,A)', 'rank ', RANK, ': fixed-form allreduce: FAIL'
        STOP 1
      END IF
      END
