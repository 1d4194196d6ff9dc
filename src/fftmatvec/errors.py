"""Exception classes shared by the library and the command line.

``FftmatvecError`` is the base of every error the package raises on purpose;
the CLI prints its message as one line and exits 1.  ``ConfigError`` marks a
usage or configuration mistake (exit 2).

:func:`collective` makes a check that may fail on some ranks only (a file,
an attribute, an allocation, a NaN) fail on every rank the same way.
"""

from __future__ import annotations

import contextlib
import importlib
from typing import Any, Iterator


class FftmatvecError(Exception):
    """An expected failure with a message meant for the user."""


class ConfigError(FftmatvecError, ValueError):
    """A bad argument, option, precision code or configuration key."""


class FileFormatError(FftmatvecError):
    """A matrix or vector file that is missing, corrupt or inconsistent.

    The message names the file and the mismatch.
    """


# ------------------------------------------------------------ collective votes


class Vote:
    """What a :func:`collective` block shares with the other ranks.

    Inside the block call :meth:`share` with a small picklable value (sizes,
    flags); after the block, :attr:`values` lists every rank's value in rank
    order (``None`` where a rank shared nothing).
    """

    def __init__(self) -> None:
        self._value: Any = None
        self.values: list[Any] = []

    def share(self, value: Any) -> None:
        self._value = value

    def agreed(self, what: str) -> Any:
        """The one value all sharing ranks gave (ranks that shared None are
        skipped), None when nobody shared.  When they differ, every rank
        raises the same :class:`ConfigError` (every rank sees the same list)."""
        given = [v for v in self.values if v is not None]
        if any(v != given[0] for v in given[1:]):
            ranks = ", ".join(f"rank {r}: {v!r}" for r, v in enumerate(self.values) if v is not None)
            raise ConfigError(f"ranks disagree on {what} ({ranks})")
        return given[0] if given else None


@contextlib.contextmanager
def collective(comm: Any, what: str) -> Iterator[Vote]:
    """Run a block on every rank of ``comm`` and make its failures collective.

    Every rank runs the block (local work only: no communication inside),
    then all ranks allgather their error texts.  If any rank failed, every
    rank raises the same exception, built from the lowest failing rank::

        FftmatvecError(f"{what} failed on rank {r}: {msg}")

    of the original class when that is a :class:`FftmatvecError` subclass
    (:class:`FileFormatError`, :class:`ConfigError`, ...), else of
    :class:`FftmatvecError` with the original class name at the start of
    ``msg``.  When several ranks failed the message ends with
    ``(also failed on ranks ...)``.  The failing rank chains the original
    exception as ``__cause__``.  The raised error carries ``rank`` (the
    reported rank) and ``ranks`` (all failing ranks) and is marked as agreed
    on ``comm`` (:func:`agreed`), so an enclosing block over the same
    communicator re-raises it unchanged, without a second vote.

    ``comm`` None (one process, no MPI) runs the block plainly: exceptions
    pass through unchanged.  The block may :meth:`Vote.share` a small value;
    the context yields the :class:`Vote`, whose ``values`` are filled after
    the block.  Only ``Exception`` is caught (``KeyboardInterrupt`` passes).

    Cost: one ``allgather`` of a small tuple per block.
    """
    vote = Vote()
    if comm is None:
        yield vote
        vote.values = [vote._value]
        return
    report = None
    original: BaseException | None = None
    try:
        yield vote
    except Exception as exc:
        if agreed(exc, comm):
            raise  # already the same on every rank of comm
        original = exc
        report = (describe(exc), _class_path(exc))
    results = comm.allgather((report, vote._value))
    vote.values = [value for _, value in results]
    failed = [(r, rep) for r, (rep, _) in enumerate(results) if rep is not None]
    if not failed:
        return
    rank, (msg, path) = failed[0]
    text = f"{what} failed on rank {rank}: {msg}"
    if len(failed) > 1:
        others = ", ".join(str(r) for r, _ in failed[1:])
        text += f" (also failed on rank{'s' if len(failed) > 2 else ''} {others})"
    cls = _resolve(path)
    try:
        err = cls(text)
    except Exception:  # a subclass with another constructor signature
        err = FftmatvecError(text)
    err.rank = rank
    err.ranks = [r for r, _ in failed]
    _mark_agreed(err, comm)
    raise err from original


def describe(exc: BaseException) -> str:
    """One-line text of ``exc``: the message of a FftmatvecError, else
    ``"ClassName: message"`` (just the class name when the message is empty)."""
    text = " ".join(str(exc).split())
    if isinstance(exc, FftmatvecError) and text:
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def agreed(exc: BaseException, comm: Any = None) -> bool:
    """Whether ``exc`` was raised by :func:`collective` on every rank of
    ``comm``: agreed on ``comm`` itself or on a communicator spanning all of
    ``MPI.COMM_WORLD``.  With ``comm`` None: on all of ``COMM_WORLD``."""
    on = getattr(exc, "_fftmatvec_agreed_on", None)
    if on is None:
        return False
    if getattr(exc, "_fftmatvec_agreed_all", False):
        return True
    if comm is None:
        return False
    if on is comm:
        return True
    try:
        return bool(on == comm)
    except Exception:
        return False


def _mark_agreed(err: BaseException, comm: Any) -> None:
    err._fftmatvec_agreed_on = comm
    try:
        from mpi4py import MPI

        err._fftmatvec_agreed_all = comm.Get_size() == MPI.COMM_WORLD.Get_size()
    except Exception:  # a stand-in communicator, or no MPI
        err._fftmatvec_agreed_all = False


def _class_path(exc: BaseException) -> tuple[str, str] | None:
    """``(module, qualname)`` of a FftmatvecError subclass, sent instead of
    the class so that the allgather never has to pickle a class."""
    cls = type(exc)
    return (cls.__module__, cls.__qualname__) if isinstance(exc, FftmatvecError) else None


def _resolve(path: tuple[str, str] | None) -> type:
    """The FftmatvecError subclass named by ``path``; FftmatvecError when unknown."""
    if path is None:
        return FftmatvecError
    try:
        obj: Any = importlib.import_module(path[0])
        for part in path[1].split("."):
            obj = getattr(obj, part)
    except Exception:
        return FftmatvecError
    return obj if isinstance(obj, type) and issubclass(obj, FftmatvecError) else FftmatvecError
