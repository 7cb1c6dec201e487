"""The process behind ``Environment``: BFCL's API instances, driven by method name over a pipe.

A worker is a process of its own, serving one environment at a time, made one of two ways:

- forked (the default where ``os.fork`` and descriptor passing exist: Linux,
  macOS): ``Environment`` starts this file once per parent process as a *fork
  server*, ``python -s -B _worker.py --fork-server FD``, with a minimal
  environment (no API keys, ``PYTHONHASHSEED=0`` so that string sets iterate
  the same way in every worker of the same episode). The server imports the
  API modules (and ``_strptime``, which ``datetime.strptime`` imports on
  first use) once, and then only forks: for each request it receives the two
  pipe ends of a new worker over its unix socket (``SCM_RIGHTS``), forks, and
  answers the child's process id. It never creates an instance, loads a
  scenario or runs a method, so every fork starts from pristine modules (the
  methods' default arguments included). It ends and reaps a child when the
  parent asks (the child stays a zombie until then, so its id is never
  reused while the parent may still signal it), and it exits, ending its
  children, when its socket reaches end of input: the parent has exited;
  A forked worker on Linux is *reused*: when its environment closes, the
  parent sends ``reset`` instead of ending it; the worker drops the
  instances, puts back the state it had before its first environment
  (``Pristine``: the watched modules' globals, class attributes and
  functions' defaults in place, ``random``'s generator, ``decimal``'s
  context, ``mpmath``'s precision, ``warnings``' filters) and its peak
  memory count (``/proc/self/clear_refs``), checks what it cannot put back
  (no module imported, no thread left, signal handlers, working directory,
  trace functions), answers ``("reset", True)`` and reads the next
  ``init``. Where anything fails it answers ``("reset", False, why)`` and
  ends; the parent then forks a fresh one. The limits, the guard and the
  environment variables stay as the first ``init`` set them (the parent
  pools workers by their memory bound);
- spawned (the fallback): ``python -s -B _worker.py`` with that same
  environment, talking over its standard input and output.

Either way each message is an 8-byte big-endian length and a pickle. The
parent is trusted (this side unpickles with ``pickle``); the parent unpickles
the replies with an unpickler that builds no object other than plain data, so
even a subverted worker cannot make it run code.

The first message (``init``) brings the parent's ``sys.path``, the classes
with their modules, the initial configuration and the bounds. The worker
then:

1. imports the API modules (each class's module under
   ``bfcl_eval.eval_checker.multi_turn_eval.func_source_code``; a forked
   worker finds them imported);
2. bounds itself: ``RLIMIT_AS`` (address space: a call that allocates past
   it gets ``MemoryError``), ``RLIMIT_FSIZE`` 0 (no file can be written),
   ``RLIMIT_NPROC`` 0 (no process can be started, where the kernel enforces
   it for this user), ``RLIMIT_CORE`` 0; its working directory is ``/``
   and its standard input and output point at ``/dev/null`` (the protocol
   uses other descriptors), so nothing a method prints reaches the pipe;
3. creates the instances as bfcl-eval's ``execute_multi_turn_func_call``
   does: ``cls()``, then, unless the class is stateless (``MathAPI``),
   ``instance._load_scenario(copy.deepcopy(initial_config.get(name, {})),
   long_context=long_context)`` (the copy is the state just unpickled from
   ``init``, which nothing else holds);
4. maps every documented method name to its class (the names come from the
   function docs; each must be a public bound method of the instance, as
   bfcl-eval's executor lists them with ``inspect.getmembers``; a later
   class wins a name two classes share, as in bfcl-eval).

Then it serves requests: ``call`` (one method, keyword arguments already
validated by the parent), ``replay`` (several calls, after a restart),
``state`` (every instance's public attributes as plain data, within the
bounds ``init`` gave), ``usage`` (peak memory) and ``exit``. Every call runs
under ``setitimer``: if the parent has not killed the worker at the time
bound, ``SIGALRM``, left at its default action, ends it a moment later, even
inside a C loop such as a huge integer power and even when the parent itself
is gone. A forked worker also ends when its server does (``PR_SET_PDEATHSIG``
on Linux).

A call's result becomes the text bfcl-eval's executor gives the model: a
``str`` as it is; a ``dict`` (exactly) as ``json.dumps(result)`` (with
``ensure_ascii=False`` when ``init`` asks for UTF-8 results), or
``str(result)`` when it does not serialize (``Decimal`` values); anything
else ``str(result)``; an exception, also one raised while converting,
``"Error during execution: " + str(exc)``. The text is cut at the output
bound with a marker. ``MemoryError`` is not a result: the worker replies that
the memory bound was hit and exits (the instance may be half-changed), and
the parent restarts it and replays the calls that ran before.

This file must stay importable with the standard library alone and must not
import promptgrid: it runs in a fresh interpreter before ``sys.path`` is set.
"""

from __future__ import annotations

import decimal
import gc
import importlib
import importlib.machinery
import inspect
import json
import os
import pickle
import random
import select
import signal
import socket
import struct
import sys
import threading
import time
import types
import warnings
from typing import Any

try:  # POSIX only; Environment needs it, importing this module must not
    import resource
except ImportError:  # pragma: no cover - Windows
    resource = None  # type: ignore[assignment]

HEADER = struct.Struct("!Q")
"""Every message is this header (the payload's length) and a pickle of that length."""

OK = "ran"
REFUSED = "refused"
MEMORY = "memory"
ERROR = "error"
READY = "ready"
STATE_TOO_LARGE = "state_too_large"

FORK = b"F"
"""A fork-server request: fork a worker on the two descriptors sent with it; the answer is its process id (a
negative error number if the fork failed)."""
END = b"E"
"""A fork-server request without an answer: kill the child whose id follows; it is reaped within moments."""
REAP_INTERVAL_S = 0.02
"""How often the fork server looks for killed children to reap while there are some."""
REQUEST = struct.Struct("!cq")
"""A fork-server request: the kind and a number (a child's process id, or 0)."""
ANSWER = struct.Struct("!q")
PRELOADED = ("_strptime",)
"""Modules the API methods import on first use (``datetime.strptime``), imported by the fork server once."""

ALARM_GRACE_S = 0.5
"""How long after the time bound the worker ends itself if the parent has not killed it."""

_ERROR_PREFIX = "Error during execution: "


# --------------------------------------------------------------------------- framing

def read_exact(fd: int, size: int) -> bytes | None:
    """``size`` bytes from ``fd``, or ``None`` at end of input."""
    chunks = []
    while size > 0:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def encode(message: Any) -> bytes:
    """``message`` as it goes over a pipe: the header and the pickle."""
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(payload)) + payload


def write_all(fd: int, encoded: bytes) -> None:
    data = memoryview(encoded)
    while data:
        written = os.write(fd, data)
        data = data[written:]


def write_message(fd: int, message: Any) -> None:
    write_all(fd, encode(message))


def read_message(fd: int) -> Any:
    header = read_exact(fd, HEADER.size)
    if header is None:
        return None
    payload = read_exact(fd, HEADER.unpack(header)[0])
    return None if payload is None else pickle.loads(payload)


# --------------------------------------------------------------------------- results as text

def as_text(result: Any, ascii_results: bool = True) -> str:
    """The text bfcl-eval's ``execute_multi_turn_func_call`` makes of a method's return value (``type(...) ==``,
    not ``isinstance``, as there: a dict subclass is ``str``-ed); ``ascii_results=False`` keeps non-ASCII
    characters of a dict's JSON as they are instead of ``\\u`` escapes."""
    if type(result) == str:  # noqa: E721 -- exact type, as bfcl-eval tests it
        return result
    if type(result) == dict:  # noqa: E721
        try:
            return json.dumps(result, ensure_ascii=ascii_results)
        except Exception:  # bfcl-eval: bare except around json.dumps
            return str(result)
    return str(result)


def describe_exception(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # an exception whose str() fails (a huge int in its message)
        return type(exc).__name__


def cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"... [output cut at {limit} of {len(text)} characters]"


# --------------------------------------------------------------------------- state as plain data

class StateTooLarge(Exception):
    """The state is past one of the bounds of ``PlainState``; the message says which."""


class PlainState:
    """Turns the instances' attributes into data that pickles to builtins only and compares as bfcl-eval's state
    checker compares it, within bounds: at most ``max_values`` values (scalars, containers and keys),
    ``max_depth`` levels of containers and ``max_chars`` characters of text, counted as the data comes out
    (a folder shared by several parents counts once per parent, as it is reported). Past a bound it raises
    ``StateTooLarge`` at once, having built at most that much.

    GorillaFileSystem's ``Directory`` and ``File`` compare by name and contents
    (a directory's parent is not compared), so they become
    ``{"type": "directory", "name": ..., "contents": {...}}`` and
    ``{"type": "file", "name": ..., "content": ...}``. Containers keep their
    type (a tuple never equals a list in bfcl-eval's comparison either).
    """

    def __init__(self, max_values: int, max_depth: int, max_chars: int) -> None:
        self.max_values = max_values
        self.max_depth = max_depth
        self.max_chars = max_chars
        self.values = 0
        self.chars = 0

    def _count(self, chars: int = 0) -> None:
        self.values += 1
        self.chars += chars
        if self.values > self.max_values:
            raise StateTooLarge(f"more than {self.max_values} values")
        if self.chars > self.max_chars:
            raise StateTooLarge(f"more than {self.max_chars} characters of text")

    def _container(self, depth: int) -> None:
        self._count()
        if depth > self.max_depth:
            raise StateTooLarge(f"containers nested more than {self.max_depth} levels deep")

    def _mapping(self, items: Any, depth: int) -> dict[Any, Any]:
        self._container(depth)
        return {self.plain(k, depth + 1): self.plain(v, depth + 1) for k, v in items}

    def plain(self, value: Any, depth: int = 1) -> Any:
        """``value`` as plain data; ``depth`` is the nesting level it will have (the attribute's value: 1)."""
        kind = type(value)
        if value is None or kind is bool or kind is int or kind is float:
            self._count()
            return value
        if kind is str:
            self._count(len(value))
            return value
        for scalar in (bool, int, float, str):  # a subclass (an IntEnum, a str subclass) as its builtin value
            if isinstance(value, scalar):
                return self.plain(scalar(value), depth)
        if kind.__name__ == "Directory" and hasattr(value, "contents"):
            self._container(depth)
            return {"type": "directory", "name": self.plain(value.name, depth + 1),
                    "contents": self._mapping(value.contents.items(), depth + 1)}
        if kind.__name__ == "File" and hasattr(value, "content"):
            self._container(depth)
            return {"type": "file", "name": self.plain(value.name, depth + 1),
                    "content": self.plain(value.content, depth + 1)}
        if isinstance(value, dict):
            return self._mapping(value.items(), depth)
        self._container(depth)
        if isinstance(value, list):
            return [self.plain(v, depth + 1) for v in value]
        if isinstance(value, tuple):
            return tuple(self.plain(v, depth + 1) for v in value)
        if isinstance(value, (set, frozenset)):
            return {self.plain(v, depth + 1) for v in value}
        shown = repr(value)[:1000]
        self._count(len(shown))
        return {"type": "object", "class": f"{kind.__module__}.{kind.__qualname__}", "repr": shown}


# --------------------------------------------------------------------------- the worker

class Worker:
    """The instances of one environment and the requests that drive them.

    Built in two phases, so that a failure can be told apart: ``import_classes``
    (a missing package) and ``__init__``, which creates and loads the instances
    (a scenario the class cannot load).
    """

    def __init__(self, init: dict[str, Any], classes: dict[str, type], limits: dict[str, bool]) -> None:
        self.time_limit_s: float = init["time_limit_s"]
        self.max_output_chars: int = init["max_output_chars"]
        self.ascii_results: bool = init.get("ascii_results", True)
        self.state_bounds: tuple[int, int, int] = tuple(init["state_bounds"])
        self.limits = limits
        self.instances: dict[str, Any] = {}
        self.methods: dict[str, str] = {}
        for name, cls in classes.items():
            instance = cls()
            if name not in init["stateless"]:
                # bfcl-eval passes copy.deepcopy(initial_config[name]); the dict here was just unpickled from the
                # init message and nothing else holds it or any part of it (a JSON state shares no objects between
                # classes), so it is already such a copy.
                instance._load_scenario(init["initial_config"].get(name, {}), long_context=init["long_context"])
            self.instances[name] = instance
            for method in init["doc_names"].get(name, ()):  # as inspect.getmembers(instance, ismethod) finds them
                if not method.startswith("_") and inspect.ismethod(getattr(instance, method, None)):
                    self.methods[method] = name

    @staticmethod
    def import_classes(init: dict[str, Any]) -> dict[str, type]:
        classes = {}
        for name in init["classes"]:
            module = importlib.import_module(init["modules"][name])
            classes[name] = getattr(module, name)
        return classes

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[Any, ...]:
        owner = self.methods.get(name)
        if owner is None or name.startswith("_"):
            return (REFUSED, "unknown_function", f"{name!r} is not a public method of an involved class")
        method = getattr(self.instances[owner], name)
        if not inspect.ismethod(method):
            return (REFUSED, "unknown_function", f"{name!r} is not a method")
        signal.setitimer(signal.ITIMER_REAL, self.time_limit_s + ALARM_GRACE_S)
        try:
            try:
                text, ok = as_text(method(**arguments), self.ascii_results), True
            except MemoryError:
                raise
            except Exception as exc:
                text, ok = _ERROR_PREFIX + describe_exception(exc), False
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        return (OK, ok, cap(text, self.max_output_chars))

    def state(self) -> dict[str, dict[str, Any]]:
        """Raises ``StateTooLarge`` past the bounds ``init`` gave."""
        reader = PlainState(*self.state_bounds)
        return {name: {key: reader.plain(value) for key, value in vars(instance).items() if not key.startswith("_")}
                for name, instance in self.instances.items()}


def bound_self(memory_limit_bytes: int) -> dict[str, bool]:
    """Apply the process bounds; says which ones the system accepted (macOS, for one, ignores RLIMIT_AS)."""
    applied = {}
    for key, limit, value in (("memory", "RLIMIT_AS", memory_limit_bytes), ("files", "RLIMIT_FSIZE", 0),
                              ("processes", "RLIMIT_NPROC", 0), ("core", "RLIMIT_CORE", 0)):
        which = getattr(resource, limit, None) if resource is not None else None
        if which is None:
            applied[key] = False
            continue
        try:
            hard = resource.getrlimit(which)[1]
            bound = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(which, (bound, bound))  # the hard limit too: nothing in here can raise it again
            applied[key] = True
        except (ValueError, OSError):
            applied[key] = False
    if hasattr(signal, "SIGXFSZ"):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past RLIMIT_FSIZE fails instead of killing
    return applied


DENIED_EVENTS = frozenset({
    "os.system", "os.fork", "os.forkpty", "os.kill", "os.killpg", "os.remove", "os.rename", "os.rmdir",
    "os.mkdir", "os.chmod", "os.chown", "os.link", "os.symlink", "os.truncate", "os.utime", "os.putenv",
    "os.unsetenv", "os.chdir", "os.chroot", "os.setxattr", "os.removexattr", "subprocess.Popen", "pty.spawn",
    "shutil.rmtree", "shutil.copyfile", "shutil.copymode", "shutil.copystat", "shutil.move", "shutil.chown",
    "shutil.make_archive", "shutil.unpack_archive", "urllib.Request", "ftplib.connect", "http.client.connect",
    "smtplib.connect", "poplib.connect", "imaplib.open", "nntplib.connect", "telnetlib.Telnet.open",
    "webbrowser.open", "resource.setrlimit", "resource.prlimit", "sys.addaudithook", "mmap.__new__",
})
DENIED_PREFIXES = ("os.exec", "os.spawn", "os.posix_spawn", "socket.", "ctypes.", "_ctypes.", "winreg.", "msvcrt.",
                   "sqlite3.", "syslog.")
_HARMLESS_EVENTS_KEPT = 1024  # event names remembered as allowed (a bound on the set, not a rule)
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class Guard:
    """The audit hook installed once the instances are loaded: no process, network, file change or file read
    outside the import path from then on.

    bfcl-eval's classes keep their state in memory and need none of these. A
    call may still import a module lazily (``datetime.strptime`` imports
    ``_strptime`` on first use), so reading and listing below the folders on
    ``sys.path`` stays allowed, and only that: ``open`` of any other path, any
    open for writing, and listing any other folder raise ``PermissionError``,
    which the model reads as the call's error.
    """

    def __init__(self, entries: list[str]) -> None:
        self.entries = list(entries)
        folders = [entry for entry in entries if os.path.isdir(entry)]
        self.folders = tuple(os.path.join(os.path.abspath(folder), "") for folder in folders)
        self.archives = frozenset(os.path.abspath(entry) for entry in entries if os.path.isfile(entry))
        self.suffixes = tuple(importlib.machinery.all_suffixes()) + (".pyc",)
        self.harmless: set[str] = set()

    def _absolute(self, path: Any) -> str | None:
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        return os.path.abspath(path) if isinstance(path, str) else None  # a descriptor number is no import

    def importable(self, path: Any) -> bool:
        """A module file below a folder on ``sys.path`` (a ``.py``, ``.pyc`` or extension), or an archive on it."""
        absolute = self._absolute(path)
        if absolute is None:
            return False
        return absolute in self.archives or (absolute.endswith(self.suffixes) and absolute.startswith(self.folders))

    def listable(self, path: Any) -> bool:
        absolute = self._absolute(path)
        return absolute is not None and os.path.join(absolute, "").startswith(self.folders)

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if event in self.harmless:  # most events a worker raises (pickle.find_class, object.__setattr__, ...)
            return
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
                (isinstance(flags, int) and flags & _WRITE_FLAGS)
            if writes or not self.importable(path):
                raise PermissionError("opening files is not allowed inside the tool environment")
            return
        if event in ("os.listdir", "os.scandir"):
            if not args or not self.listable(args[0]):
                raise PermissionError("listing folders is not allowed inside the tool environment")
            return
        if event in DENIED_EVENTS or event.startswith(DENIED_PREFIXES):
            raise PermissionError(f"{event} is not allowed inside the tool environment")
        if len(self.harmless) < _HARMLESS_EVENTS_KEPT:
            self.harmless.add(event)  # decided by its name alone: the same answer every time


def _open_status() -> int | None:
    """A descriptor on ``/proc/self/status`` (Linux), or None."""
    try:
        return os.open("/proc/self/status", os.O_RDONLY)
    except OSError:
        return None


def peak_kib(status: int | None) -> int:
    """This process's peak resident memory since it started (KiB; bytes on macOS, as ``ru_maxrss`` gives it).

    Linux: ``VmHWM`` of ``/proc/self/status``, which starts over at ``exec``. ``ru_maxrss`` does not: a
    worker started from a large process (a test run of 540 MB) would report the parent's size.
    """
    found = status_kib(status, "VmHWM:")
    if found is not None:
        return found
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss if resource else 0


def status_kib(status: int | None, field: str) -> int | None:
    """A ``kB`` field of ``/proc/self/status`` (``VmHWM:``, ``VmSize:``), read through the open ``status``
    descriptor; None where there is none."""
    if status is None:
        return None
    try:
        os.lseek(status, 0, os.SEEK_SET)
        text = os.read(status, 1 << 16).decode("ascii", "replace")
    except OSError:
        return None
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == field and fields[1].isdigit():
            return int(fields[1])
    return None


_ADDRESS_SPACE_SLACK_KIB = 8 * 1024
"""How much a reused worker's address space may have grown since its first environment (or a twentieth of its
memory bound, if more): past it the worker ends, so every environment has the room under ``RLIMIT_AS`` a fresh
worker has, within that much."""

_PREPARED_GUARD: list[Guard] = []
"""The fork server's ``Guard`` for its ``sys.path``, built once for the workers it forks."""


def serve(proto_in: int, proto_out: int, reusable: bool = False) -> None:
    """Read ``init`` from ``proto_in``, set the worker up, then answer requests until ``exit`` or end of input.

    ``reusable`` (a forked worker on Linux): a ``reset`` request ends the environment instead; the worker puts
    its pristine state back (``Pristine``), answers ``("reset", True)`` and reads the next ``init``, or answers
    ``("reset", False, why)`` and ends when it cannot show that it did."""
    pristine: Pristine | None = None
    limits: dict[str, bool] | None = None
    memory_limit = 0
    status = clear_refs = address_space = None
    guarded = False
    while True:
        init = read_message(proto_in)
        if not isinstance(init, dict):
            return
        if sys.path != init["sys_path"]:  # a forked worker has the server's, which is the same
            sys.path[:] = list(init["sys_path"])
        sys.setrecursionlimit(max(1000, 3 * int(init["state_bounds"][1]) + 200))
        phase = "import"
        try:
            classes = Worker.import_classes(init)
            if limits is None:
                memory_limit = init["memory_limit_bytes"]
                limits = bound_self(memory_limit)
            elif init["memory_limit_bytes"] != memory_limit:  # the parent pools workers by their bound
                return
            if reusable and pristine is None:
                try:
                    pristine = Pristine(classes.values())
                except Unrestorable:
                    reusable = False
            elif pristine is not None:
                pristine.take_new_modules()
                try:
                    pristine.watch(classes.values())
                except Unrestorable:  # a module of these classes holds a value that cannot be copied
                    pristine, reusable = None, False
            phase = "load"
            worker: Worker | None = Worker(init, classes, limits)
        except MemoryError:
            write_message(proto_out, (MEMORY, "the initial state does not fit in the memory bound"))
            return
        except BaseException as exc:  # an import or scenario error: reported, then the worker ends
            write_message(proto_out, (ERROR, type(exc).__name__, describe_exception(exc),
                                      getattr(exc, "name", None) if phase == "import" else None, phase))
            return
        if not guarded:
            status = _open_status()  # before the guard, which refuses opens: read again by offset for "usage"
            clear_refs = _open_clear_refs() if reusable else None
            address_space = status_kib(status, "VmSize:")  # RLIMIT_AS bounds it: a reused worker keeps its room
            guard = _PREPARED_GUARD[0] if _PREPARED_GUARD and _PREPARED_GUARD[0].entries == sys.path \
                else Guard(sys.path)
            sys.addaudithook(guard)
            guarded = True
        assert worker is not None
        write_message(proto_out, (READY, dict(worker.methods), worker.limits))
        ending = _answer(worker, proto_in, proto_out, status)
        used = list(classes.values())
        worker = None
        if ending != "reset":
            return
        if pristine is None or clear_refs is None:
            write_message(proto_out, ("reset", False, "this worker is not reusable"))
            return
        try:
            pristine.restore(used)
            grown = (status_kib(status, "VmSize:") or 0) - (address_space or 0)
            if address_space is None or grown > max(_ADDRESS_SPACE_SLACK_KIB, memory_limit // 1024 // 20):
                raise Unrestorable(f"its address space grew by {grown} KiB (a fresh worker has the whole bound)")
            os.write(clear_refs, b"5")  # the peak resident memory starts over (VmHWM), as in a fresh worker
        except Exception as exc:  # noqa: BLE001 - Unrestorable, or a restore that failed: this worker ends
            write_message(proto_out, ("reset", False, f"{type(exc).__name__}: {exc}"[:300]))
            return
        write_message(proto_out, ("reset", True))


def _answer(worker: Worker, proto_in: int, proto_out: int, status: int | None) -> str:
    """Answer one environment's requests, each reply written as soon as it is made (a call's time bound in the
    parent counts from the reply before); returns ``"exit"`` or ``"reset"`` (end of input counts as exit)."""
    while True:
        message = read_message(proto_in)
        if message is None or message[0] in ("exit", "reset"):
            return "exit" if message is None else str(message[0])
        out_of_memory = False
        try:
            write_message(proto_out, _handle(worker, message, proto_in, status))
        except MemoryError:
            out_of_memory = True  # answered below, once the traceback (and the half-built data) is gone
        except RecursionError as exc:  # a state too deep to pickle
            write_message(proto_out, (ERROR, "RecursionError", describe_exception(exc), None, "serve"))
        if out_of_memory:
            try:
                write_message(proto_out, (MEMORY, "the call needed more memory than the bound"))
            finally:
                os._exit(3)


def _handle(worker: Worker, message: Any, proto_in: int, status: int | None) -> Any:
    """The reply to one request (``call``, ``replay``, ``state``, ``usage``, ``script``)."""
    kind = message[0]
    if kind == "call":
        return worker.call(message[1], message[2])
    if kind == "replay":
        return ("replayed", [worker.call(name, arguments) for name, arguments in message[1]])
    if kind == "state":
        return _state_reply(worker)
    if kind == "usage":
        return ("usage", peak_kib(status))
    if kind == "script":
        return _script(worker, proto_in, int(message[1]))
    return (ERROR, "ValueError", f"unknown request {kind!r}", None, "serve")


def _state_reply(worker: Worker) -> tuple[str, Any]:
    try:
        return ("state", worker.state())
    except StateTooLarge as exc:
        return (STATE_TOO_LARGE, str(exc))


def _script(worker: Worker, proto_in: int, count: int) -> tuple[Any, ...]:
    """``("script", N)``: the next N requests (``call`` and ``state``) run in order, as each would alone (a call
    under its own alarm), and are answered together: ``("script", replies, seconds)``, each request's reply and how
    long it took. The parent checks the times against its bounds (and runs the requests one by one instead where
    one was past them)."""
    replies: list[Any] = []
    seconds: list[float] = []
    for _ in range(count):
        item = read_message(proto_in)
        started = time.monotonic()
        if isinstance(item, tuple) and item[:1] == ("call",):
            reply: Any = worker.call(item[1], item[2])
        elif isinstance(item, tuple) and item[:1] == ("state",):
            reply = _state_reply(worker)
        else:
            reply = (ERROR, "ValueError", f"a script holds {type(item).__name__} {str(item)[:80]!r}", None, "serve")
        seconds.append(time.monotonic() - started)
        replies.append(reply)
    return ("script", replies, seconds)


def _open_clear_refs() -> int | None:
    """A descriptor on ``/proc/self/clear_refs`` (Linux), where writing ``5`` resets the peak resident memory; None
    where there is none (then the worker is not reused: its peak could not start over)."""
    try:
        return os.open("/proc/self/clear_refs", os.O_WRONLY)
    except OSError:
        return None


# --------------------------------------------------------------------------- reuse: the pristine state put back

_ATOMS = frozenset({str, bytes, int, float, complex, bool, type(None), range, type(Ellipsis), type(NotImplemented)})
_BY_IDENTITY = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.ModuleType, type,
                property, classmethod, staticmethod, types.MethodDescriptorType, types.WrapperDescriptorType,
                types.GetSetDescriptorType, types.MemberDescriptorType)
_CLASS_KEYS_SKIPPED = frozenset({"__dict__", "__weakref__", "_abc_impl"})
"""Class attributes not compared: the instance-dict and weak-reference slots (fixed by the class), and ``abc``'s
cache of subclass checks (it changes on ``isinstance`` and holds no state a method can see)."""
REUSE_PREFIXES = ("bfcl_eval",)
"""The modules whose state a reused worker snapshots and puts back: bfcl-eval's (the API classes and what they
import from their package)."""


class Unrestorable(Exception):
    """The worker cannot show that it put its state back; it ends instead of serving another environment."""


def _immutable(value: Any, depth: int = 0) -> bool:
    kind = type(value)
    if kind in _ATOMS:
        return True
    if kind in (tuple, frozenset) and depth < 16:
        return all(_immutable(item, depth + 1) for item in value)
    return False


def _string_list(value: Any) -> bool:
    """A list whose items are all exactly ``str`` (so ``==`` with another such list is exact)."""
    return type(value) is list and all(type(item) is str for item in value)


def _put_back(current: Any, fresh: Any) -> None:
    """``current`` (the original object, still bound) given ``fresh``'s contents in place, so every other
    reference to it (a name imported into another module, an alias in a default) sees the restored contents."""
    kind = type(current)
    if kind is not type(fresh):
        raise Unrestorable(f"a {kind.__name__} came back as a {type(fresh).__name__}")
    if kind in (list, bytearray):
        current[:] = fresh
    elif kind in (dict, set):
        current.clear()
        current.update(fresh)
    elif hasattr(current, "__dict__") and not hasattr(kind, "__slots__"):
        vars(current).clear()
        vars(current).update(vars(fresh))
    else:
        raise Unrestorable(f"a {kind.__name__} cannot be restored in place")


class _Namespace:
    """One namespace (a module's globals, a class's attributes, a function's defaults) as it was: every binding by
    identity, and the contents of its mutable values as one pickle (so values that share objects still share them
    after a restore)."""

    def __init__(self, label: str, bindings: dict[str, Any], skipped: frozenset[str] = frozenset()) -> None:
        self.label = label
        self.skipped = skipped
        self.bindings = {key: value for key, value in bindings.items() if key not in skipped}
        self.data_keys = [key for key, value in self.bindings.items()
                          if not isinstance(value, _BY_IDENTITY) and not _immutable(value)]
        # Flat lists of strings (bfcl-eval's long-context tables) compare by value, in C, against a copy: for them
        # equality is sameness. Everything else compares as a pickle (exact types, order and sharing).
        self.text_keys = [key for key in self.data_keys if _string_list(self.bindings[key])]
        self.text_copies = [list(self.bindings[key]) for key in self.text_keys]
        self.pickled_keys = [key for key in self.data_keys if key not in set(self.text_keys)]
        try:
            self.blob = pickle.dumps([self.bindings[key] for key in self.data_keys], protocol=pickle.HIGHEST_PROTOCOL)
            self.pickled = pickle.dumps([self.bindings[key] for key in self.pickled_keys],
                                        protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - any failure to pickle means: cannot be compared or restored
            raise Unrestorable(f"{label} holds a value that cannot be copied ({type(exc).__name__})") from None

    def changed(self, bindings: dict[str, Any]) -> bool:
        present = len(bindings) - sum(1 for key in self.skipped if key in bindings)
        if present != len(self.bindings):  # a name added or removed
            return True
        if any(bindings.get(key, _MISSING) is not value for key, value in self.bindings.items()):
            return True  # a name rebound (or removed and another added)
        if not self.data_keys:
            return False
        if any(type(bindings[key]) is not list or bindings[key] != copy  # only a str equals a str (or a subclass)
               for key, copy in zip(self.text_keys, self.text_copies, strict=True)):
            return True
        if not self.pickled_keys:
            return False
        try:
            return pickle.dumps([bindings[key] for key in self.pickled_keys], protocol=pickle.HIGHEST_PROTOCOL) \
                != self.pickled
        except Exception:  # noqa: BLE001 - a value that no longer pickles has changed
            return True

    def restore(self, set_item: Any, del_item: Any, bindings: dict[str, Any]) -> None:
        for key in [key for key in bindings if key not in self.bindings and key not in self.skipped]:
            del_item(key)
        for key, value in self.bindings.items():
            if bindings.get(key, _MISSING) is not value:
                set_item(key, value)
        for key, fresh in zip(self.data_keys, pickle.loads(self.blob), strict=True):
            _put_back(self.bindings[key], fresh)


_MISSING = object()


class _Function:
    """A function's mutable parts: its defaults (by identity, and their mutable values' contents), keyword-only
    defaults, code and attributes."""

    def __init__(self, label: str, function: types.FunctionType) -> None:
        self.function = function
        self.code = function.__code__
        self.defaults = function.__defaults__
        self.kwdefaults = function.__kwdefaults__
        defaults = {str(index): value for index, value in enumerate(self.defaults or ())}
        self.parts = _Namespace(label, {**defaults, **{f"kw:{key}": value
                                                        for key, value in (self.kwdefaults or {}).items()}})
        self.attributes = _Namespace(label + ".__dict__", dict(vars(function)))

        self.plain = not self.parts.data_keys and self.kwdefaults is None and not self.attributes.bindings
        """Defaults all immutable, no keyword-only defaults, no attributes: identity checks are the whole check."""

    def _bindings(self) -> dict[str, Any]:
        defaults = {str(index): value for index, value in enumerate(self.function.__defaults__ or ())}
        return {**defaults, **{f"kw:{key}": value for key, value in (self.function.__kwdefaults__ or {}).items()}}

    def changed(self) -> bool:
        function = self.function
        if function.__code__ is not self.code or function.__defaults__ is not self.defaults \
                or function.__kwdefaults__ is not self.kwdefaults:
            return True
        if self.plain:  # the same tuple of immutable values: only attributes could have been added
            return bool(vars(function))
        return self.parts.changed(self._bindings()) or self.attributes.changed(dict(vars(function)))

    def restore(self) -> None:
        function = self.function
        function.__code__ = self.code
        function.__defaults__ = self.defaults
        function.__kwdefaults__ = self.kwdefaults
        if self.kwdefaults is not None:  # the same dict object: its entries put back in place below
            self.kwdefaults.clear()
            self.kwdefaults.update({key[3:]: value for key, value in self.parts.bindings.items()
                                    if key.startswith("kw:")})
        for key, fresh in zip(self.parts.data_keys, pickle.loads(self.parts.blob), strict=True):
            _put_back(self.parts.bindings[key], fresh)
        attributes = vars(function)
        self.attributes.restore(attributes.__setitem__, attributes.__delitem__, dict(attributes))


class _Module:
    """A module's globals, the classes it defines (their attributes) and the functions it defines (module-level
    and in those classes)."""

    def __init__(self, module: types.ModuleType) -> None:
        name = module.__name__
        self.module = module
        namespace = vars(module)
        self.globals = _Namespace(name, dict(namespace), frozenset({"__builtins__"}))
        self.classes: list[tuple[type, _Namespace]] = []
        self.functions: list[_Function] = []
        self.reaches = {_module_of(value) for value in namespace.values()} - {None, name}
        """The other watched modules whose functions, classes or module object this one's globals hold: code of
        this module can change their state, so they are checked with it."""
        for key, value in list(namespace.items()):
            if isinstance(value, types.FunctionType) and value.__module__ == name:
                self.functions.append(_Function(f"{name}.{key}", value))
            elif isinstance(value, type) and value.__module__ == name:
                attributes = dict(vars(value))
                self.classes.append((value, _Namespace(f"{name}.{key}", attributes, _CLASS_KEYS_SKIPPED)))
                for attribute, member in attributes.items():
                    for function in _functions_of(member):
                        self.functions.append(_Function(f"{name}.{key}.{attribute}", function))

    def restore_if_changed(self) -> bool:
        """Put back whatever changed; says whether anything had."""
        changed = False
        namespace = vars(self.module)
        if self.globals.changed(namespace):
            self.globals.restore(namespace.__setitem__, namespace.__delitem__, dict(namespace))
            changed = True
        for cls, attributes in self.classes:
            current = dict(vars(cls))
            if attributes.changed(current):
                attributes.restore(lambda key, value, cls=cls: setattr(cls, key, value),
                                   lambda key, cls=cls: delattr(cls, key), current)
                changed = True
        for function in self.functions:
            if function.changed():
                function.restore()
                changed = True
        return changed


def _module_of(value: Any) -> str | None:
    name = value.__name__ if isinstance(value, types.ModuleType) else \
        getattr(value, "__module__", None) if isinstance(value, (types.FunctionType, type)) else None
    return name if isinstance(name, str) and name.startswith(REUSE_PREFIXES) else None


def _functions_of(member: Any) -> list[types.FunctionType]:
    if isinstance(member, (staticmethod, classmethod)):
        member = member.__func__
    if isinstance(member, property):
        return [f for f in (member.fget, member.fset, member.fdel) if isinstance(f, types.FunctionType)]
    return [member] if isinstance(member, types.FunctionType) else []


class Pristine:
    """The state of this (forked) worker before its first environment, put back after each one so that the next
    environment starts as a fresh fork would.

    Taken when the first ``init`` has imported the classes and before any instance exists: the modules under
    ``REUSE_PREFIXES`` that the classes can reach (``watch``: globals, class attributes, functions' defaults,
    code and attributes; a later ``init``'s classes add theirs, still untouched), the global ``random`` generator,
    ``decimal``'s context, ``mpmath``'s precision, ``warnings``' filters, the signal handlers, the modules loaded,
    the threads and the working directory. ``restore`` puts back the first five and checks the rest; where
    something cannot be put back or checked (a value that cannot be copied, a module imported while a method
    ran, a thread left running, a handler or directory changed) it raises ``Unrestorable`` and the worker ends.
    """

    def __init__(self, classes: Any = None) -> None:
        self.modules: dict[str, _Module] = {}
        self.loaded: set[str] = set()
        self.everything = classes is None
        """Snapshot every watched module (else only what ``watch`` reaches from the classes an ``init`` names)."""
        self.take_new_modules()
        if classes is not None:
            self.watch(classes)
        self.random_state = random.getstate()
        self.decimal_context = decimal.getcontext().copy()
        self.warning_filters = list(warnings.filters)
        self.signals = {number: signal.getsignal(number) for number in _WATCHED_SIGNALS}
        self.cwd = os.getcwd()
        self.threads = threading.active_count()
        self.mpmath = self._mpmath()

    @staticmethod
    def _mpmath() -> tuple[int, bool] | None:
        mpmath = sys.modules.get("mpmath")
        context = getattr(mpmath, "mp", None)
        return None if context is None else (context.prec, context.pretty)

    def take_new_modules(self) -> None:
        """Snapshot the watched modules imported since the last call (by an ``init``, before any method ran)."""
        if self.loaded and len(sys.modules) == len(self.loaded):
            return  # nothing imported since (modules are only ever added here)
        if self.everything:
            for name, module in list(sys.modules.items()):
                if name not in self.modules and name.startswith(REUSE_PREFIXES) and \
                        isinstance(module, types.ModuleType):
                    self.modules[name] = _Module(module)
        self.loaded = set(sys.modules)

    def watch(self, classes: Any) -> None:
        """Snapshot, before any of their instances exists, the watched modules ``classes`` can reach (``reach``)
        that are not snapshotted yet. A module no earlier environment's classes could reach is still as it was
        imported, so taking it now is taking it pristine; the snapshot stays as small as the classes in use."""
        todo = [base.__module__ for cls in classes for base in cls.__mro__]
        seen: set[str] = set()
        while todo:
            name = todo.pop()
            module = sys.modules.get(name)
            if name in seen or not name.startswith(REUSE_PREFIXES) or not isinstance(module, types.ModuleType):
                continue
            seen.add(name)
            if name not in self.modules:
                self.modules[name] = _Module(module)
            todo.extend(self.modules[name].reaches)

    def reach(self, classes: Any) -> list[_Module]:
        """The watched modules code of ``classes`` can change: theirs (and their bases'), and every watched module
        those hold a function, class or module object of, transitively."""
        todo = [base.__module__ for cls in classes for base in cls.__mro__]
        seen: set[str] = set()
        while todo:
            name = todo.pop()
            if name in seen or name not in self.modules:
                continue
            seen.add(name)
            todo.extend(self.modules[name].reaches)
        return [self.modules[name] for name in sorted(seen)]

    def restore(self, classes: Any = None) -> int:
        """Put the state back (see the class docstring) and say how many modules had changed. ``classes``: the
        classes whose instances ran since the last restore (their ``reach``); None checks every watched module."""
        new = set(sys.modules) - self.loaded
        if new:
            raise Unrestorable(f"module {sorted(new)[0]} was imported while an environment ran")
        if threading.active_count() != self.threads:
            raise Unrestorable("a thread is still running")
        if {number: signal.getsignal(number) for number in _WATCHED_SIGNALS} != self.signals:
            raise Unrestorable("a signal handler changed")
        if os.getcwd() != self.cwd:
            raise Unrestorable("the working directory changed")
        if sys.gettrace() is not None or sys.getprofile() is not None:
            raise Unrestorable("a trace or profile function is set")
        modules = self.modules.values() if classes is None else self.reach(classes)
        changed = sum(module.restore_if_changed() for module in modules)
        if random.getstate() != self.random_state:
            random.setstate(self.random_state)
        decimal.setcontext(self.decimal_context.copy())
        if list(warnings.filters) != self.warning_filters:
            warnings.filters[:] = self.warning_filters  # type: ignore[index]  # the module's own list, in place
            mutated = getattr(warnings, "_filters_mutated", None)  # as filterwarnings does: the C cache starts over
            if mutated is not None:
                mutated()
        if self.mpmath is not None:
            context = sys.modules["mpmath"].mp
            context.prec, context.pretty = self.mpmath
        return changed


_WATCHED_SIGNALS = tuple(getattr(signal, name) for name in ("SIGALRM", "SIGXFSZ", "SIGTERM", "SIGINT", "SIGPIPE",
                                                            "SIGCHLD", "SIGHUP", "SIGUSR1", "SIGUSR2")
                         if hasattr(signal, name))


def _quiet_stdio() -> tuple[int, int]:
    """Duplicates of standard input and output for the protocol; the originals then point at ``/dev/null``."""
    proto_in, proto_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    return proto_in, proto_out


def _prepare() -> None:
    os.chdir("/")
    sys.dont_write_bytecode = True


# --------------------------------------------------------------------------- the fork server

def _receive_exact(control: socket.socket, size: int, first: bytes) -> bytes | None:
    data = first
    while len(data) < size:
        more = control.recv(size - len(data))
        if not more:
            return None
        data += more
    return data


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:  # already ended (a zombie until reaped)
        pass


def _reaped(pid: int, block: bool) -> bool:
    try:
        return os.waitpid(pid, 0 if block else os.WNOHANG)[0] != 0
    except ChildProcessError:
        return True


def _find_prctl() -> Any:
    """Linux's ``prctl`` through ``ctypes``, or None (another system, or no ``ctypes``)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except Exception:
        return None


def _die_with_parent(prctl: Any) -> None:
    """Linux: this process gets ``SIGKILL`` when the process that forked it (the fork server) ends."""
    if prctl is not None:
        try:
            prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
        except Exception:  # the worker still ends at end of input on its pipe
            pass


def _child(control: socket.socket, server: int, fds: list[int], prctl: Any) -> None:
    """The forked worker: never returns into the server's loop. The objects the server froze stay frozen (the
    garbage collector never scans them, so their pages stay shared with the server)."""
    try:
        control.close()
        _die_with_parent(prctl)
        if os.getppid() != server:  # the server ended between the fork and the line above
            os._exit(0)
        serve(fds[0], fds[1], reusable=True)
    except BaseException:  # noqa: BLE001 - a worker's failure is seen by the parent as its pipe closing
        pass
    finally:
        os._exit(0)


def fork_server(control_fd: int) -> None:
    """Import the API modules the parent names, then fork a worker per request until the parent goes away."""
    control = socket.socket(fileno=control_fd)
    setup = read_message(control_fd)
    if not isinstance(setup, dict):
        return
    sys.path[:] = list(setup["sys_path"])
    for module in list(setup["modules"]) + list(PRELOADED):
        try:
            importlib.import_module(module)
        except BaseException:  # noqa: BLE001 - a forked worker imports it again and reports the error
            pass
    prctl = _find_prctl()
    _PREPARED_GUARD.append(Guard(sys.path))
    gc.collect()
    gc.freeze()  # objects made so far are never scanned, so a fork's pages stay shared
    server = os.getpid()
    write_message(control_fd, (READY, server))
    children: set[int] = set()  # forked, not yet killed
    dying: set[int] = set()  # killed, not yet reaped
    try:
        while True:
            dying = {pid for pid in dying if not _reaped(pid, block=False)}
            if dying and not select.select([control], [], [], REAP_INTERVAL_S)[0]:
                continue
            data, fds = b"", list[int]()
            try:
                data, fds, _flags, _address = socket.recv_fds(control, REQUEST.size, 2)
                request = _receive_exact(control, REQUEST.size, data) if data else None
            except OSError:
                request = None
            if request is None:
                for fd in fds:
                    os.close(fd)
                return
            kind, number = REQUEST.unpack(request)
            if kind == END:
                if number in children:
                    children.discard(number)
                    _kill(number)
                    dying.add(number)
            elif kind == FORK and len(fds) == 2:
                try:
                    pid = os.fork()
                except OSError as exc:
                    pid = -abs(exc.errno or 1)
                if pid == 0:
                    _child(control, server, fds, prctl)
                if pid > 0:
                    children.add(pid)
                control.sendall(ANSWER.pack(pid))
            else:
                control.sendall(ANSWER.pack(-22))  # EINVAL
            for fd in fds:
                os.close(fd)
    finally:
        for pid in children:
            _kill(pid)
        for pid in children | dying:
            _reaped(pid, block=True)


def main(argv: list[str]) -> None:
    _prepare()
    if len(argv) == 2 and argv[0] == "--fork-server":
        fork_server(int(argv[1]))
        return
    proto_in, proto_out = _quiet_stdio()
    serve(proto_in, proto_out)


if __name__ == "__main__":
    main(sys.argv[1:])
