! Fortran bindings of libioloom-async (docs/async.md): the module ioloom_async over the C API through
! ISO_C_BINDING. Compile it with the program that uses it (mpifort ioloom_async.f90 app.f90 -lioloom-async-<mpi>);
! communicators are the integer handles of `use mpi`, and every call ends with its status in ierr (0: done).
module ioloom_async
  use, intrinsic :: iso_c_binding
  implicit none
  private
  public :: ioloom_async_initialize, ioloom_async_start, ioloom_async_client_comm, ioloom_async_write, &
            ioloom_async_alloc, ioloom_async_commit, ioloom_async_clear, &
            ioloom_async_signal, ioloom_async_end_iteration, ioloom_async_finalize, ioloom_async_error, &
            ioloom_async_block_position

  interface
    integer(c_int) function c_initialize(path, comm) bind(c, name="ioloom_async_initialize_f")
      import :: c_int, c_char
      character(kind=c_char), intent(in) :: path(*)
      integer(c_int), value :: comm
    end function
    integer(c_int) function c_start(is_client) bind(c, name="ioloom_async_start")
      import :: c_int
      integer(c_int), intent(out) :: is_client
    end function
    integer(c_int) function c_client_comm(comm) bind(c, name="ioloom_async_client_comm_f")
      import :: c_int
      integer(c_int), intent(out) :: comm
    end function
    integer(c_int) function c_write(name, data, nbytes) bind(c, name="ioloom_async_write")
      import :: c_int, c_char, c_size_t
      character(kind=c_char), intent(in) :: name(*)
      type(*), intent(in) :: data(*)
      integer(c_size_t), value :: nbytes
    end function
    integer(c_int) function c_alloc(name, block) bind(c, name="ioloom_async_alloc_f")
      import :: c_int, c_char, c_ptr
      character(kind=c_char), intent(in) :: name(*)
      type(c_ptr), intent(out) :: block
    end function
    integer(c_int) function c_commit(name) bind(c, name="ioloom_async_commit")
      import :: c_int, c_char
      character(kind=c_char), intent(in) :: name(*)
    end function
    integer(c_int) function c_clear(name) bind(c, name="ioloom_async_clear")
      import :: c_int, c_char
      character(kind=c_char), intent(in) :: name(*)
    end function
    integer(c_int) function c_signal(event) bind(c, name="ioloom_async_signal")
      import :: c_int, c_char
      character(kind=c_char), intent(in) :: event(*)
    end function
    integer(c_int) function c_end_iteration() bind(c, name="ioloom_async_end_iteration")
      import :: c_int
    end function
    integer(c_int) function c_finalize() bind(c, name="ioloom_async_finalize")
      import :: c_int
    end function
    integer(c_int) function c_block_position(name, offset, capacity) bind(c, name="ioloom_async_block_position_f")
      import :: c_int, c_char, c_long_long
      character(kind=c_char), intent(in) :: name(*)
      integer(c_long_long), intent(out) :: offset(*)
      integer(c_int), value :: capacity
    end function
    type(c_ptr) function c_error() bind(c, name="ioloom_async_error")
      import :: c_ptr
    end function
    integer(c_size_t) function c_strlen(s) bind(c, name="strlen")
      import :: c_size_t, c_ptr
      type(c_ptr), value :: s
    end function
  end interface

contains

  subroutine ioloom_async_initialize(path, comm, ierr)
    character(len=*), intent(in) :: path
    integer, intent(in) :: comm
    integer, intent(out) :: ierr
    ierr = c_initialize(trim(path) // c_null_char, int(comm, c_int))
  end subroutine

  subroutine ioloom_async_start(is_client, ierr)
    logical, intent(out) :: is_client
    integer, intent(out) :: ierr
    integer(c_int) :: client
    ierr = c_start(client)
    is_client = client /= 0
  end subroutine

  subroutine ioloom_async_client_comm(comm, ierr)
    integer, intent(out) :: comm, ierr
    integer(c_int) :: c
    ierr = c_client_comm(c)
    comm = c
  end subroutine

  ! nbytes: the block's size in bytes (e.g. int(c_sizeof(theta), 8)), which must be its layout's.
  subroutine ioloom_async_write(name, data, nbytes, ierr)
    character(len=*), intent(in) :: name
    type(*), intent(in) :: data(*)
    integer(8), intent(in) :: nbytes
    integer, intent(out) :: ierr
    ierr = c_write(trim(name) // c_null_char, data, int(nbytes, c_size_t))
  end subroutine

  ! Zero copy: block is the variable's block in the library's memory (c_null_ptr and ierr /= 0 on a mistake); map
  ! it with c_f_pointer(block, array, shape) in the layout's shape (Fortran order), fill it, then commit it, and
  ! clear it once the program no longer reads it.
  subroutine ioloom_async_alloc(name, block, ierr)
    character(len=*), intent(in) :: name
    type(c_ptr), intent(out) :: block
    integer, intent(out) :: ierr
    ierr = c_alloc(trim(name) // c_null_char, block)
  end subroutine

  subroutine ioloom_async_commit(name, ierr)
    character(len=*), intent(in) :: name
    integer, intent(out) :: ierr
    ierr = c_commit(trim(name) // c_null_char)
  end subroutine

  subroutine ioloom_async_clear(name, ierr)
    character(len=*), intent(in) :: name
    integer, intent(out) :: ierr
    ierr = c_clear(trim(name) // c_null_char)
  end subroutine

  subroutine ioloom_async_signal(event, ierr)
    character(len=*), intent(in) :: event
    integer, intent(out) :: ierr
    ierr = c_signal(trim(event) // c_null_char)
  end subroutine

  subroutine ioloom_async_end_iteration(ierr)
    integer, intent(out) :: ierr
    ierr = c_end_iteration()
  end subroutine

  subroutine ioloom_async_finalize(ierr)
    integer, intent(out) :: ierr
    ierr = c_finalize()
  end subroutine

  ! This client's block of a variable in the global domain (a layout with global and position): its offset per
  ! dimension, counted from 0, in Fortran order (the first dimension first); ierr 2 when offset is too short.
  subroutine ioloom_async_block_position(name, offset, ierr)
    character(len=*), intent(in) :: name
    integer(8), intent(out) :: offset(:)
    integer, intent(out) :: ierr
    ierr = c_block_position(trim(name) // c_null_char, offset, int(size(offset), c_int))
  end subroutine
  ! The last error message, cut to message's length.
  subroutine ioloom_async_error(message)
    character(len=*), intent(out) :: message
    character(kind=c_char), pointer :: chars(:)
    type(c_ptr) :: p
    integer :: i, n
    p = c_error()
    n = int(c_strlen(p))
    call c_f_pointer(p, chars, [max(n, 1)])
    message = ''
    do i = 1, min(n, len(message))
      message(i:i) = chars(i)
    end do
  end subroutine
end module ioloom_async
