"""The calling thread's alternate signal stack, kept usable after OpenVINO's CPU plugin is destroyed.

OpenVINO's CPU plugin (2026.4.1 here; ``src/plugins/intel_cpu/src/sigstack_manager.cpp``) gives the
thread that creates it an alternate signal stack (``mmap``, ``sigaltstack``) and, when the plugin is
destroyed, unmaps that stack, putting the thread's previous one back only if the destroying thread is
still using it. So a ``Core`` destroyed on another thread (a garbage collection that runs there), or
two ``Core``s destroyed in the order they were made, leave the creating thread's signal stack pointing
at unmapped memory, and the next signal delivered to that thread (Ctrl-C: SIGINT goes to the main
thread) kills the process with SIGSEGV instead of raising KeyboardInterrupt (the kernel cannot write
the handler's frame). ovrnn itself keeps one ``Core`` for the process (``ov.core()``), never destroyed;
the ``Core``s of the caller's own code are the ones that can leave such a stack behind.

``sound_signal_stack()`` gives the calling thread one of ovrnn's stacks (one per thread, never freed)
unless it already uses it; ovrnn calls it where it compiles a model (``runtime.compile_ir``): every
Runner, Stream, StreamBatcher and validate run. Not only an unmapped stack is replaced: the pages of
a stack the plugin unmapped are soon mapped again by someone else (a buffer of the caller's: a
Ctrl-C then wrote 3284 bytes of its signal frame into it, silently), and a stack the plugin still
holds is unmapped when its Core goes. A thread with no alternate stack, or running on its own, is
left alone. Linux only (the plugin's code is Linux only).
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import sys
import threading

_STACK_BYTES = 1 << 16  # far above the kernel's minimum signal frame (AT_MINSIGSTKSZ: 3-11 KiB with AVX-512 or AMX state)
_OWN_STACKS: dict[int, mmap.mmap] = {}  # thread ident -> ovrnn's stack for it: never freed (an ident is reused only once its thread ended)
_SS_ONSTACK, _SS_DISABLE = 1, 2


class _Stack(ctypes.Structure):  # stack_t
    _fields_ = [("ss_sp", ctypes.c_void_p), ("ss_flags", ctypes.c_int), ("ss_size", ctypes.c_size_t)]


def sound_signal_stack() -> bool:
    """Give the calling thread ovrnn's alternate signal stack for it unless it uses it already; True when
    it had to (a thread with no such stack, or one running on its stack, keeps it)."""
    if not sys.platform.startswith("linux"):
        return False
    libc, current = _libc(), _Stack()
    if libc.sigaltstack(None, ctypes.byref(current)) != 0 or current.ss_flags & (_SS_ONSTACK | _SS_DISABLE) or not current.ss_sp:
        return False
    memory = _OWN_STACKS.get(threading.get_ident())
    if memory is None:
        memory = mmap.mmap(-1, _STACK_BYTES)  # anonymous, read-write
    address = ctypes.addressof(ctypes.c_char.from_buffer(memory))
    if current.ss_sp == address:
        return False
    if libc.sigaltstack(ctypes.byref(_Stack(address, 0, _STACK_BYTES)), None) != 0:
        return False
    _OWN_STACKS[threading.get_ident()] = memory
    return True


def _mapped(libc, start: int, size: int) -> bool:
    """Is every page of [start, start + size) mapped? mincore fails with ENOMEM where one is not."""
    page = mmap.PAGESIZE
    first = start - start % page
    length = start + size - first
    pages = (ctypes.c_ubyte * ((length + page - 1) // page))()
    if libc.mincore(ctypes.c_void_p(first), ctypes.c_size_t(length), pages) == 0:
        return True
    return ctypes.get_errno() != errno.ENOMEM  # another failure says nothing about the mapping: leave the stack alone


_LIBC: list = []


def _libc():
    if not _LIBC:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.sigaltstack.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        _LIBC.append(libc)
    return _LIBC[0]
