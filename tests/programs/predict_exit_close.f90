! Writes ROUNDS formatted lines to FILE, flushing each, and leaves the unit open, as GTC leaves history.out: the
! Fortran runtime closes it at exit, in libgfortran's destructor, which runs after the tracer's (its final flush).
! The tracer must give that close a call record in the side stream as it gives it an event.
! usage: predict_exit_close FILE ROUNDS
program predict_exit_close
  implicit none
  character(len=4096) :: path, text
  integer :: rounds, i
  if (command_argument_count() /= 2) error stop 'usage: predict_exit_close FILE ROUNDS'
  call get_command_argument(1, path)
  call get_command_argument(2, text)
  read (text, *) rounds
  open (unit=11, file=trim(path), status='replace', action='write', form='formatted')
  do i = 1, rounds
    write (11, '(a,i8)') 'step', i
    flush (11)
  end do
end program predict_exit_close
