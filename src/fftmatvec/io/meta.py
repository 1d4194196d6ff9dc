"""The ``meta_adj`` file of a matrix directory, and the atomic-write helper.

A matrix is a directory ``DIR/binary/`` holding ``meta_adj`` (plain text, one
value a line) and one HDF5 file per block row (see :mod:`fftmatvec.io.hdf5`)::

    Nd                  block rows (sensors, or QoIs for a p2q map)
    Nm                  block columns (parameters)
    Nt                  time steps
    prefix              block-row file prefix, may hold a sub-folder ("adj/vec_")
    extension           ".h5"
    reindexed           must be 1 (SOTI ordering)
    is_p2q              0 parameter-to-observable, 1 parameter-to-QoI
    reverse_dof         must be 1
    checksum            optional; 0 = none, nonzero = block files carry checksums

:func:`atomic_path` lives here, the lowest layer of the package's I/O, so that
every writer (this module's and :mod:`fftmatvec.io.hdf5`'s) shares it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from fftmatvec.errors import ConfigError, FileFormatError

META_NAME = "meta_adj"
EXTENSIONS = (".h5", ".hdf5")
_FIELDS = ("Nd", "Nm", "Nt", "prefix", "extension", "reindexed", "is_p2q",
           "reverse_dof", "checksum")


@dataclass(frozen=True)
class MatrixMeta:
    """Contents of ``meta_adj``; ``reindexed`` and ``reverse_dof`` are always 1.

    Attributes
    ----------
    Nd, Nm, Nt : int
        Block rows, block columns and time steps, all positive; the matrix is
        ``f[i, j, t]`` of shape ``(Nd, Nm, Nt)``.
    prefix : str
        Relative path prefix of the block-row files, e.g. ``"adj/vec_"``.
    extension : str
        File extension, one of :data:`EXTENSIONS`.
    is_p2q : bool
        True for a parameter-to-QoI map (rows are QoIs, not sensors).
    checksum : int
        0: no checksums; nonzero: every block-row file carries a ``checksum``
        attribute (see :func:`fftmatvec.io.hdf5.data_checksum`).

    Raises
    ------
    ConfigError
        On a non-positive size, an unsafe prefix, an unknown extension or a
        negative checksum flag.
    """

    Nd: int
    Nm: int
    Nt: int
    prefix: str = "vec_"
    extension: str = ".h5"
    is_p2q: bool = False
    checksum: int = 0

    def __post_init__(self) -> None:
        for name in ("Nd", "Nm", "Nt"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)} must be positive")
        parts = Path(self.prefix).parts
        if (not self.prefix or "\n" in self.prefix or Path(self.prefix).is_absolute()
                or ".." in parts):
            raise ConfigError(f"prefix {self.prefix!r} must be a non-empty path "
                              "relative to the binary folder")
        if self.extension not in EXTENSIONS:
            raise ConfigError(f"extension {self.extension!r} is not one of {EXTENSIONS}")
        if self.checksum < 0:
            raise ConfigError(f"checksum={self.checksum} must be 0 or positive")


def binary_dir(matrix_dir: str | os.PathLike) -> Path:
    """Return the ``binary`` folder of a matrix given as ``DIR`` or ``DIR/binary``.

    A path named ``binary`` is taken as the folder itself unless it contains
    ``binary/meta_adj`` in turn.
    """
    path = Path(matrix_dir)
    if path.name == "binary" and not (path / "binary" / META_NAME).is_file():
        return path
    return path / "binary"


def block_path(matrix_dir: str | os.PathLike, meta: MatrixMeta, i: int) -> Path:
    """Return the file of block row ``i``: ``binary/<prefix><i:06d><extension>``."""
    if not 0 <= i < meta.Nd:
        raise ConfigError(f"block row {i} does not exist (Nd={meta.Nd})")
    return binary_dir(matrix_dir) / f"{meta.prefix}{i:06d}{meta.extension}"


def read_meta(matrix_dir: str | os.PathLike) -> MatrixMeta:
    """Parse and check ``meta_adj`` of a matrix given as ``DIR`` or ``DIR/binary``.

    Accepts 8 lines (no checksum) or 9; trailing blank lines are ignored.

    Raises
    ------
    FileFormatError
        Missing file, wrong line count, a non-integer where an integer is due,
        ``reindexed`` or ``reverse_dof`` not 1, ``is_p2q`` not 0/1, or any
        :class:`MatrixMeta` check; the message names the file and the line.
    """
    path = binary_dir(matrix_dir) / META_NAME
    try:
        lines = path.read_text().rstrip().splitlines()
    except OSError as exc:
        raise FileFormatError(f"{path}: cannot read matrix metadata ({exc.strerror})") from exc
    lines = [line.strip() for line in lines]
    if len(lines) not in (8, 9):
        raise FileFormatError(f"{path}: {len(lines)} lines, expected 8 or 9 "
                              f"({', '.join(_FIELDS)})")
    values = dict(zip(_FIELDS, lines))
    values.setdefault("checksum", "0")
    for lineno, name in enumerate(_FIELDS, start=1):
        if name in ("prefix", "extension"):
            continue
        try:
            values[name] = int(values[name])
        except ValueError:
            raise FileFormatError(f"{path}: line {lineno} ({name}) is "
                                  f"{values[name]!r}, not an integer") from None
    for name, allowed in (("reindexed", (1,)), ("is_p2q", (0, 1)), ("reverse_dof", (1,))):
        if values[name] not in allowed:
            raise FileFormatError(f"{path}: {name}={values[name]}, expected "
                                  f"{' or '.join(map(str, allowed))}")
    del values["reindexed"], values["reverse_dof"]
    values["is_p2q"] = bool(values["is_p2q"])
    try:
        return MatrixMeta(**values)
    except ConfigError as exc:
        raise FileFormatError(f"{path}: {exc}") from None


def write_meta(matrix_dir: str | os.PathLike, meta: MatrixMeta) -> None:
    """Write ``meta_adj`` (9 lines, the checksum line always) atomically."""
    text = "\n".join(map(str, (meta.Nd, meta.Nm, meta.Nt, meta.prefix, meta.extension,
                               1, int(meta.is_p2q), 1, meta.checksum))) + "\n"
    with atomic_path(binary_dir(matrix_dir) / META_NAME) as tmp:
        tmp.write_text(text)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success move it onto ``path``.

    The caller writes and closes the temporary file inside the ``with`` block.
    On normal exit it replaces ``path`` in one ``os.replace``; on an exception
    it is deleted and ``path`` is left as it was.  Missing parent folders are
    created.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
