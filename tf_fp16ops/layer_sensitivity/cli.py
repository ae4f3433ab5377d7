"""tf-fp16-sensitivity: which layers of a Keras model can take fp16 accumulation.

    tf-fp16-sensitivity model.keras --inputs x.npy [--labels y.npy] [--tolerance 0.01]
        [--metric-tolerance 0.01] [--others float32|original] [--search greedy|bisect]
        [--batch-size 32] [--json out.json] [--logdir DIR] [--save-model out.keras]
        [--random-inputs N] [--no-progress]

Prints the table of `tf_fp16ops.sensitivity` (one row per layer, by rank, then the fp16 set);
`--json` writes `SensitivityResult.to_json()`, `--logdir` the TensorBoard summaries,
`--save-model` the converted model for the fp16 set. Exit status 0 on success, 2 on bad
arguments or inputs (one line on stderr), memory too small for them included: the size an
`--inputs` file's header declares and the size of `--random-inputs` are checked against the
file and the machine's memory before anything is allocated.

`--random-inputs N` draws N standard normal samples (seed 0) in the model's input shape, in
float64 for a float64 input and in float32 otherwise (Keras casts them to the input's dtype); it
refuses a model whose input is not floating point (an int32 input of token ids for an
Embedding: normal values cast to integers would not be valid ids), naming that input.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import zipfile

from tf_fp16ops._platform.cli import ArgumentParser

# Quiet TensorFlow's C++ start-up lines before anything below imports it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="tf-fp16-sensitivity",
        description="Rank the conv-like and Dense layers of a Keras model by their sensitivity to "
        "fp16 accumulation and find the largest set that can take it within a tolerance.",
    )
    p.add_argument("model", help="a .keras model file (Sequential or functional)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--inputs", help=".npy file of model inputs, samples on axis 0")
    src.add_argument(
        "--random-inputs",
        type=int,
        metavar="N",
        help="N inputs drawn from a standard normal distribution (seed 0) in the "
        "model's input shape (a model with one floating-point input)",
    )
    p.add_argument(
        "--labels",
        help=".npy file of labels (class ids [N] or one-hot [N, K]); enables the "
        "top-1 accuracy change",
    )
    p.add_argument(
        "--tolerance",
        type=float,
        default=1e-2,
        help="largest max relative output error of the fp16 set (default 0.01)",
    )
    p.add_argument(
        "--metric-tolerance",
        type=float,
        default=None,
        help="largest accuracy drop of the fp16 set with --labels (default 0.01)",
    )
    p.add_argument(
        "--others",
        choices=("float32", "original"),
        default="float32",
        help="how the layers not in fp16 run (default float32 accumulation)",
    )
    p.add_argument("--search", choices=("greedy", "bisect"), default="greedy")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--json", help="write the result as JSON to this file")
    p.add_argument(
        "--logdir", help="write TensorBoard summaries (scalars per layer, a text table) here"
    )
    p.add_argument("--save-model", help="save the converted model for the fp16 set (.keras)")
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bar (there is none either when stdout is not a terminal: the table "
        "there stays plain text)",
    )
    return p


def _unwritable_file(path: str) -> str | None:
    """Why `path` cannot be written as a file (None when it can); creates and removes nothing
    that was there before."""
    if os.path.isdir(path):
        return "is a directory"
    existed = os.path.exists(path)
    try:
        with open(path, "a"):
            pass
    except OSError as e:
        return e.strerror or type(e).__name__
    if not existed:
        os.remove(path)
    return None


def _unwritable_dir(path: str) -> str | None:
    """Why a directory `path` cannot be written (or created); None when it can."""
    if not path:
        return "empty path"
    if os.path.exists(path) and not os.path.isdir(path):
        return "not a directory"
    parent = os.path.abspath(path)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        return f"{parent} is not a directory"
    try:
        fd, probe = tempfile.mkstemp(dir=parent, prefix=".tf-fp16-sensitivity-")
    except OSError as e:
        return e.strerror or type(e).__name__
    os.close(fd)
    os.remove(probe)
    return None


def main(argv=None) -> int:
    args = _parser().parse_args(argv)

    def fail(message: str) -> int:
        print(f"tf-fp16-sensitivity: error: {message}", file=sys.stderr)
        return 2

    # Flags and files are checked here, before TensorFlow is imported and the model loaded
    # (seconds), with the flags' names; the library checks the same values again.
    if args.random_inputs is not None and args.random_inputs < 1:
        return fail(f"--random-inputs must be >= 1, got {args.random_inputs}")
    if not args.tolerance > 0:  # also NaN
        return fail(f"--tolerance must be a positive number, got {args.tolerance}")
    if args.metric_tolerance is not None and not args.metric_tolerance >= 0:
        return fail(f"--metric-tolerance must be a number >= 0, got {args.metric_tolerance}")
    if args.batch_size < 1:
        return fail(f"--batch-size must be >= 1, got {args.batch_size}")
    if args.save_model and not args.save_model.endswith(".keras"):
        return fail(f"--save-model must name a .keras file, got {args.save_model!r}")
    # Outputs are checked before the (long) run, not after it.
    for flag, path in (("--json", args.json), ("--save-model", args.save_model)):
        why = _unwritable_file(path) if path is not None else None
        if why:
            return fail(f"{flag} {path!r}: cannot write: {why}")
    why = _unwritable_dir(args.logdir) if args.logdir is not None else None
    if why:
        return fail(f"--logdir {args.logdir!r}: cannot write: {why}")
    if os.path.isdir(args.model):
        return fail(
            f"model {args.model!r} is a directory (a SavedModel?): tf-fp16-sensitivity takes a "
            ".keras file"
        )
    for flag, path in (("model", args.model), ("--inputs", args.inputs), ("--labels", args.labels)):
        if path is not None and not os.path.isfile(path):
            return fail(f"{flag} {path!r}: no such file")
    from tf_fp16ops._platform.quiet import import_tensorflow

    try:
        import_tensorflow()
        import keras
    except ImportError as e:
        return fail(f"the sensitivity run needs TensorFlow: {e}; pip install 'tf_fp16ops[tf]'")

    import tf_fp16ops.layers  # noqa: F401  (registers the layers so .keras files load)
    from tf_fp16ops.layer_sensitivity.analysis import sensitivity

    # Before the model loads (seconds). Keras reads a .keras file as a zip archive and says
    # "File not found" of any other file.
    if not zipfile.is_zipfile(args.model):
        return fail(f"model {args.model!r} is not a .keras zip archive")
    try:
        for flag, path in (("--inputs", args.inputs), ("--labels", args.labels)):
            if path is not None:
                _check_npy(flag, path)
    except (OSError, ValueError) as e:
        return fail(f"cannot read inputs/labels: {e}")
    try:
        model = keras.saving.load_model(args.model)
    except Exception as e:  # noqa: BLE001 - any load failure is a problem of the file
        # Keras' and TensorFlow's messages span many lines; the first names the cause (a weight
        # too large to allocate is TensorFlow's ResourceExhaustedError).
        first = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), "")
        return fail(f"cannot load model {args.model!r}: {type(e).__name__}: {first}")
    try:
        if args.inputs:
            x = _load_array("--inputs", args.inputs)
        else:
            x = _random_inputs(model, args.random_inputs)
        y = _load_array("--labels", args.labels) if args.labels else None
    except (OSError, ValueError) as e:
        return fail(f"cannot read inputs/labels: {e}")
    if args.inputs:
        from .source import check_x

        try:
            check_x(model, x, arg=f"--inputs {args.inputs!r}")
        except ValueError as e:
            return fail(str(e))
    if y is not None and len(y) != len(x):
        src = f"--inputs {args.inputs!r}" if args.inputs else f"--random-inputs {len(x)}"
        return fail(
            f"--labels {args.labels!r} has {len(y)} labels for the {len(x)} samples of {src}"
        )
    try:
        result = sensitivity(
            model,
            x,
            y,
            tolerance=args.tolerance,
            metric_tolerance=args.metric_tolerance,
            others=args.others,
            search=args.search,
            batch_size=args.batch_size,
            progress=not args.no_progress and sys.stdout.isatty(),
            logdir=args.logdir,
        )
    except (ValueError, TypeError) as e:
        return fail(str(e).splitlines()[0])
    except MemoryError:
        return fail(
            f"out of memory in the sensitivity run ({len(x)} samples, --batch-size "
            f"{args.batch_size}); pass fewer samples or a smaller --batch-size"
        )
    print(result.table())
    if args.json:
        with open(args.json, "w") as f:
            f.write(result.to_json() + "\n")
    if args.save_model:
        result.model.save(args.save_model)
    return 0


def _memory_bytes() -> int | None:
    """The machine's physical memory in bytes (None where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return None


def _too_big(what: str, nbytes: int) -> None:
    """Raises ValueError naming `what` when `nbytes` exceeds the machine's memory."""
    memory = _memory_bytes()
    if memory is not None and nbytes > memory:
        raise ValueError(
            f"{what} needs {nbytes / 2**30:.1f} GiB, more than this machine's memory "
            f"({memory / 2**30:.1f} GiB)"
        )


def _check_npy(flag: str, path: str) -> None:
    """Reads only the header of the .npy file `path`: raises ValueError naming `flag` and the
    file when it is not a .npy array file (object arrays included: they are pickles), when it
    holds fewer data bytes than its header declares, or when the declared array is larger than
    the machine's memory; nothing of the data is read or allocated."""
    import numpy as np

    fmt = np.lib.format
    not_npy = ValueError(f"{flag} {path!r} is not a .npy array file")
    with open(path, "rb") as f:
        try:
            version = fmt.read_magic(f)
            if version == (1, 0):
                shape, _, dtype = fmt.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, _, dtype = fmt.read_array_header_2_0(f)
            else:
                raise not_npy
        except (ValueError, TypeError, SyntaxError, EOFError):
            raise not_npy from None
        offset = f.tell()
    if dtype.hasobject:
        raise not_npy
    nbytes = math.prod(shape) * dtype.itemsize
    held = os.path.getsize(path) - offset
    declared = f"shape {tuple(shape)} of {dtype}"
    if held < nbytes:
        raise ValueError(
            f"{flag} {path!r} declares {declared} ({nbytes} bytes) but holds {held} bytes of "
            "data (truncated or corrupt)"
        )
    _too_big(f"{flag} {path!r} ({declared})", nbytes)


def _load_array(flag: str, path: str):
    """One numpy array from a .npy file (never unpickled: a file that is not a .npy array is
    refused as such, whatever NumPy would suggest for it); ValueError naming `flag` where
    memory runs out."""
    import numpy as np

    try:
        return np.load(path, allow_pickle=False)
    except ValueError as e:
        if "pickle" in str(e):
            raise ValueError(f"{flag} {path!r} is not a .npy array file") from None
        raise
    except MemoryError:
        raise ValueError(f"{flag} {path!r}: not enough memory to load it") from None


def _random_inputs(model, n: int):
    """`n` standard normal samples (seed 0) for the model's one floating-point input of fixed
    shape, drawn in float64 for a float64 input and float32 otherwise (module docstring);
    ValueError naming `--random-inputs` for other models and where memory is too small."""
    import numpy as np

    flag = f"--random-inputs {n}"
    specs = model.inputs or []
    shape = tuple(specs[0].shape[1:]) if len(specs) == 1 else ()
    if len(specs) != 1 or any(d is None for d in shape):
        raise ValueError(f"{flag} needs a model with one input of fixed shape; use --inputs")
    spec = specs[0]
    if spec.dtype not in ("float16", "bfloat16", "float32", "float64"):
        raise ValueError(
            f"{flag}: the model's input {spec.name!r} is {spec.dtype}, not floating point "
            "(token ids?): normal values would not be valid; pass --inputs"
        )
    dtype = np.float64 if spec.dtype == "float64" else np.float32
    size = (n, *shape)
    nbytes = math.prod(size) * np.dtype(dtype).itemsize
    _too_big(f"{flag} ({n} x {shape} {np.dtype(dtype).name})", nbytes)
    try:
        return np.random.default_rng(0).standard_normal(size, dtype=dtype)
    except MemoryError:
        raise ValueError(f"{flag}: not enough memory for {size} {np.dtype(dtype).name}") from None


if __name__ == "__main__":
    sys.exit(main())
