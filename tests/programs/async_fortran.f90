! Test program for libioloom-async's Fortran module: each client writes theta (16 x 8 x 4 float64) for 5
! iterations with the value it + 0.001 * rank, signals checkpoint, and a wrong-size write prints its error.
program async_fortran
  use mpi
  use ioloom_async
  implicit none
  integer :: ierr, clients, rank, it
  logical :: is_client
  double precision :: theta(16, 8, 4), small(2)
  character(len=200) :: message

  call MPI_Init(ierr)
  call get_command_argument(1, message)
  call ioloom_async_initialize(trim(message), MPI_COMM_WORLD, ierr)
  if (ierr /= 0) then
    call ioloom_async_error(message)
    print '(a)', 'initialize: ' // trim(message)
    call MPI_Finalize(ierr)
    stop
  end if
  call ioloom_async_start(is_client, ierr)
  if (is_client) then
    call ioloom_async_client_comm(clients, ierr)
    call MPI_Comm_rank(clients, rank, ierr)
    do it = 0, 4
      theta = it + 0.001d0 * rank
      call ioloom_async_write('theta', theta, int(sizeof(theta), 8), ierr)
      call ioloom_async_signal('checkpoint', ierr)
      call ioloom_async_end_iteration(ierr)
    end do
    call ioloom_async_write('theta', small, int(sizeof(small), 8), ierr)
    call ioloom_async_error(message)
    if (rank == 0) print '(a, i0, a)', 'wrong size: ', ierr, ' ' // trim(message)
  end if
  call ioloom_async_finalize(ierr)
  call MPI_Finalize(ierr)
end program
