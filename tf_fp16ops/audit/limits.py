"""Resource limits of the static audit: what it reads, how much, and how far it walks.

The audit reads untrusted model files. It reads only regular files (no devices, FIFOs or
sockets), each at most `Limits.max_file_bytes` (checked on the size the file system or a zip
archive declares, before reading, and again while reading in bounded chunks), only inside the
model (a symlink in a SavedModel directory that leaves it is refused), and never follows a path
named inside a model unless it lies in `Limits.external_dirs`. The analysis has a budget of
nodes, call sites and call-graph expansions; past it the report is partial and says so
(`AuditReport.partial`).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from .errors import AuditInputError

MiB = 2**20
CHUNK = 4 * MiB  # bytes read per call when reading a file or an archive member


@dataclass(frozen=True)
class Limits:
    """Limits of one audit. The defaults take models far beyond real ones (ResNet50: 53 call
    sites, ~600 nodes; a 200,000-node graph audits in about 1 s) and keep the audit of any input
    within seconds; its memory follows the file size limit (`max_file_bytes`).

    Attributes:
      max_file_bytes: largest file (or archive member) read, in bytes (default 256 MiB;
        `--max-file-size`). Protobuf itself refuses messages over 2 GiB. Parsing takes up to
        about 60x the file size in memory for a file of 2-byte empty nodes (16 MiB of them
        peaked at 0.98 GB, 40 MiB at 2.48 GB, 2-core AMD EPYC Zen 4, 2026-12-06): 16 MiB keeps
        any file under about a gigabyte. A `.keras` config.json may hold at most `max_nodes`
        JSON objects.
      max_nodes: nodes indexed over all graph scopes, and nodes a `.keras` config is
        reconstructed into (default 1,000,000; `--max-nodes`; indexing a 200,000-node graph
        takes about 0.15 s).
      max_sites: call sites reported, (call path, op) pairs of a convolution or a matmul-family
        op (default 20,000; `--max-sites`): each costs about 0.2-0.3 ms of CPU and 20-25 KB
        from graph to JSON (tools/callgraph_bench.py and a 100,000-layer .keras, 2-core Intel
        Xeon, 2026-12-01).
      max_path_frames: calls in the call paths of the reported sites, summed (default 500,000;
        `--max-path-frames`): a report's size grows with it (each call of a site's path is one
        entry of its function_path, call_nodes and provenance chains); a depth-40 diamond stops
        at 12,500 sites in 3.2 s of CPU and 441 MB (benchmarks/results/callgraph_2026-12-01.md).
      max_expansions: call edges followed while enumerating call paths (default 2,000,000;
        `--max-expansions`).
      max_weights: weight elements a `.keras` model built by Keras (`--build-keras`, `--run`)
        may create, summed over its layers (default 500,000,000, 2 GB in float32;
        `--max-weights`): checked per weight before Keras allocates it.
      external_dirs: directories that paths named inside a model (a TFSMLayer's `filepath`) may
        point into; empty (the default): such paths are reported, never read
        (`--allow-external-dir`).
    """

    max_file_bytes: int = 256 * MiB
    max_nodes: int = 1_000_000
    max_sites: int = 20_000
    max_expansions: int = 2_000_000
    max_path_frames: int = 500_000
    max_weights: int = 500_000_000
    external_dirs: tuple[str, ...] = ()

    def __post_init__(self):
        for name in (
            "max_file_bytes",
            "max_nodes",
            "max_sites",
            "max_expansions",
            "max_path_frames",
            "max_weights",
        ):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"Limits.{name} must be a positive integer, got {v!r}")

    def allows_external(self, path: str) -> bool:
        """Whether `path` (resolved, symlinks included) lies inside one of `external_dirs`."""
        real = os.path.realpath(path)
        return any(is_inside(real, os.path.realpath(d)) for d in self.external_dirs)


DEFAULT = Limits()


def is_inside(real_path: str, real_dir: str) -> bool:
    """Whether resolved `real_path` is `real_dir` or lies below it."""
    return os.path.commonpath([real_path, real_dir]) == real_dir


def parse_size(text: str) -> int:
    """'1000', '64K', '256M', '2G' (powers of 1024) -> bytes. ValueError naming `text`."""
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    mult = units.get(t[-1:], 1)
    digits = t[:-1] if t[-1:] in units else t
    if not digits.isascii() or not digits.isdigit() or int(digits) < 1:
        raise ValueError(f"expected a positive size such as 1000, 64K, 256M or 2G, got {text!r}")
    return int(digits) * mult


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def file_kind(mode: int) -> str:
    """'a FIFO', 'a character device', ... for a stat mode that is not a regular file."""
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def os_reason(e: OSError) -> str:
    """ "no such file or directory", "permission denied", ...: the OS's reason, lower case."""
    if isinstance(e, FileNotFoundError):
        return "no such file or directory"
    if isinstance(e, PermissionError):
        return "permission denied"
    return (e.strerror or type(e).__name__).lower()


def too_large(what: str, size: int, limit: int) -> AuditInputError:
    return AuditInputError(
        f"{what}: {size} bytes is over the limit of {limit} bytes per input file "
        "(raise it with --max-file-size)"
    )


def open_regular(path: str, limit: int, inside: str | None = None):
    """An open binary file object for regular file `path` of at most `limit` bytes.

    `inside`: a directory that `path`, symlinks resolved, must lie in (the model directory).
    Opened without blocking (a FIFO swapped in after the check cannot hang the open) and checked
    again on the open descriptor.
    Raises:
      AuditInputError: one line naming `path`: missing, unreadable, outside `inside`, not a
        regular file (naming its kind), or larger than `limit`.
    """
    if inside is not None and not is_inside(os.path.realpath(path), os.path.realpath(inside)):
        raise AuditInputError(
            f"{path}: is a symlink to {os.path.realpath(path)}, outside the model directory "
            f"{inside}; only files inside the model are read"
        )
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise AuditInputError(
                f"{path}: {file_kind(st.st_mode)}, not a regular file; only regular files are read"
            )
        if st.st_size > limit:
            raise too_large(path, st.st_size, limit)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise AuditInputError(f"{path}: cannot read: {os_reason(e)}") from None
    f = os.fdopen(fd, "rb")
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
        f.close()
        if not stat.S_ISREG(st.st_mode):
            raise AuditInputError(f"{path}: {file_kind(st.st_mode)}, not a regular file")
        raise too_large(path, st.st_size, limit)
    return f


def read_bounded(f, limit: int, what: str) -> bytes:
    """All of file object `f`, read in chunks of at most CHUNK bytes; AuditInputError naming
    `what` as soon as more than `limit` bytes come (a file that grows, a member whose data is
    longer than its header says)."""
    parts = []
    total = 0
    while True:
        chunk = f.read(min(CHUNK, limit + 1 - total))
        if not chunk:
            return b"".join(parts)
        total += len(chunk)
        if total > limit:
            raise too_large(what, total, limit)
        parts.append(chunk)


def read_regular(path: str, limit: int, inside: str | None = None) -> bytes:
    """The bytes of regular file `path` (see `open_regular` for the checks and errors)."""
    with open_regular(path, limit, inside) as f:
        try:
            return read_bounded(f, limit, path)
        except OSError as e:
            raise AuditInputError(f"{path}: cannot read: {os_reason(e)}") from None


class Budget:
    """What one audit has spent of its `Limits`; `partial` lists, one line each, the budgets that
    ran out (empty: the report is complete). Passes record here and never print."""

    __slots__ = ("limits", "partial", "nodes", "nodes_cut")

    def __init__(self, limits: Limits = DEFAULT):
        self.limits = limits
        self.partial: list[str] = []
        self.nodes = 0
        self.nodes_cut = False

    def over(self, reason: str) -> None:
        if reason not in self.partial:
            self.partial.append(reason)

    def take_nodes(self, n: int, where: str) -> int:
        """How many of `n` more nodes (of scope `where`) may be indexed; records the first cut."""
        left = self.limits.max_nodes - self.nodes
        if n > left:
            if not self.nodes_cut:
                self.nodes_cut = True
                self.over(
                    f"nodes: only the first {self.limits.max_nodes} nodes are indexed "
                    f"(--max-nodes); {where} and later scopes are cut"
                )
            n = left
        self.nodes += n
        return n
