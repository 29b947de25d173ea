! GTC's restart file (the gtc kernel, gtc.c): the write statements of GTC version 1's restart_write
! (restart.f90, lines 65-74), the same records of the same shapes and kinds, so that the Fortran runtime makes the
! POSIX calls it makes for GTC (its buffer, not the program, decides how many writes a record takes).
subroutine gtc_restart_write(path, path_len, rank, mi, mpsi, mgrid, mzeta) bind(c, name="gtc_restart_write")
  use iso_c_binding, only: c_char, c_int
  implicit none
  integer(c_int), value :: path_len, rank, mi, mpsi, mgrid, mzeta
  character(kind=c_char), intent(in) :: path(path_len)
  ! GTC's kinds: default integers and, built without DOUBLE_PRECISION, default reals (module.F90's wp)
  integer, parameter :: nparam = 6 ! setup.F90: 6 quantities per ion without particle tracking
  integer :: me, ntracer, i
  real :: etracer, ptracer(4)
  real, allocatable :: rdtemi(:), rdteme(:), pfluxpsi(:), phi(:, :), phip00(:), zonali(:), zonale(:)
  real, allocatable :: zion(:, :), zion0(:, :)
  character(len=path_len) :: name

  do i = 1, path_len
     name(i:i) = path(i)
  end do
  me = 0
  ntracer = mi
  etracer = 0.0
  ptracer = 0.0
  allocate (rdtemi(0:mpsi), rdteme(0:mpsi), pfluxpsi(0:mpsi), phi(0:mzeta, mgrid), phip00(0:mpsi), &
            zonali(0:mpsi), zonale(0:mpsi), zion(nparam, mi), zion0(nparam, mi))
  rdtemi = 0.0
  rdteme = 0.0
  pfluxpsi = 0.0
  phi = 0.0
  phip00 = 0.0
  zonali = 0.0
  zonale = 0.0
  zion = 0.5
  zion0 = 1.0

  open (222, file=name, status='replace', form='unformatted')
  write (222) mi, me, ntracer, rdtemi, rdteme, pfluxpsi, phi, phip00, zonali, zonale
  if (rank == 0) write (222) etracer, ptracer
  write (222) zion(1:nparam, 1:mi), zion0(6, 1:mi)
  close (222)
end subroutine gtc_restart_write
