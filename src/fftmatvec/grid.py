"""Process grids: which blocks a rank owns and how blocks move between ranks.

A grid is ``pr x pc`` ranks; rank ``(r, c)`` owns block rows ``I_r`` (the
``Nd`` sensors split over ``pr``) and block columns ``J_c`` (the ``Nm``
parameters split over ``pc``), both by :func:`fftmatvec.layout.block_range`
(remainder to the lowest indices; with ``Nd < pr`` or ``Nm < pc`` some ranks
own no blocks and still take part in every collective).  Parameter vectors
live on grid row 0 (block ``J_c`` on rank ``(0, c)``) and data vectors on
grid column 0 (block ``I_r`` on rank ``(r, 0)``); design.md section 4,
docs/grid.md.

:class:`SerialGrid` is the one-process grid: every movement is the identity.
:class:`ProcessGrid` is the MPI grid.  Both offer the same hooks, which is
all :class:`~fftmatvec.operator.BTTOperator` uses:

``row_block(Nd)``, ``col_block(Nm)``
    my ``(start, count)`` of ``I_r`` / ``J_c``;
``col_bcast(x)``, ``row_bcast(x)``
    broadcast in place from grid row 0 down my column / from grid column 0
    along my row (every rank passes a buffer of the right shape and dtype);
``row_reduce(y, all=False)``, ``col_reduce(y, all=False)``
    sum in place along my row to column 0 / down my column to row 0; return
    the sum there (on every rank with ``all=True``) and None elsewhere;
``row_ireduce(y, after=None)``
    start ``row_reduce(y)``; a :class:`~fftmatvec.collectives.Request`
    whose ``wait()`` returns what ``row_reduce`` returns;
``holds_param()``, ``holds_data()``
    ``r == 0`` / ``c == 0``.

On GPUs (``device=`` when the grid is made, or :meth:`ProcessGrid.use_device`
when an operator on a GPU backend gets the grid) each rank takes the GPU of
its node-local rank and ``row``/``col``/``all`` become NCCL collectives where
NCCL can run (``FFTMATVEC_COLLECTIVES=mpi|nccl|auto``, default auto).

mpi4py is imported only when a :class:`ProcessGrid` is made, so the package
imports without it.
"""

from __future__ import annotations

import math
import re
from typing import Any

from .collectives import Collectives, LocalCollectives, MPICollectives, Request
from .errors import ConfigError
from .layout import block_range

Array = Any

SPACES = ("param", "data")


class _GridBase:
    """What both grids share: ownership from ``(pr, pc, r, c)`` and the hooks'
    bookkeeping.  Subclasses set ``pr, pc, r, c, comm, row, col, all``."""

    pr: int
    pc: int
    r: int
    c: int
    comm: Any
    row: Collectives
    col: Collectives
    all: Collectives

    # -- ownership ----------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        """``(pr, pc)``."""
        return (self.pr, self.pc)

    @property
    def size(self) -> int:
        return self.pr * self.pc

    @property
    def rank(self) -> int:
        """My rank in :attr:`comm` (row-major: ``r * pc + c``)."""
        return self.r * self.pc + self.c

    @property
    def coords(self) -> tuple[int, int]:
        return (self.r, self.c)

    def row_block(self, Nd: int) -> tuple[int, int]:
        """``(start, count)`` of my block rows ``I_r``."""
        return block_range(Nd, self.pr, self.r)

    def col_block(self, Nm: int) -> tuple[int, int]:
        """``(start, count)`` of my block columns ``J_c``."""
        return block_range(Nm, self.pc, self.c)

    def holds_param(self) -> bool:
        """Whether this rank holds its block of parameter-space vectors (``r == 0``)."""
        return self.r == 0

    def holds_data(self) -> bool:
        """Whether this rank holds its block of data-space vectors (``c == 0``)."""
        return self.c == 0

    def holds(self, space: str) -> bool:
        """:meth:`holds_param` or :meth:`holds_data` for ``space`` ("param"/"data")."""
        return self.holds_param() if _space(space) == "param" else self.holds_data()

    def block(self, space: str, n: int) -> tuple[int, int]:
        """``(start, count)`` of my block of an ``n``-block vector of ``space``
        (:meth:`col_block` for "param", :meth:`row_block` for "data"), also on
        ranks that do not hold the vector."""
        return self.col_block(n) if _space(space) == "param" else self.row_block(n)

    def holder_blocks(self, space: str, n: int) -> list[tuple[int, int, int]]:
        """``(rank, start, count)`` of every rank holding a block of a vector
        of ``space``, in rank order (grid row 0 or grid column 0)."""
        if _space(space) == "param":
            return [(c, *block_range(n, self.pc, c)) for c in range(self.pc)]
        return [(r * self.pc, *block_range(n, self.pr, r)) for r in range(self.pr)]

    def layout(self, Nd: int, Nm: int) -> dict[str, Any]:
        """A JSON-ready summary: shape, block counts per grid row and column,
        the largest slab and the communication volume model (docs/grid.md)."""
        rows = [block_range(Nd, self.pr, r)[1] for r in range(self.pr)]
        cols = [block_range(Nm, self.pc, c)[1] for c in range(self.pc)]
        return {
            "shape": [self.pr, self.pc],
            "rows_per_grid_row": rows,
            "cols_per_grid_col": cols,
            "max_slab_blocks": max(rows) * max(cols),
            "idle_ranks": sum(1 for nd in rows for nm in cols if nd * nm == 0),
            "comm_blocks_per_rank": comm_volume(self.pr, self.pc, Nd, Nm),
        }

    # -- communication statistics -------------------------------------------
    @property
    def comm_seconds(self) -> float:
        """Seconds this rank spent in grid collectives (row, column and
        whole-grid: broadcasts, reductions, dot products, scatter/gather)
        since the last :meth:`reset_comm_stats`; error votes not included."""
        return self.row.seconds + self.col.seconds + self.all.seconds

    def comm_stats(self) -> dict[str, dict[str, dict[str, float]]]:
        """``{"row": ..., "col": ..., "all": ...}``: per operation ``calls``,
        ``bytes`` (local buffer) and ``seconds``."""
        return {"row": self.row.stats, "col": self.col.stats, "all": self.all.stats}

    def reset_comm_stats(self) -> None:
        for coll in (self.row, self.col, self.all):
            coll.reset_stats()

    # -- devices ---------------------------------------------------------------
    #: Transport of the collectives: "local" (one process), "mpi" or "nccl".
    collectives: str = "local"
    #: Why that transport (e.g. why not NCCL).
    collectives_note: str = ""
    #: The GPU this rank uses, once a GPU was chosen (None before / on the CPU).
    device_id: "int | None" = None

    def use_device(self, device: Any) -> str:
        """Fit the collectives to arrays on ``device`` (a Backend or "cpu",
        "gpu", "auto"); return :attr:`collectives`.  Nothing to do for one
        process."""
        return self.collectives

    def row_ireduce(self, y: Array, after: Any = None) -> Request:
        """Start :meth:`row_reduce` of ``y`` (in place along my grid row, to
        grid column 0); ``wait()`` on the result returns the sum there, None
        elsewhere.  ``after``: the backend's mark of the work producing ``y``."""
        return Request(result=y)

    # -- context ---------------------------------------------------------------
    def free(self) -> None:
        """Release communicators the grid created (idempotent)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.free()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.pr}x{self.pc}, rank {self.rank} at (r={self.r}, c={self.c}))"


class SerialGrid(_GridBase):
    """The ``1 x 1`` grid of a single process; ``comm`` is None and every
    movement is the identity."""

    pr = pc = 1
    r = c = 0
    comm = None
    node_rank = 0
    node_size = 1

    def __init__(self) -> None:
        self.row = LocalCollectives()
        self.col = LocalCollectives()
        self.all = LocalCollectives()

    def col_bcast(self, x: Array) -> Array:
        """Broadcast ``x`` from grid row 0 down my grid column."""
        return x

    def row_bcast(self, x: Array) -> Array:
        """Broadcast ``x`` from grid column 0 along my grid row."""
        return x

    def row_reduce(self, y: Array, all: bool = False) -> Array:
        """Sum ``y`` along my grid row, to grid column 0 (everywhere if ``all``)."""
        return y

    def col_reduce(self, y: Array, all: bool = False) -> Array:
        """Sum ``y`` down my grid column, to grid row 0 (everywhere if ``all``)."""
        return y

    def barrier(self) -> None:
        pass

    def device_index(self, n_devices: int) -> int:
        return 0


class ProcessGrid(_GridBase):
    """A ``pr x pc`` grid of MPI ranks.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm, optional
        The ranks of the grid; None means ``MPI.COMM_WORLD`` (looked up now,
        not at import).  Not freed by the grid.
    shape : None, (pr, pc), "PRxPC" or "auto"
        None: ``1 x size`` (the default layout); "auto": chosen by
        :meth:`auto_shape` from ``Nd`` and ``Nm``.
    pr, pc : int, optional
        Alternative to ``shape``.
    Nd, Nm : int, optional
        Problem sizes, used only by ``shape="auto"``.
    cuda_aware : bool, optional
        See :class:`~fftmatvec.collectives.MPICollectives`.
    device : {"cpu", "gpu", "auto"} or Backend, optional
        Where the arrays live; with a GPU, :meth:`use_device` now (GPU from
        the node-local rank, NCCL collectives where they can run).

    Raises
    ------
    ConfigError
        Unparsable shape, a non-positive extent or ``pr * pc`` not the size
        of ``comm``.  The check needs no communication, so every rank raises
        it.

    Attributes
    ----------
    comm : mpi4py.MPI.Cartcomm
        The grid communicator (rank ``r * pc + c``), owned by the grid.
    row, col : MPICollectives or NCCLCollectives
        Over my grid row (ranks sharing ``r``, size ``pc``, rank ``c``) and
        my grid column (ranks sharing ``c``, size ``pr``, rank ``r``).
    all : MPICollectives or NCCLCollectives
        Over the whole grid (dot products, scatter and gather of vectors).
    collectives : str
        "mpi" or "nccl" (:attr:`collectives_note` says why).
    r, c : int
        My coordinates.
    node_rank, node_size : int
        My rank among the ranks of my node (shared-memory domain), for
        picking a GPU (:meth:`device_index`).
    """

    def __init__(
        self,
        comm: Any = None,
        shape: "None | str | tuple[int, int]" = None,
        *,
        pr: int | None = None,
        pc: int | None = None,
        Nd: int | None = None,
        Nm: int | None = None,
        cuda_aware: bool | None = None,
        device: Any = None,
    ) -> None:
        MPI = _import_mpi()
        self._freed = True
        if comm is None:
            comm = MPI.COMM_WORLD
        size = comm.Get_size()
        if pr is not None or pc is not None:
            if shape is not None:
                raise ConfigError("give the grid as shape= or as pr=/pc=, not both")
            if pr is None or pc is None:
                raise ConfigError(f"give both pr and pc (got pr={pr}, pc={pc})")
            shape = (pr, pc)
        self.pr, self.pc = parse_shape(shape, size, Nd, Nm)
        self.comm = comm.Create_cart([self.pr, self.pc], periods=[False, False], reorder=False)
        self.r, self.c = self.comm.Get_coords(self.comm.Get_rank())
        self._row_comm = self.comm.Sub([False, True])
        self._col_comm = self.comm.Sub([True, False])
        node = self.comm.Split_type(MPI.COMM_TYPE_SHARED, key=self.comm.Get_rank())
        self.node_rank, self.node_size = node.Get_rank(), node.Get_size()
        node.Free()
        self._freed = False
        self.row = MPICollectives(self._row_comm, cuda_aware)
        self.col = MPICollectives(self._col_comm, cuda_aware)
        self.all = MPICollectives(self.comm, cuda_aware)
        self._cuda_aware = cuda_aware
        self.collectives, self.collectives_note, self.device_id = "mpi", "", None
        if device is not None:
            try:
                self.use_device(device)
            except BaseException:
                self.free()
                raise

    # -- construction helpers --------------------------------------------------
    @staticmethod
    def auto_shape(size: int, Nd: int | None = None, Nm: int | None = None) -> tuple[int, int]:
        """The ``(pr, pc)`` that ``shape="auto"`` picks for ``size`` ranks.

        Rule (docs/grid.md): among the factorisations ``pr * pc == size``,
        take the one with

        1. the fewest ranks owning an empty slab (``pr > Nd`` or ``pc > Nm``),
        2. then the least per-rank communication, :func:`comm_volume`
           ``= [pr > 1] ceil(Nm/pc) + [pc > 1] ceil(Nd/pr)`` blocks of ``Nt``
           values (broadcast of the input block plus reduction of the
           partial result; the slab, hence the ``Fhat`` traffic, is
           ``~Nd*Nm/size`` blocks for every shape),
        3. then the smaller ``pr`` (closer to the default ``1 x size``).

        Without ``Nd`` and ``Nm`` it returns ``(1, size)``.
        """
        if not isinstance(size, int) or size < 1:
            raise ConfigError(f"grid size must be a positive integer, got {size!r}")
        if Nd is None or Nm is None:
            return (1, size)
        best = None
        for pr in range(1, size + 1):
            if size % pr:
                continue
            pc = size // pr
            idle = size - min(pr, Nd) * min(pc, Nm)
            key = (idle, comm_volume(pr, pc, Nd, Nm), pr)
            if best is None or key < best[0]:
                best = (key, (pr, pc))
        return best[1]

    @classmethod
    def from_option(cls, comm: Any = None, option: "None | str | tuple[int, int]" = None,
                    Nd: int | None = None, Nm: int | None = None, **kwargs: Any) -> "_GridBase":
        """The grid a ``--grid`` option asks for.

        ``option`` None or "" means ``1 x size``; "auto" uses
        :meth:`auto_shape` with ``Nd``, ``Nm``; "PRxPC" or ``(pr, pc)`` an
        explicit shape.  ``comm`` None is ``COMM_WORLD`` when the process was
        started by an MPI launcher (:func:`fftmatvec.mpi.launched`), else one
        process.  With one process (or no mpi4py) and a shape that fits one
        process, a :class:`SerialGrid` is returned (no MPI calls at all);
        otherwise a :class:`ProcessGrid`.  :class:`ConfigError` (every rank)
        for a bad option.
        """
        if option == "":
            option = None
        if comm is None:
            from .mpi import launched, world

            comm = world() if launched() else None
        size = 1 if comm is None else comm.Get_size()
        try:
            shape = parse_shape(option, size, Nd, Nm)
        except ConfigError as exc:
            if comm is None:
                raise ConfigError(f"{exc} (not started by an MPI launcher with mpi4py: one process)") from None
            raise
        if size == 1 and shape == (1, 1):
            return SerialGrid()
        return cls(comm, shape, Nd=Nd, Nm=Nm, **kwargs)

    # -- hooks -------------------------------------------------------------------
    def col_bcast(self, x: Array) -> Array:
        """Broadcast ``x`` in place from grid row 0 down my grid column; return it."""
        return x if self.pr == 1 else self.col.bcast(x, root=0)

    def row_bcast(self, x: Array) -> Array:
        """Broadcast ``x`` in place from grid column 0 along my grid row; return it."""
        return x if self.pc == 1 else self.row.bcast(x, root=0)

    def row_reduce(self, y: Array, all: bool = False) -> Array | None:
        """Sum ``y`` in place along my grid row; return the sum on grid column 0
        (on every rank if ``all``), None elsewhere."""
        if self.pc == 1:
            return y
        return self.row.allreduce(y) if all else self.row.reduce(y, root=0)

    def col_reduce(self, y: Array, all: bool = False) -> Array | None:
        """Sum ``y`` in place down my grid column; return the sum on grid row 0
        (on every rank if ``all``), None elsewhere."""
        if self.pr == 1:
            return y
        return self.col.allreduce(y) if all else self.col.reduce(y, root=0)

    def row_ireduce(self, y: Array, after: Any = None) -> Request:
        if self.pc == 1:
            return Request(result=y)
        return self.row.ireduce(y, root=0, after=after)

    def use_device(self, device: Any) -> str:
        """Fit the collectives to arrays on ``device``; return :attr:`collectives`.

        For a GPU (a GPU backend, "gpu", or "auto" with a GPU), once per grid:
        the GPU is chosen (``select_device(node_rank)`` for a name; a backend's
        own ``device_id``), then ``row``, ``col`` and ``all`` become
        :class:`~fftmatvec.collectives.NCCLCollectives` where NCCL can run
        (:func:`~fftmatvec.collectives.device_collectives`,
        ``FFTMATVEC_COLLECTIVES``), else they stay MPI (host-staged unless
        CUDA-aware).  Collective: every rank calls it; failures are voted.
        The CPU changes nothing.
        """
        name = device if isinstance(device, str) else getattr(device, "name", None)
        if name == "auto":
            from .backend import gpu_available

            name = "gpu" if gpu_available() else "cpu"
        if name != "gpu" or self.device_id is not None:
            return self.collectives
        from .collectives import device_collectives
        from .errors import collective

        with collective(self.comm, "choosing the GPU"):
            from .backend.gpu import select_device

            dev = select_device(self.node_rank) if isinstance(device, str) else select_device(device.device_id)
        colls, kind, note = device_collectives(self.comm, [self._row_comm, self._col_comm, self.comm],
                                               cuda_aware=self._cuda_aware)
        old = (self.row, self.col, self.all)
        self.row, self.col, self.all = colls
        for coll in old:
            coll.free()
        self.device_id, self.collectives, self.collectives_note = dev, kind, note
        return kind

    def barrier(self) -> None:
        self.comm.Barrier()

    def device_index(self, n_devices: int) -> int:
        """The GPU this rank should use: ``node_rank % n_devices``."""
        if n_devices < 1:
            raise ConfigError("no GPU to choose from")
        return self.node_rank % n_devices

    def free(self) -> None:
        """Free the grid, row and column communicators (idempotent; not the
        communicator the grid was built from)."""
        if self._freed:
            return
        self._freed = True
        for coll in (self.row, self.col, self.all):
            coll.free()
        for comm in (self._row_comm, self._col_comm, self.comm):
            comm.Free()


# ------------------------------------------------------------------ helpers


def comm_volume(pr: int, pc: int, Nd: int, Nm: int) -> int:
    """Per-rank communication of one product in blocks of ``Nt`` values:
    ``[pr > 1] ceil(Nm/pc)`` broadcast down the column plus
    ``[pc > 1] ceil(Nd/pr)`` reduced along the row (forward; the adjoint
    swaps the roles and has the same total)."""
    return (pr > 1) * math.ceil(Nm / pc) + (pc > 1) * math.ceil(Nd / pr)


_SHAPE_RE = re.compile(r"^\s*(\d+)\s*[xX*,]\s*(\d+)\s*$")


def parse_shape(shape: "None | str | tuple[int, int]", size: int, Nd: int | None = None,
                Nm: int | None = None) -> tuple[int, int]:
    """``(pr, pc)`` from ``None`` (``1 x size``), ``"auto"``, ``"PRxPC"`` or a
    pair; :class:`ConfigError` unless both are positive and ``pr * pc == size``.
    Deterministic (no communication): every rank raises the same error."""
    if shape is None:
        return (1, size)
    if isinstance(shape, str):
        if shape.strip().lower() == "auto":
            return ProcessGrid.auto_shape(size, Nd, Nm)
        match = _SHAPE_RE.match(shape)
        if not match:
            raise ConfigError(f"grid {shape!r}: expected 'PRxPC' (e.g. '2x4'), 'auto' or none")
        pr, pc = int(match.group(1)), int(match.group(2))
    else:
        try:
            pr, pc = shape
        except (TypeError, ValueError):
            raise ConfigError(f"grid {shape!r}: expected (pr, pc), 'PRxPC' or 'auto'") from None
        if not all(isinstance(v, int) or (hasattr(v, "__index__") and not isinstance(v, bool))
                   for v in (pr, pc)) or isinstance(pr, bool) or isinstance(pc, bool):
            raise ConfigError(f"grid {shape!r}: pr and pc must be integers")
        pr, pc = int(pr), int(pc)
    if pr < 1 or pc < 1:
        raise ConfigError(f"grid {pr}x{pc}: pr and pc must be positive")
    if pr * pc != size:
        raise ConfigError(f"grid {pr}x{pc} needs {pr * pc} ranks, but there are {size}")
    return (pr, pc)


def _space(space: str) -> str:
    if space not in SPACES:
        raise ConfigError(f"space {space!r} is not one of {SPACES}")
    return space


def _import_mpi():
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise ConfigError(f"a process grid needs mpi4py (pip install fftmatvec[mpi]): {exc}") from None
    return MPI
