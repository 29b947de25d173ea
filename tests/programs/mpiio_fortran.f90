! A Fortran MPI-IO program: each rank writes BLOCK integers at rank * BLOCK with MPI_File_write_at, then all
! read them back with MPI_File_read_at_all. Open MPI's Fortran bindings call PMPI_File_*, MPICH's call
! MPI_File_*: the tracer must record both. Usage: mpiio_fortran FILE
program mpiio_fortran
  use mpi
  implicit none
  integer, parameter :: block = 1000
  integer :: ierr, rank, nranks, fh, i, status(MPI_STATUS_SIZE)
  integer :: out(block), in(block)
  integer(kind=MPI_OFFSET_KIND) :: offset
  character(len=4096) :: path

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  call get_command_argument(1, path)
  do i = 1, block
    out(i) = rank * 1000003 + i
  end do
  offset = int(rank, MPI_OFFSET_KIND) * block * 4
  call MPI_File_open(MPI_COMM_WORLD, trim(path), MPI_MODE_CREATE + MPI_MODE_RDWR, MPI_INFO_NULL, fh, ierr)
  call MPI_File_write_at(fh, offset, out, block, MPI_INTEGER, status, ierr)
  call MPI_File_read_at_all(fh, offset, in, block, MPI_INTEGER, status, ierr)
  call MPI_File_close(fh, ierr)
  if (any(in /= out)) then
    print *, 'rank', rank, 'read wrong data'
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end if
  if (rank == 0) print '(a,i0,a)', 'mpiio_fortran: ', nranks, ' ranks ok'
  call MPI_Finalize(ierr)
end program mpiio_fortran
