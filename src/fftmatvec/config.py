"""The inversion's TOML configuration: loading and validation.

Every key is checked against :data:`SCHEMA`; unknown keys, wrong types and
bad choices raise :class:`~fftmatvec.errors.ConfigError` whose message starts
with the key path (``prior.kind: ...``).  Relative paths are taken relative
to the config file's folder.  The ``[model]`` table (for ``fftmatvec
generate``) is validated by :func:`fftmatvec.models.validate_model_config`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from .errors import ConfigError
from .precision import ALL_CODES


@dataclass(frozen=True)
class Key:
    """One configuration key: accepted types, default (``REQUIRED`` if none),
    allowed values, and whether it names a path."""

    types: tuple[type, ...]
    default: Any
    choices: tuple[Any, ...] | None = None
    path: bool = False
    doc: str = ""


REQUIRED = object()
_NUM = (int, float)

SCHEMA: dict[str, dict[str, Key]] = {
    "operator": {
        "matrix": Key((str,), REQUIRED, path=True, doc="p2o matrix directory"),
        "qoi_matrix": Key((str,), None, path=True, doc="p2q matrix directory (QoI forecasts)"),
        "precision": Key((str,), "ddddd", choices=ALL_CODES + ("auto",),
                         doc="precision code of F products, or auto (both directions chosen by measurement)"),
        "adjoint_precision": Key((str,), None, choices=ALL_CODES + ("auto",),
                                 doc="precision code of F^T products, or auto; default: as precision. The codes "
                                 "an auto run chose are in its summary.json: giving them skips the measurement"),
        "tolerance": Key(_NUM, 1e-7, doc="relative error tolerance for auto"),
    },
    "data": {
        "observations": Key((str,), REQUIRED, path=True, doc="data-space vector file of observations"),
        "truth": Key((str,), None, path=True, doc="true parameter vector file, for error reports"),
        "qoi_truth": Key((str,), None, path=True, doc="true QoI vector file, for error reports and plots"),
    },
    "noise": {
        "std": Key(_NUM, None, doc="noise standard deviation (white)"),
        "relative": Key(_NUM, None, doc="noise std relative to the RMS of the observations (not to their maximum, "
                        "as `[model] noise_rel`)"),
    },
    "prior": {
        "kind": Key((str,), "white", choices=("white", "matern"), doc="prior covariance"),
        "std": Key(_NUM, 1.0, doc="marginal standard deviation"),
        "mean": Key(_NUM + (str,), 0.0, doc="prior mean: a number or a parameter vector file"),
        "correlation_length": Key(_NUM, 0.1, doc="matern: spatial correlation length (grid units)"),
        "time_correlation": Key(_NUM, 0.0, doc="matern: correlation time in steps (0: independent in time)"),
        "shape": Key((list,), None, doc="matern: parameter grid shape [nx] or [nx, ny]; default from the matrix"),
        "spacing": Key(_NUM, 1.0, doc="matern: parameter grid spacing"),
    },
    "solver": {
        "method": Key((str,), "cg-parameter", choices=("cg-parameter", "cg-data", "cholesky-data"),
                      doc="MAP solver: prior-preconditioned CG in parameter space, CG in data space, "
                      "or the data-space matrix formed once and Cholesky-factored"),
        "rtol": Key(_NUM, 1e-8, doc="relative residual tolerance of CG"),
        "maxiter": Key((int,), 500, doc="CG iteration limit"),
        "checkpoint_every": Key((int,), 0, doc="CG iterations between checkpoints (0: none)"),
        "checkpoint_seconds": Key(_NUM, 0.0, doc="seconds of CG between checkpoints (0: none); with "
                                  "checkpoint_every, whichever comes first"),
        "rank": Key((int,), 50, doc="rank of the low-rank posterior approximation"),
    },
    "grid": {
        "shape": Key((str,), "auto", doc="'auto' or 'PRxPC'"),
        "device": Key((str,), "cpu", choices=("cpu", "gpu", "auto"),
                      doc="backend: NumPy/SciPy, CuPy, or the GPU when there is one"),
    },
    "generate": {
        "dir": Key((str,), "model", path=True, doc="folder fftmatvec generate writes the model into"),
    },
    "output": {
        "dir": Key((str,), "out", path=True, doc="output folder"),
        "plots": Key((bool,), True, doc="write PNG plots"),
    },
}


def _check(section: str, name: str, key: Key, value: Any, base: Path) -> Any:
    where = f"{section}.{name}"
    # bool is an int in Python: accept it only where bool is the type
    if not isinstance(value, key.types) or (isinstance(value, bool) and bool not in key.types):
        names = " or ".join(t.__name__ for t in key.types)
        raise ConfigError(f"{where}: expected {names}, got {type(value).__name__} {value!r}")
    if key.choices is not None and value not in key.choices:
        shown = key.choices if len(key.choices) <= 4 else key.choices[:3] + ("...",)
        raise ConfigError(f"{where}: {value!r} is not one of {', '.join(map(str, shown))}")
    if key.path and isinstance(value, str):
        return str((base / value).resolve()) if not Path(value).is_absolute() else value
    return value


INVERT = ("operator", "data", "noise")
GENERATE = ("model",)


def validate(raw: dict[str, Any], base: Path = Path("."),
             require: tuple[str, ...] = INVERT) -> dict[str, dict[str, Any]]:
    """Check a parsed config and fill in defaults.

    Every section present is checked; the sections in ``require`` must be
    present with their required keys (:data:`INVERT` for ``fftmatvec
    invert``, :data:`GENERATE` for ``fftmatvec generate``).

    Returns ``{section: {key: value}}`` for every section of :data:`SCHEMA`
    whose required keys are satisfied, plus ``model`` when present (validated
    by the model's own checker).
    """
    out: dict[str, dict[str, Any]] = {}
    for section in raw:
        if section not in SCHEMA and section != "model":
            raise ConfigError(f"{section}: unknown section; valid: {', '.join(SCHEMA)}, model")
        if not isinstance(raw[section], dict):
            raise ConfigError(f"{section}: expected a table [{section}]")
    for section in require:
        if section not in raw:
            raise ConfigError(f"{section}: required section [{section}] missing")
    for section, keys in SCHEMA.items():
        if section not in raw and section not in require and any(k.default is REQUIRED for k in keys.values()):
            continue
        table = raw.get(section, {})
        for name in table:
            if name not in keys:
                raise ConfigError(f"{section}.{name}: unknown key; valid: {', '.join(keys)}")
        values = {}
        for name, key in keys.items():
            if name in table:
                values[name] = _check(section, name, key, table[name], base)
            elif key.default is REQUIRED:
                raise ConfigError(f"{section}.{name}: required key missing")
            else:
                default = key.default
                values[name] = _check(section, name, key, default, base) if key.path and default else default
        out[section] = values
    if "model" in raw:
        from .models import validate_model_config

        out["model"] = validate_model_config(raw["model"])
    noise = out["noise"]
    if "noise" in raw and (noise["std"] is None) == (noise["relative"] is None):
        raise ConfigError("noise: give exactly one of noise.std and noise.relative")
    solver = out["solver"]
    if solver["maxiter"] < 1 or solver["rtol"] <= 0:
        raise ConfigError("solver: maxiter must be >= 1 and rtol > 0")
    if solver["checkpoint_every"] < 0 or not solver["checkpoint_seconds"] >= 0:
        raise ConfigError("solver: checkpoint_every and checkpoint_seconds must be >= 0")
    return out


def load(path: "str | Path", require: tuple[str, ...] = INVERT) -> dict[str, dict[str, Any]]:
    """Read and validate a TOML config file (see :func:`validate`)."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    try:
        return validate(raw, base=path.parent, require=require)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
