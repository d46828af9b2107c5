"""The native kernels: C++ sources in this folder, compiled on first use and loaded with ctypes.

The sources use only the C++ standard library (no torch headers, no Python headers), so any C++17
compiler builds them in a few seconds; ``-march=native`` lets the compiler vectorise their inner
loops for the machine at hand. The shared library goes to a cache folder keyed by the sources, the
flags, the compiler's version and the CPU, so each machine builds once and a changed source rebuilds
(``UWBENCH_NATIVE_CACHE``, default ``$XDG_CACHE_HOME/uwbench/native`` or ``~/.cache/uwbench/native``).
The build writes to a temporary name and renames it into place, so processes that build at once
(the workers of a sweep) never load a half-written library.

``library()`` returns the loaded library or raises ``NativeUnavailable`` naming why (no compiler, a
failed build); ``available()`` says whether it can be had. The kernels' ABI is documented in each
source file; ``uwbench.models.native`` drives them.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from typing import Optional

from uwbench import env

SOURCES = ("cells.cpp", "dnc.cpp", "ntm.cpp", "cuw.cpp")
HEADERS = ("vmath.h",)
FLAGS = ("-O3", "-march=native", "-std=c++17", "-shared", "-fPIC", "-fno-math-errno", "-fopenmp-simd")
COMPILER_ENV = "CXX"  # the compiler to use (default: c++, then g++, then clang++)
CACHE_ENV = env.NATIVE_CACHE_ENV

_lock = threading.Lock()
_library: Optional[ctypes.CDLL] = None
_failure: Optional[str] = None


class NativeUnavailable(RuntimeError):
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


def _build_key(cxx: str) -> str:
    here = os.path.dirname(__file__)
    digest = hashlib.sha256()
    for name in SOURCES + HEADERS:
        with open(os.path.join(here, name), "rb") as fh:
            digest.update(name.encode() + b"\0" + fh.read())
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60).stdout
    for part in (" ".join(FLAGS), version, _cpu_model(), platform.machine()):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()[:20]


def build(cxx: Optional[str] = None) -> str:
    """Compile the sources (if this machine's cached build is missing) and return the library's path."""
    cxx = cxx or compiler()
    if cxx is None:
        raise NativeUnavailable("no C++ compiler found (c++, g++ or clang++ on the PATH, or $CXX): install one "
                                "(e.g. `apt install g++`) or set train.native=false")
    here = os.path.dirname(__file__)
    folder = cache_dir()
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise NativeUnavailable(f"cannot create the native kernels' cache folder {folder} ({exc}): point "
                                f"${CACHE_ENV} at a writable folder, or set train.native=false") from exc
    try:
        key = _build_key(cxx)
    except (OSError, subprocess.SubprocessError) as exc:
        raise NativeUnavailable(f"the C++ compiler {cxx!r} does not run ({exc}): install one (e.g. `apt install g++`), "
                                f"point ${COMPILER_ENV} at it, or set train.native=false") from exc
    target = os.path.join(folder, f"uwbench_native_{key}.so")
    if os.path.exists(target):
        return target
    try:
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=folder)
    except OSError as exc:
        raise NativeUnavailable(f"cannot write to the native kernels' cache folder {folder} ({exc}): point "
                                f"${CACHE_ENV} at a writable folder, or set train.native=false") from exc
    os.close(fd)
    cmd = [cxx, *FLAGS, "-o", tmp, *(os.path.join(here, name) for name in SOURCES)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise NativeUnavailable(f"building the native kernels failed ({' '.join(cmd)}):\n{done.stderr.strip()}\n"
                                    "set train.native=false to use the torch path")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def library() -> ctypes.CDLL:
    """The loaded kernels (built on first use); raises ``NativeUnavailable`` with the reason."""
    global _library, _failure
    with _lock:
        if _library is not None:
            return _library
        if _failure is not None:
            raise NativeUnavailable(_failure)
        try:
            _library = _declare(ctypes.CDLL(build()))
        except NativeUnavailable as exc:
            _failure = str(exc)
            raise
        except OSError as exc:
            _failure = f"loading the native kernels failed: {exc}; set train.native=false to use the torch path"
            raise NativeUnavailable(_failure) from exc
        return _library


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
    """Argument types of every entry point (ctypes would otherwise pass Python ints as 32-bit C ints)."""
    i, l, d, p = ctypes.c_int, ctypes.c_long, ctypes.c_double, ctypes.c_void_p
    for sfx in ("f32", "f64"):
        for cell in ("ln_lstm", "lstm", "rnn"):
            getattr(lib, f"{cell}_fwd_{sfx}").argtypes = [i, i, p, l, p, l, p, l, p, p, p, p, p]
            getattr(lib, f"{cell}_bwd_{sfx}").argtypes = [i, i, p, p, p, p, p, p, p, l, p, p]
        getattr(lib, f"dnc_fwd_{sfx}").argtypes = [i, i, i, i, i, d, p, p, p, p]
        getattr(lib, f"dnc_bwd_{sfx}").argtypes = [i, i, i, i, i, d, p, p, p, p, p, p]
        getattr(lib, f"ntm_fwd_{sfx}").argtypes = [i, i, i, i, d, p, p, p, p]
        getattr(lib, f"ntm_bwd_{sfx}").argtypes = [i, i, i, i, d, p, p, p, p, p, p]
        getattr(lib, f"cuw_fwd_{sfx}").argtypes = [i, i, i, i, i, p, p, l] + [p] * 8
        getattr(lib, f"cuw_bwd_{sfx}").argtypes = [i, i, i, i, i, p, p, l] + [p] * 15
    for name, n_args in (("ln_lstm_saved_size", 1), ("lstm_saved_size", 1), ("rnn_saved_size", 1),
                         ("dnc_state_size", 3), ("dnc_interface_size", 3), ("ntm_state_size", 2),
                         ("ntm_interface_size", 1)):
        fn = getattr(lib, name)
        fn.argtypes = [i] * n_args
        fn.restype = i
    for fn in ("fwd", "bwd"):
        for sfx in ("f32", "f64"):
            for prefix in ("ln_lstm", "lstm", "rnn", "dnc", "ntm", "cuw"):
                getattr(lib, f"{prefix}_{fn}_{sfx}").restype = None
    return lib
