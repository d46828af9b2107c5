"""The native kernels: C++ sources in this folder, compiled on first use and loaded with ctypes.

The sources use only the C++ standard library (no torch headers, no Python headers), so any C++17
compiler builds them in a few seconds; ``-march=native`` lets the compiler vectorise their inner
loops for the machine at hand. The shared library goes to a cache folder keyed by the sources, the
flags, the compiler's version and the CPU, so each machine builds once and a changed source rebuilds
(``UWBENCH_NATIVE_CACHE``, default ``$XDG_CACHE_HOME/uwbench/native`` or ``~/.cache/uwbench/native``).
A file lock (``build.lock`` in the cache folder) is held around the build, so processes that start at
once on a cold cache (the workers of a sweep) wait for one compiler run and then load its result; the
build also writes to a temporary name and renames it into place, so no process ever loads a
half-written library. The library's size and sha256 are recorded beside it at build time
(``<library>.sha256``) and checked before it is loaded: a library that does not match (cut short by a full
disk, changed since) is rebuilt, with one line saying so. ``prebuild()`` builds ahead (the sweep's parent does, before its workers start).

**Vector width.** ``-march=native`` gives the kernels the widest vectors the machine has (64 bytes with
AVX-512, 32 with AVX2). ``$UWBENCH_NATIVE_VECTOR`` (``VECTOR_ENV``) builds them at another width instead:
``native`` (the default) or ``avx2`` (x86 with AVX2 only: ``-mno-avx512f``, 32-byte vectors, for measuring
or testing an AVX2-only machine's code on an AVX-512 one). The choice is part of the flags, so of the
cache key, and each choice is loaded once per process; ``library()`` reads the variable on each call, so a
process (a test) can run one model on each.

``library()`` returns the loaded library or raises ``NativeUnavailable`` naming why (no compiler, a
failed build); ``available()`` says whether it can be had. Every entry point is typed from one table,
``SIGNATURES`` (by kernel family; ``KERNELS`` gives each kernel's family and number of size
arguments), and the routines the drivers share (``gemm.cpp``'s matrix products) from ``ROUTINES``.
The kernels' ABI is documented in each source file; ``uwbench.native.parts`` has what a model part
declares to use them and the check of that against the kernels' exported sizes, and
``uwbench.models.native`` drives them.
"""
from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
from typing import Dict, List, Optional, Tuple

from uwbench import env
from uwbench.errors import UserError

SOURCES = ("cells.cpp", "dnc.cpp", "ntm.cpp", "cuw.cpp", "gemm.cpp")
HEADERS = ("vmath.h",)
# -fno-trapping-math (torch builds with it too): no kernel unmasks floating-point exceptions, and without it
# the compiler may not vectorise a loop whose division it cannot prove safe to run on every lane (the
# clamped exp in vmath.h's scalar sigmoid and tanh): with AVX2, which has no masked division, such loops
# ran element by element. Values are unchanged (no reassociation, NaN and infinities kept).
FLAGS = ("-O3", "-march=native", "-std=c++17", "-shared", "-fPIC", "-fno-math-errno", "-fno-trapping-math",
         "-fopenmp-simd")
COMPILER_ENV = "CXX"  # the compiler to use (default: c++, then g++, then clang++)
VECTOR_ENV = "UWBENCH_NATIVE_VECTOR"  # the kernels' vector width: a key of VECTOR_FLAGS (default native)
# the flags each vector-width choice adds, and the CPU flag it needs (None: any CPU)
VECTOR_FLAGS: Dict[str, Tuple[Tuple[str, ...], Optional[str]]] = {
    "native": ((), None),
    "avx2": (("-mno-avx512f", "-DUWB_VECTOR_BYTES=32", "-Wno-psabi"), "avx2"),  # psabi: 64-byte vector types
}
CACHE_ENV = env.NATIVE_CACHE_ENV

LOCK_NAME = "build.lock"

# kernel -> (family, number of size arguments): the entry points of a kernel are <kernel>_<entry> for the
# entries of its family below; the typed ones (fwd, bwd) once per float type, <kernel>_<entry>_f32 / _f64
KERNELS: Dict[str, Tuple[str, int]] = {
    "ln_lstm": ("cell", 1), "lstm": ("cell", 1), "rnn": ("cell", 1),  # H
    "dnc": ("memory", 3),  # N, W, R
    "ntm": ("memory", 2),  # N, M
    "cuw": ("attention", 3),  # H, read_size, A
}
FLOAT_TYPES = ("f32", "f64")
TYPED = ("fwd", "bwd", "bwd_ld")
_i, _l, _d, _p = ctypes.c_int, ctypes.c_long, ctypes.c_double, ctypes.c_void_p
# family -> entry -> (argument types before the size arguments, argument types after them, result type)
SIGNATURES: Dict[str, Dict[str, Tuple[List, List, Optional[type]]]] = {
    "cell": {  # (B, H, gx, ld_gx, hh, ld_hh, gr, ld_gr, c_prev, params, h_out, c_out, saved) and its backward
        "fwd": ([_i], [_p, _l, _p, _l, _p, _l, _p, _p, _p, _p, _p], None),
        "bwd": ([_i], [_p, _p, _p, _p, _p, _p, _p, _l, _p, _p], None),
        "bwd_ld": ([_i], [_p, _p, _p, _p, _p, _l, _p, _p, _l, _p, _p], None),  # bwd with dh's row stride
        "saved_size": ([], [], _i), "gate_size": ([], [], _i), "params_size": ([], [], _i),
    },
    "memory": {  # (B, sizes, write, clip, xi, state_prev, state_next, r) and its backward
        "fwd": ([_i], [_i, _d, _p, _p, _p, _p], None),
        "bwd": ([_i], [_i, _d, _p, _p, _p, _p, _p, _p], None),
        "state_size": ([], [], _i), "interface_size": ([], [], _i), "read_size": ([], [], _i),
    },
    "attention": {  # (B, n, sizes, h, cache, cache_stride, r, 4 params, a, alpha, act) and its backward
        "fwd": ([_i, _i], [_p, _p, _l] + [_p] * 8, None),
        "bwd": ([_i, _i], [_p, _p, _l] + [_p] * 15, None),
        "params_size": ([], [], _i), "act_size": ([], [], _i),
    },
}
# the routines the kernels' drivers share, each <name>_f32 / _f64: argument types, result type
ROUTINES: Dict[str, Tuple[List, Optional[type]]] = {
    # C (M x N) = C0 (or zero) + op(A) B: (M, N, K, A, lda, trans_a, B, ldb, C0, ldc0, C, ldc), gemm.cpp
    "gemm": ([_i, _i, _i, _p, _l, _i, _p, _l, _p, _l, _p, _l], None),
}

_lock = threading.Lock()
_library: Optional[ctypes.CDLL] = None  # the native choice's library (or why it failed)
_failure: Optional[str] = None
_other_libraries: Dict[str, ctypes.CDLL] = {}  # the other choices' (VECTOR_FLAGS), or why they failed
_other_failures: Dict[str, str] = {}


class NativeUnavailable(UserError, RuntimeError):
    """The native kernels cannot be built or loaded on this machine (the message says why and what to do)."""


def cache_dir() -> str:
    return env.native_cache_dir()


def compiler() -> Optional[str]:
    """The C++ compiler: $CXX if set, else the first of c++, g++, clang++ on the PATH (None: none)."""
    named = os.environ.get(COMPILER_ENV)
    if named:
        return shutil.which(named) or named
    for name in ("c++", "g++", "clang++"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _cpu_model() -> str:
    """The CPU's model name and instruction-set flags: machines that share a cache folder (a home
    directory on a cluster) share a build only where ``-march=native`` means the same instructions."""
    lines = []
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith(("model name", "flags", "Features", "CPU implementer", "CPU part")):
                    lines.append(line)
                elif not line.strip() and lines:
                    break  # the first processor's block is enough
    except OSError:
        pass
    return "".join(lines) or platform.processor() or platform.machine()


def vector_choice() -> str:
    """The vector-width choice ``$UWBENCH_NATIVE_VECTOR`` names (default ``native``); ``NativeUnavailable`` for
    a name that is not one, or a choice this CPU cannot run."""
    choice = os.environ.get(VECTOR_ENV, "").strip().lower() or "native"
    if choice not in VECTOR_FLAGS:
        raise NativeUnavailable(f"${VECTOR_ENV}={choice!r} is not a vector width the kernels build at; use one of "
                                f"{', '.join(VECTOR_FLAGS)}")
    needs = VECTOR_FLAGS[choice][1]
    if needs is not None and needs not in cpu_flags():
        raise NativeUnavailable(f"${VECTOR_ENV}={choice} needs a CPU with {needs}, which this one "
                                f"({platform.machine()}) does not list; unset it to build for this machine")
    return choice


def cpu_flags() -> set:
    """The instruction-set flags of the first CPU in /proc/cpuinfo (empty where there is none)."""
    for line in _cpu_model().splitlines():
        if line.startswith(("flags", "Features")):
            return set(line.split(":", 1)[1].split())
    return set()


def flags(choice: str = "native") -> Tuple[str, ...]:
    """The compiler flags for a vector-width choice (``VECTOR_FLAGS``)."""
    return FLAGS + VECTOR_FLAGS[choice][0]


def _build_key(cxx: str, choice: str = "native") -> str:
    here = os.path.dirname(__file__)
    digest = hashlib.sha256()
    for name in SOURCES + HEADERS:
        with open(os.path.join(here, name), "rb") as fh:
            digest.update(name.encode() + b"\0" + fh.read())
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60).stdout
    for part in (" ".join(flags(choice)), version, _cpu_model(), platform.machine()):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()[:20]


def build(cxx: Optional[str] = None, choice: Optional[str] = None) -> str:
    """Compile the sources (if this machine's cached build is missing) and return the library's path;
    ``choice``: the vector width (``VECTOR_FLAGS``; default ``$UWBENCH_NATIVE_VECTOR``, else native)."""
    choice = vector_choice() if choice is None else choice
    cxx = cxx or compiler()
    if cxx is None:
        raise NativeUnavailable("no C++ compiler found (c++, g++ or clang++ on the PATH, or $CXX): install one "
                                "(e.g. `apt install g++`) or set train.native=false")
    folder = cache_dir()
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise NativeUnavailable(f"cannot create the native kernels' cache folder {folder} ({exc}): point "
                                f"${CACHE_ENV} at a writable folder, or set train.native=false") from exc
    try:
        key = _build_key(cxx, choice)
    except (OSError, subprocess.SubprocessError) as exc:
        raise NativeUnavailable(f"the C++ compiler {cxx!r} does not run ({exc}): install one (e.g. `apt install g++`), "
                                f"point ${COMPILER_ENV} at it, or set train.native=false") from exc
    target = os.path.join(folder, f"uwbench_native_{key}.so")
    if os.path.exists(target) and mismatch(target) is None:
        return target
    try:
        lock = open(os.path.join(folder, LOCK_NAME), "a")
    except OSError as exc:
        raise NativeUnavailable(f"cannot write to the native kernels' cache folder {folder} ({exc}): point "
                                f"${CACHE_ENV} at a writable folder, or set train.native=false") from exc
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one compiler run per machine: the others wait here, then find it
        if os.path.exists(target):
            why = mismatch(target)  # again: another process may have rebuilt it meanwhile
            if why is None:
                return target
            print(f"uwbench: the cached native kernel library {target} {why}: rebuilding it", file=sys.stderr)
        _compile(cxx, folder, target, flags(choice))
    return target


RECORD_SUFFIX = ".sha256"  # beside each library: "<size> <sha256>" of the file as the compiler wrote it


def _digest(path: str) -> Tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
            size += len(block)
    return size, digest.hexdigest()


def mismatch(path: str) -> Optional[str]:
    """Why the library at ``path`` is not the one that was built there (cut short by a full disk or a kill,
    changed since, or without the record of its build), or None when its size and sha256 are those recorded
    at build time (``path`` + ``RECORD_SUFFIX``). Loading a library cut short ends the process with SIGBUS."""
    try:
        with open(path + RECORD_SUFFIX) as fh:
            fields = fh.read().split()
        size, sha = int(fields[0]), fields[1]
    except (OSError, ValueError, IndexError):
        return "has no record of its build (size and sha256)"
    try:
        have_size, have_sha = _digest(path)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if have_size != size:
        return f"is {have_size} bytes, but {size} were built"
    if have_sha != sha:
        return "does not have the sha256 recorded when it was built"
    return None


def _compile(cxx: str, folder: str, target: str, cflags: Tuple[str, ...]) -> None:
    here = os.path.dirname(__file__)
    try:
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=folder)
    except OSError as exc:
        raise NativeUnavailable(f"cannot write to the native kernels' cache folder {folder} ({exc}): point "
                                f"${CACHE_ENV} at a writable folder, or set train.native=false") from exc
    os.close(fd)
    cmd = [cxx, *cflags, "-o", tmp, *(os.path.join(here, name) for name in SOURCES)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise NativeUnavailable(f"building the native kernels failed ({' '.join(cmd)}):\n{done.stderr.strip()}\n"
                                    "set train.native=false to use the torch path")
        size, sha = _digest(tmp)
        record_tmp = f"{tmp}{RECORD_SUFFIX}"
        with open(record_tmp, "w") as fh:
            fh.write(f"{size} {sha}\n")
        os.replace(record_tmp, target + RECORD_SUFFIX)  # the record first: a library is never there without it
        os.replace(tmp, target)
    finally:
        for leftover in (tmp, f"{tmp}{RECORD_SUFFIX}"):
            if os.path.exists(leftover):
                os.unlink(leftover)


def prebuild() -> Optional[str]:
    """Build the kernels now if this machine can (before starting worker processes, so they find them
    built); returns why not, or None. Never raises: each run decides by its own ``train.native``."""
    try:
        build()
    except NativeUnavailable as exc:
        return str(exc)
    return None


def library() -> ctypes.CDLL:
    """The loaded kernels (built on first use) at the vector width ``$UWBENCH_NATIVE_VECTOR`` names (default:
    the machine's); raises ``NativeUnavailable`` with the reason."""
    global _library, _failure
    choice = vector_choice()
    with _lock:
        if choice != "native":
            return _load_other(choice)
        if _library is not None:
            return _library
        if _failure is not None:
            raise NativeUnavailable(_failure)
        try:
            _library = _load(choice)
        except NativeUnavailable as exc:
            _failure = str(exc)
            raise
        return _library


def _load_other(choice: str) -> ctypes.CDLL:
    """``library()`` for a choice other than native (kept apart: the tests reset the native one)."""
    if choice in _other_libraries:
        return _other_libraries[choice]
    if choice in _other_failures:
        raise NativeUnavailable(_other_failures[choice])
    try:
        _other_libraries[choice] = _load(choice)
    except NativeUnavailable as exc:
        _other_failures[choice] = str(exc)
        raise
    return _other_libraries[choice]


def _load(choice: str) -> ctypes.CDLL:
    try:
        return _declare(ctypes.CDLL(build(choice=choice)))
    except OSError as exc:
        raise NativeUnavailable(f"loading the native kernels failed: {exc}; set train.native=false to use the "
                                "torch path") from exc


def available() -> bool:
    try:
        library()
    except NativeUnavailable:
        return False
    return True


def unavailable_reason() -> Optional[str]:
    """None when the kernels load, else why not."""
    try:
        library()
    except NativeUnavailable as exc:
        return str(exc)
    return None


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    """Type every entry point from ``SIGNATURES`` (ctypes would otherwise pass Python ints as 32-bit C ints
    and return nothing typed); an entry point the library lacks is a ``NativeUnavailable``."""
    for kernel, (family, arity) in KERNELS.items():
        for entry, (before, after, result) in SIGNATURES[family].items():
            for name in ([f"{kernel}_{entry}_{t}" for t in FLOAT_TYPES] if entry in TYPED else [f"{kernel}_{entry}"]):
                try:
                    fn = getattr(lib, name)
                except AttributeError as exc:
                    raise NativeUnavailable(f"the native library has no entry point {name} ({family} kernel "
                                            f"{kernel!r}): its sources and uwbench/native/__init__.py's SIGNATURES "
                                            "disagree") from exc
                fn.argtypes = before + [_i] * arity + after
                fn.restype = result
    for routine, (args, result) in ROUTINES.items():
        for t in FLOAT_TYPES:
            try:
                fn = getattr(lib, f"{routine}_{t}")
            except AttributeError as exc:
                raise NativeUnavailable(f"the native library has no entry point {routine}_{t}: its sources and "
                                        "uwbench/native/__init__.py's ROUTINES disagree") from exc
            fn.argtypes, fn.restype = args, result
    return lib
