! Test program for libioloom-async's Fortran module: each client writes theta (16 x 8 x 4 float64) for 5
! iterations with the value it + 0.001 * rank, then 3 more in place (zero copy: alloc, commit, clear), signals
! checkpoint each time, and a wrong-size write and a commit without alloc print their errors. Each client prints
! its block's position in the global domain (and the error of asking it into an array too short).
program async_fortran
  use, intrinsic :: iso_c_binding, only: c_ptr, c_f_pointer
  use mpi
  use ioloom_async
  implicit none
  integer :: ierr, clients, rank, it
  integer(8) :: offset(3), short(2)
  logical :: is_client
  double precision :: theta(16, 8, 4), small(2)
  double precision, pointer :: inplace(:, :, :)
  type(c_ptr) :: block
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
    call ioloom_async_block_position('theta', offset, ierr)
    print '(a, i0, a, 3(1x, i0))', 'position of ', rank, ':', offset
    call ioloom_async_block_position('theta', short, ierr)
    call ioloom_async_error(message)
    if (rank == 0) print '(a, i0, a)', 'short offset: ', ierr, ' ' // trim(message)
    do it = 0, 4
      theta = it + 0.001d0 * rank
      call ioloom_async_write('theta', theta, int(sizeof(theta), 8), ierr)
      call ioloom_async_signal('checkpoint', ierr)
      call ioloom_async_end_iteration(ierr)
    end do
    do it = 5, 7
      call ioloom_async_alloc('theta', block, ierr)
      call c_f_pointer(block, inplace, [16, 8, 4])
      inplace = it + 0.001d0 * rank
      call ioloom_async_commit('theta', ierr)
      call ioloom_async_clear('theta', ierr)
      call ioloom_async_signal('checkpoint', ierr)
      call ioloom_async_end_iteration(ierr)
    end do
    call ioloom_async_write('theta', small, int(sizeof(small), 8), ierr)
    call ioloom_async_error(message)
    if (rank == 0) print '(a, i0, a)', 'wrong size: ', ierr, ' ' // trim(message)
    call ioloom_async_commit('theta', ierr)
    call ioloom_async_error(message)
    if (rank == 0) print '(a, i0, a)', 'commit alone: ', ierr, ' ' // trim(message)
  end if
  call ioloom_async_finalize(ierr)
  call MPI_Finalize(ierr)
end program
