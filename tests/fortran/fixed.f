C     fixed: a fixed-form program with mpif.h, the classic way in.
      PROGRAM FIXED
      INCLUDE 'mpif.h'
      INTEGER IERR, RANK, NRANKS, ISUM
      CALL MPI_INIT(IERR)
      CALL MPI_COMM_RANK(MPI_COMM_WORLD, RANK, IERR)
      CALL MPI_COMM_SIZE(MPI_COMM_WORLD, NRANKS, IERR)
      CALL MPI_ALLREDUCE(RANK, ISUM, 1, MPI_INTEGER, MPI_SUM,
     &                   MPI_COMM_WORLD, IERR)
      IF (RANK .EQ. 0) THEN
        IF (ISUM .EQ. NRANKS*(NRANKS-1)/2) THEN
          PRINT *, 'fixed-form allreduce: PASS'
        ELSE
          PRINT *, 'fixed-form allreduce: FAIL'
        END IF
      END IF
      CALL MPI_FINALIZE(IERR)
      END
