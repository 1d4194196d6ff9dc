"""Every command shown in README.md and docs/*.md runs.

The fenced ```bash and ```python blocks of each file run in order, in a
scratch copy of the checkout (README.md, docs/, inputs/, scripts/, benchmarks/ copied,
src/ linked), with ``fftmatvec`` (a shim onto this source tree), ``python``
and ``mpiexec`` on PATH, so a command writing ``out/...`` or
``docs/scaling-cpu.csv`` never touches the real tree.

* Bash blocks run with ``bash -e -o pipefail``.  Sizes given to commands
  (``--Nm``, ``--Nd``, ``--Nt``, ``--nrhs``, ``-N``/``--reps``) are capped
  (:data:`CAPS`) so that the commands, the ``mpiexec`` ones included, run at
  small sizes: the test checks that they work, the docs say what they measured.
* Python blocks run with ``python``; a block preceded by
  ``<!-- run: mpiexec -n N -->`` runs under ``mpiexec -n N``.
* A block preceded by ``<!-- not-tested: REASON -->`` is skipped: only for
  what cannot run here (a GPU, a cluster, ``pip install``, the test suite
  itself).  ``pip install`` must be marked so.

Also: docs/inversion.md's key reference is what scripts/gen_inversion_doc.py
makes from the schemas and lists every key; README links every doc; the
relative links of the docs resolve.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from shelltools import REPO, require_mpi, shell_env

pytestmark = [pytest.mark.mpi_skip, pytest.mark.timeout(600)]

DOCS = [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))
#: Largest value a documented command may use for each size option in this test.
CAPS = {"--Nm": 64, "--Nd": 8, "--Nt": 32, "--nrhs": 4, "-N": 2, "--reps": 2}
BLOCK_LIMIT_S = 300
MAX_NOT_TESTED = 15

_FENCE_OPEN = re.compile(r"^(\s*)```(\w*)\s*$")
_NOT_TESTED = re.compile(r"^<!--\s*not-tested:\s*(.+?)\s*-->$")
_RUN = re.compile(r"^<!--\s*run:\s*(mpiexec -n \d+)\s*-->$")


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    body: str
    not_tested: str | None = None
    run_under: str | None = None

    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def extract(path: Path) -> list[Block]:
    """The ```bash and ```python blocks of a Markdown file, with their markers."""
    blocks, lines = [], path.read_text().splitlines()
    i = 0
    while i < len(lines):
        match = _FENCE_OPEN.match(lines[i])
        if not match:
            i += 1
            continue
        start, indent, lang = i, len(match.group(1)), match.group(2)
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            i += 1
        if lang in ("bash", "python"):
            prev = next((lines[j].strip() for j in range(start - 1, -1, -1) if lines[j].strip()), "")
            skip, run = _NOT_TESTED.match(prev), _RUN.match(prev)
            body = "\n".join(line[indent:] for line in lines[start + 1:i]) + "\n"
            blocks.append(Block(path, start + 1, lang, body, skip.group(1) if skip else None,
                                run.group(1) if run else None))
        i += 1
    return blocks


def shrink(command: str) -> str:
    """``command`` with every size option capped at :data:`CAPS`."""
    def cap(m: re.Match) -> str:
        return f"{m.group(1)}{m.group(2)}{min(int(m.group(3)), CAPS[m.group(1)])}"

    return re.sub(r"(?<![\w-])(--Nm|--Nd|--Nt|--nrhs|--reps|-N)([ =])(\d+)", cap, command)


def _workdir(tmp: Path) -> Path:
    work = tmp / "work"
    work.mkdir()
    shutil.copy2(REPO / "README.md", work / "README.md")
    for name in ("docs", "inputs", "scripts", "benchmarks"):
        shutil.copytree(REPO / name, work / name, ignore=shutil.ignore_patterns("__pycache__"))
    (work / "src").symlink_to(REPO / "src")
    return work


ALL_BLOCKS = [b for doc in DOCS for b in extract(doc)]


def test_shrink_caps_sizes_only():
    assert shrink("fftmatvec bench --Nm 4000 --Nd 16 --Nt=1024 -N 10 --nrhs 2") == \
        "fftmatvec bench --Nm 64 --Nd 8 --Nt=32 -N 2 --nrhs 2"
    assert shrink("mpiexec -n 4 fftmatvec bench --Nm 10") == "mpiexec -n 4 fftmatvec bench --Nm 10"


def test_markers_are_few_and_pip_install_is_never_run():
    skipped = [b for b in ALL_BLOCKS if b.not_tested]
    assert len(skipped) <= MAX_NOT_TESTED, [b.where() for b in skipped]
    for b in ALL_BLOCKS:
        if re.search(r"\bpip3? install\b", b.body):
            assert b.not_tested, f"{b.where()}: a pip install block must be marked <!-- not-tested: ... -->"
        if b.run_under:
            assert b.lang == "python", f"{b.where()}: <!-- run: ... --> is for python blocks"
    assert sum(not b.not_tested for b in ALL_BLOCKS) >= 10


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_doc_commands_run(doc, tmp_path):
    blocks = [b for b in extract(doc) if not b.not_tested]
    if not blocks:
        pytest.skip(f"{doc.name} has no runnable block")
    if any("mpiexec" in b.body or b.run_under for b in blocks):
        require_mpi()
    work, env = _workdir(tmp_path), shell_env(tmp_path)
    for k, block in enumerate(blocks):
        if block.lang == "bash":
            script = work / f".block{k}.sh"
            script.write_text(shrink(block.body))
            cmd = ["bash", "-e", "-o", "pipefail", str(script)]
        else:
            script = work / f".block{k}.py"
            script.write_text(block.body)
            cmd = (block.run_under.split() if block.run_under else []) + [sys.executable, str(script)]
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=BLOCK_LIMIT_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{block.where()}: ran longer than {BLOCK_LIMIT_S} s:\n{block.body}")
        assert proc.returncode == 0, (f"{block.where()} failed with status {proc.returncode} "
                                      f"after {time.perf_counter() - t0:.1f} s:\n{block.body}\n"
                                      f"--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}")


# ------------------------------------------------------------ links and the config reference


def test_readme_links_every_doc():
    readme = (REPO / "README.md").read_text()
    for doc in (REPO / "docs").glob("*.md"):
        assert f"(docs/{doc.name})" in readme, f"README.md does not link docs/{doc.name}"


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_relative_links_resolve(doc):
    text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto
        assert (doc.parent / target).exists(), f"{doc.name}: broken link {target}"


def _generator():
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import gen_inversion_doc
    finally:
        sys.path.pop(0)
    return gen_inversion_doc


def test_inversion_doc_is_generated_from_the_schemas():
    gen = _generator()
    text = gen.DOC.read_text()
    assert gen.render(text) == text, "docs/inversion.md is out of date: run python scripts/gen_inversion_doc.py"


def test_inversion_doc_lists_every_key():
    from fftmatvec.config import SCHEMA
    from fftmatvec.models import SCHEMA as MODEL_SCHEMA

    text = (REPO / "docs" / "inversion.md").read_text()
    sections = dict(re.findall(r"(?ms)^### `\[(\w+)\]`\n(.*?)(?=^### |\Z)", text))
    for section, keys in list(SCHEMA.items()) + [("model", MODEL_SCHEMA)]:
        assert section in sections, f"no ### `[{section}]` table in docs/inversion.md"
        for key in keys:
            assert f"| `{key}` |" in sections[section], f"{section}.{key} is not in docs/inversion.md"
