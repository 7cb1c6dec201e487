"""The process behind ``Environment``: BFCL's API instances, driven by method name over a pipe.

``Environment`` (``_env.py``) starts this file as a script, ``python -s -B
_worker.py``, with a minimal environment (no API keys, ``PYTHONHASHSEED=0`` so
that string sets iterate the same way in every start of the same episode),
and talks to it over its standard input and output: each message is an 8-byte
big-endian length and a pickle. The parent is trusted (this side unpickles
with ``pickle``); the parent unpickles the replies with an unpickler that
builds no object other than plain data, so even a subverted worker cannot
make it run code.

Until the first message arrives only the standard library is imported. That
message (``init``) brings the parent's ``sys.path``, the classes with their
modules, the initial configuration and the bounds. The worker then:

1. imports the API modules (each class's module under
   ``bfcl_eval.eval_checker.multi_turn_eval.func_source_code``);
2. bounds itself: ``RLIMIT_AS`` (address space: a call that allocates past
   it gets ``MemoryError``), ``RLIMIT_FSIZE`` 0 (no file can be written),
   ``RLIMIT_NPROC`` 0 (no process can be started, where the kernel enforces
   it for this user), ``RLIMIT_CORE`` 0; its working directory becomes ``/``
   and its standard input and output point at ``/dev/null`` (the protocol
   uses duplicates of them), so nothing a method prints reaches the pipe;
3. creates the instances as bfcl-eval's ``execute_multi_turn_func_call``
   does: ``cls()``, then, unless the class is stateless (``MathAPI``),
   ``instance._load_scenario(copy.deepcopy(initial_config.get(name, {})),
   long_context=long_context)``;
4. maps every documented method name to its class (the names come from the
   function docs; each must be a public bound method of the instance, as
   bfcl-eval's executor lists them with ``inspect.getmembers``; a later
   class wins a name two classes share, as in bfcl-eval).

Then it serves requests: ``call`` (one method, keyword arguments already
validated by the parent), ``replay`` (several calls, after a restart),
``state`` (every instance's public attributes as plain data), ``usage``
(peak memory) and ``exit``. Every call runs under ``setitimer``: if the
parent has not killed the worker at the time bound, ``SIGALRM``, left at its
default action, ends it a moment later, even inside a C loop such as a
huge integer power and even when the parent itself is gone.

A call's result becomes the text bfcl-eval's executor gives the model: a
``str`` as it is; a ``dict`` (exactly) as ``json.dumps(result)``, or
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

import copy
import importlib
import importlib.machinery
import inspect
import json
import os
import pickle
import signal
import struct
import sys
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

ALARM_GRACE_S = 0.5
"""How long after the time bound the worker ends itself if the parent has not killed it."""

_ERROR_PREFIX = "Error during execution: "
_PLAIN_DEPTH = 400
"""Deepest state nesting turned into plain data (a simulated directory tree nested deeper is cut, marked)."""


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


def write_message(fd: int, message: Any) -> None:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    data = memoryview(HEADER.pack(len(payload)) + payload)
    while data:
        written = os.write(fd, data)
        data = data[written:]


def read_message(fd: int) -> Any:
    header = read_exact(fd, HEADER.size)
    if header is None:
        return None
    payload = read_exact(fd, HEADER.unpack(header)[0])
    return None if payload is None else pickle.loads(payload)


# --------------------------------------------------------------------------- results as text

def as_text(result: Any) -> str:
    """The text bfcl-eval's ``execute_multi_turn_func_call`` makes of a method's return value (``type(...) ==``,
    not ``isinstance``, as there: a dict subclass is ``str``-ed)."""
    if type(result) == str:  # noqa: E721 -- exact type, as bfcl-eval tests it
        return result
    if type(result) == dict:  # noqa: E721
        try:
            return json.dumps(result)
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

def plain(value: Any, depth: int = 0) -> Any:
    """``value`` as data that pickles to builtins only and compares as bfcl-eval's state checker compares it.

    GorillaFileSystem's ``Directory`` and ``File`` compare by name and contents
    (a directory's parent is not compared), so they become
    ``{"type": "directory", "name": ..., "contents": {...}}`` and
    ``{"type": "file", "name": ..., "content": ...}``. Containers keep their
    type (a tuple never equals a list in bfcl-eval's comparison either).
    """
    if value is None or type(value) in (bool, int, float, str):
        return value
    for scalar in (bool, int, float, str):  # a subclass (an IntEnum, a str subclass) as its builtin value
        if isinstance(value, scalar):
            return scalar(value)
    if depth > _PLAIN_DEPTH:
        return {"type": "cut", "reason": f"nested deeper than {_PLAIN_DEPTH} levels"}
    kind = type(value)
    if kind.__name__ == "Directory" and hasattr(value, "contents"):
        return {"type": "directory", "name": plain(value.name, depth + 1),
                "contents": {plain(k, depth + 1): plain(v, depth + 1) for k, v in value.contents.items()}}
    if kind.__name__ == "File" and hasattr(value, "content"):
        return {"type": "file", "name": plain(value.name, depth + 1), "content": plain(value.content, depth + 1)}
    if isinstance(value, dict):
        return {plain(k, depth + 1): plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v, depth + 1) for v in value]
    if isinstance(value, tuple):
        return tuple(plain(v, depth + 1) for v in value)
    if isinstance(value, (set, frozenset)):
        return {plain(v, depth + 1) for v in value}
    return {"type": "object", "class": f"{kind.__module__}.{kind.__qualname__}", "repr": repr(value)[:1000]}


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
        self.limits = limits
        self.instances: dict[str, Any] = {}
        self.methods: dict[str, str] = {}
        for name, cls in classes.items():
            instance = cls()
            if name not in init["stateless"]:
                instance._load_scenario(copy.deepcopy(init["initial_config"].get(name, {})),
                                        long_context=init["long_context"])
            self.instances[name] = instance
            public = {member for member, _ in inspect.getmembers(instance, predicate=inspect.ismethod)
                      if not member.startswith("_")}
            for method in init["doc_names"].get(name, ()):
                if method in public:
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
                text, ok = as_text(method(**arguments)), True
            except MemoryError:
                raise
            except Exception as exc:
                text, ok = _ERROR_PREFIX + describe_exception(exc), False
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        return (OK, ok, cap(text, self.max_output_chars))

    def state(self) -> dict[str, dict[str, Any]]:
        return {name: {key: plain(value) for key, value in vars(instance).items() if not key.startswith("_")}
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
        folders = [entry for entry in entries if os.path.isdir(entry)]
        self.folders = tuple(os.path.join(os.path.abspath(folder), "") for folder in folders)
        self.archives = frozenset(os.path.abspath(entry) for entry in entries if os.path.isfile(entry))
        self.suffixes = tuple(importlib.machinery.all_suffixes()) + (".pyc",)

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
    if status is not None:
        try:
            os.lseek(status, 0, os.SEEK_SET)
            text = os.read(status, 1 << 16).decode("ascii", "replace")
        except OSError:
            text = ""
        for line in text.splitlines():
            fields = line.split()
            if len(fields) >= 2 and fields[0] == "VmHWM:" and fields[1].isdigit():
                return int(fields[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss if resource else 0


def serve() -> None:
    proto_in, proto_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    os.chdir("/")
    sys.dont_write_bytecode = True
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 5 * _PLAIN_DEPTH))
    init = read_message(proto_in)
    if not isinstance(init, dict):
        return
    sys.path[:] = list(init["sys_path"])
    phase = "import"
    try:
        classes = Worker.import_classes(init)
        limits = bound_self(init["memory_limit_bytes"])
        phase = "load"
        worker = Worker(init, classes, limits)
    except MemoryError:
        write_message(proto_out, (MEMORY, "the initial state does not fit in the memory bound"))
        return
    except BaseException as exc:  # an import or scenario error: reported, then the worker ends
        write_message(proto_out, (ERROR, type(exc).__name__, describe_exception(exc),
                                  getattr(exc, "name", None) if phase == "import" else None, phase))
        return
    status = _open_status()  # before the guard, which refuses opens: read again by offset for every "usage"
    sys.addaudithook(Guard(sys.path))
    write_message(proto_out, (READY, dict(worker.methods), worker.limits))
    while True:
        message = read_message(proto_in)
        if message is None or message[0] == "exit":
            return
        kind = message[0]
        try:
            if kind == "call":
                reply: Any = worker.call(message[1], message[2])
            elif kind == "replay":
                reply = ("replayed", [worker.call(name, arguments) for name, arguments in message[1]])
            elif kind == "state":
                reply = ("state", worker.state())
            elif kind == "usage":
                reply = ("usage", peak_kib(status))
            else:
                reply = (ERROR, "ValueError", f"unknown request {kind!r}", None, "serve")
            write_message(proto_out, reply)
        except MemoryError:
            try:
                write_message(proto_out, (MEMORY, "the call needed more memory than the bound"))
            finally:
                os._exit(3)
        except RecursionError as exc:  # a state too deep to pickle
            write_message(proto_out, (ERROR, "RecursionError", describe_exception(exc), None, "serve"))


if __name__ == "__main__":
    serve()
