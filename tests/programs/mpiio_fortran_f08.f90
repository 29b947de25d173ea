! mpiio_fortran.f90 through the mpi_f08 module (Fortran 2008 bindings: Open MPI's libmpi_usempif08 and MPICH's
! *_f08ts_ routines reach the C library by other paths than the mpi module). Usage: mpiio_fortran_f08 FILE
program mpiio_fortran_f08
  use mpi_f08
  implicit none
  integer, parameter :: block = 1000
  type(MPI_File) :: fh
  type(MPI_Status) :: status
  integer :: rank, nranks, i
  integer :: out(block), in(block)
  integer(kind=MPI_OFFSET_KIND) :: offset
  character(len=4096) :: path

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks)
  call get_command_argument(1, path)
  do i = 1, block
    out(i) = rank * 1000003 + i
  end do
  offset = int(rank, MPI_OFFSET_KIND) * block * 4
  call MPI_File_open(MPI_COMM_WORLD, trim(path), MPI_MODE_CREATE + MPI_MODE_RDWR, MPI_INFO_NULL, fh)
  call MPI_File_write_at(fh, offset, out, block, MPI_INTEGER, status)
  call MPI_File_read_at_all(fh, offset, in, block, MPI_INTEGER, status)
  call MPI_File_close(fh)
  if (any(in /= out)) then
    print *, 'rank', rank, 'read wrong data'
    call MPI_Abort(MPI_COMM_WORLD, 1)
  end if
  if (rank == 0) print '(a,i0,a)', 'mpiio_fortran: ', nranks, ' ranks ok'
  call MPI_Finalize()
end program mpiio_fortran_f08
