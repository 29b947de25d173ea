! The gtc kernel's restart file (gtc.c): the records GTC version 1's restart_write writes (restart.f90:65-74: the
! open, the write statements of lines 70-72, the close; docs/predict.md, "GTC's own I/O"), each of the same items,
! kinds and shapes in the same order, written here by a subroutine of our own so that the Fortran runtime makes the
! POSIX calls it makes for GTC (its buffer, not the program, decides how many writes a record takes). Only the shapes
! matter: every value is a constant.
subroutine gtc_restart_write(path, path_len, rank, ions, radial, grid, planes) bind(c, name="gtc_restart_write")
  use iso_c_binding, only: c_char, c_int
  implicit none
  integer(c_int), value :: path_len, rank, ions, radial, grid, planes
  character(kind=c_char), intent(in) :: path(path_len)
  ! GTC's kinds: default integers and, built without DOUBLE_PRECISION, default reals
  integer, parameter :: quantities_per_ion = 6 ! without particle tracking
  integer, parameter :: unit = 222
  integer :: counts(3), i
  real :: tracer_energy, tracer_state(4)
  real, allocatable :: profiles(:, :), potential(:, :), ion_states(:, :), initial_states(:, :)
  character(len=path_len) :: name

  do i = 1, path_len
     name(i:i) = path(i)
  end do
  counts = [ions, 0, ions]
  tracer_energy = 0.0
  tracer_state = 0.0
  ! six radial profiles of radial + 1 points each, then the potential of planes + 1 planes of the grid
  allocate (profiles(0:radial, 6), potential(0:planes, grid), ion_states(quantities_per_ion, ions), &
            initial_states(quantities_per_ion, ions))
  profiles = 0.0
  potential = 0.0
  ion_states = 0.5
  initial_states = 1.0

  open (unit, file=name, status='replace', form='unformatted')
  write (unit) counts(1), counts(2), counts(3), profiles(:, 1), profiles(:, 2), profiles(:, 3), potential, &
     profiles(:, 4), profiles(:, 5), profiles(:, 6)
  if (rank == 0) write (unit) tracer_energy, tracer_state
  ! the ions' states, then the last quantity of each ion's state at the start (a strided section, written an
  ! element at a time)
  write (unit) ion_states(1:quantities_per_ion, 1:ions), initial_states(quantities_per_ion, 1:ions)
  close (unit)
end subroutine gtc_restart_write
