"""Python wrappers for the Fp16Conv2D op family and their gradients.

Numerics contract (README "Numerics"; docs/design.md "Numerics contract"):
  accumulation="float32": products summed in binary32, rounded once to the input dtype. With
    float32 inputs on a machine without a GPU, while oneDNN runs TensorFlow's float32
    convolutions under its strict floating-point math mode, the forward pass and the two
    gradients (dgrad, wgrad) are handed to TensorFlow's own
    Conv2D / Conv2DBackpropInput / Conv2DBackpropFilter, and while Eigen runs them the forward of
    1x1 filters and of sums of 2048 or more terms: the same contract, faster there
    (tf_fp16ops/_platform/stock_conv.py, which lists the exceptions), in oneDNN's order (one FMA
    per term, padded terms skipped) or Eigen's (each product rounded before it is added).
    `raw_ops` always runs the op library's kernels, in the order below.
  accumulation="float16" (inputs must be float16): one binary16 accumulator per output, starting
    at +0; each step is acc = round_fp16(x*w + acc) with the exact product and one
    round-to-nearest-even (the semantics of CUDA's __hfma, CUDA Math API "Half Precision
    Intrinsics"), over (kh, kw, in_channel) ascending on the CPU. The forward result of the
    float16 path is bit-exact against a NumPy reference (tests/support/reference.py).

Sizes: output sizes follow tf.nn.conv2d's shape function; a zero batch, zero output channels or
an input height or width of zero that the padding allows (SAME) give empty outputs (zeros for an
empty sum), while a filter with zero KH, KW or input channels is an InvalidArgumentError, as in
TensorFlow's Conv2D ("filter must not have zero elements"); there is no limit on filter size x
dilation other than padded extents and effective filter sizes of at most 2**62. On the CPU,
accumulation="float32" with float32 inputs flushes float32 subnormals to zero under TensorFlow's
thread settings (FTZ/DAZ); accumulation="float16" keeps float16 subnormals exactly
(docs/numerics.md).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import reprlib
from collections.abc import Sequence
from types import ModuleType

import numpy as np
import tensorflow as tf
from tensorflow.python.eager import context as _tfe_context  # what tf.executing_eagerly reads
from tensorflow.python.framework.ops import EagerTensor as _EagerTensor  # tensors with a value
from tensorflow.python.ops import gen_nn_ops  # TensorFlow's op functions behind tf.raw_ops

from tf_fp16ops._platform import library as _library
from tf_fp16ops._platform import stock_conv
from tf_fp16ops._platform.xla import check_not_in_xla

_ops = _library.load()
_raw_ops_doc = """The op library's generated op functions (`tf.load_op_library`'s: fp16_conv2d,
fp16_conv2d_backprop_input, fp16_conv2d_backprop_filter, fp16_depthwise_conv2d, fp16_mat_mul, ...,
and Fp16Conv2D, ... as in `tf.raw_ops`), which always run the op library's own kernels; they take
the ops' attrs as keywords (Tacc, strides, padding, explicit_paddings, data_format, dilations)."""


def _raw_ops_module(ops_module):
    """The public face of `tf.load_op_library`'s module: its op functions (fp16_conv2d, ...,
    and the CamelCase Fp16Conv2D, ...), marked for AutoGraph not to convert. Their code is
    generated at load time with no source file, so AutoGraph, which converts the functions a
    `tf.function` calls unless their module is TensorFlow's own, printed "AutoGraph could not
    transform <function fp16_conv2d ...>" when a traced function called one. The wrapper costs
    about 2.5 us a call (a 1x2x2x1 fp16_conv2d: 13.4 -> 15.9 us, AMD EPYC Zen 4); the package's
    own calls use `_ops` directly. `__all__` names the functions, so that help() lists them (it
    listed none while their `__module__` was the generated module's hash name, now this one's)."""
    module = ModuleType(f"{__name__}.raw_ops", _raw_ops_doc)
    names = []
    for name in dir(ops_module):
        fn = getattr(ops_module, name)
        if (
            name.startswith("_")
            or name.endswith("_eager_fallback")
            or not inspect.isfunction(fn)
            or fn.__module__ != ops_module.__name__
        ):
            continue
        wrapper = tf.autograph.experimental.do_not_convert(fn)
        wrapper.__module__ = module.__name__
        setattr(module, name, wrapper)
        names.append(name)
    module.__all__ = names
    return module


raw_ops = _raw_ops_module(_ops)

IntOrList = int | Sequence[int]

# The accepted spellings of `accumulation=`, and nothing else: the two dtype names (as Keras
# and NumPy spell them), the two tf.DTypes and the two NumPy dtypes.
ACCUMULATIONS = "'float16' or 'float32' (or tf.float16, tf.float32, np.float16, np.float32)"


def accumulation_dtype(accumulation) -> tf.DType:
    """Maps an accumulation to tf.float16 or tf.float32.

    Accepted, and only these: the names "float16" and "float32" (exactly so spelt), tf.float16
    and tf.float32, and NumPy's float16 and float32 (`np.float16` or `np.dtype("float16")`).

    Raises:
      ValueError: any other value, e.g. "half", "fp16", "Float16" or tf.float64 (the message
        names `accumulation`, the value and the accepted spellings).
    """
    if isinstance(accumulation, str):
        if accumulation in ("float16", "float32"):
            return tf.as_dtype(accumulation)
    elif isinstance(accumulation, tf.DType):
        if accumulation in (tf.float16, tf.float32):
            return tf.as_dtype(accumulation)  # the interned DType (`_conv` compares with `is`)
    elif isinstance(accumulation, np.dtype) or (
        isinstance(accumulation, type) and issubclass(accumulation, np.generic)
    ):
        if np.dtype(accumulation) in (np.float16, np.float32):
            return tf.as_dtype(np.dtype(accumulation))
    raise ValueError(f"accumulation must be {ACCUMULATIONS}, got {_shown(accumulation)}")


def cpu_isa() -> str:
    """The instruction-set path of the CPU kernels in this process: 'avx512fp16' (native binary16
    FMA, Tacc=half), 'avx512', 'avx2' or 'scalar'. `TF_FP16OPS_CPU_ISA=avx512|avx2|scalar` caps
    it."""
    return _ops.fp16_ops_cpu_isa().numpy().decode()


class _BoundedRepr(reprlib.Repr):
    """reprlib's bounds (nesting, entries, string length) for every type, and ints too long to
    print (Python refuses int -> str beyond 4300 digits) shown by their size."""

    def repr_int(self, x, level):
        if x.bit_length() > 256:
            return f"<int of {x.bit_length()} bits>"
        return super().repr_int(x, level)


# repr for error messages, bounded: a hostile argument (nested 100000 deep, a million entries, a
# string of megabytes, an int of 5000 digits) gets a short message instead of a RecursionError,
# Python's int-conversion error or megabytes of text.
_REPR = _BoundedRepr()
_REPR.maxlevel = 4
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxfrozenset = _REPR.maxdeque = 16
_REPR.maxdict = _REPR.maxarray = 16
_REPR.maxlong = _REPR.maxstring = _REPR.maxother = 200


def _shown(value) -> str:
    try:
        return _REPR.repr(value)
    except Exception:  # a repr that fails (or recurses without end) in the value's own code
        return f"<{type(value).__name__} object>"


_INT64_MAX = 2**63 - 1
_INT32_MAX = 2**31 - 1


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


_MAX_LIST = 64  # items read from an iterable argument (a generator may never end)


def _items(name: str, value, what: str, shown=None) -> list:
    """The items of an iterable argument, at most _MAX_LIST of them (a generator may never end),
    or a ValueError "`name` must be `what`, got `shown`" (`value` itself by default) for a
    string, a mapping, a 0-d array, a non-iterable or a longer one."""
    shown = value if shown is None else shown
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
        raise ValueError(f"{name} must be {what}, got {_shown(shown)}")
    try:
        items = list(itertools.islice(value, _MAX_LIST + 1))
    except TypeError:  # a 0-d array: iterable in type only
        raise ValueError(f"{name} must be {what}, got {_shown(shown)}") from None
    if len(items) > _MAX_LIST:
        raise ValueError(f"{name} must be {what}, got {_shown(shown)}")
    return items


def _int_list(name: str, value, what: str, shown=None) -> list[int]:
    """A list of Python ints from a sequence of ints (no strings, floats or bools) of at most
    _MAX_LIST items (`_items`). Each must lie within int64. `shown`: the argument named in the
    message (`value` itself by default; the whole padding for one of its pairs)."""
    shown = value if shown is None else shown
    values = _items(name, value, what, shown)
    if not all(_is_int(v) for v in values):
        raise ValueError(f"{name} must be {what}, got {_shown(shown)}")
    if any(abs(int(v)) > _INT64_MAX for v in values):
        raise ValueError(f"{name} entries must fit in int64, got {_shown(shown)}")
    return [int(v) for v in values]


def _window_attr(name: str, value, data_format: str) -> list[int]:
    """Expands `strides`/`dilations` as tf.nn.conv2d does: an int, 1, 2 or 4 ints."""
    what = "an int or a list of 1, 2 or 4 ints"
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if _is_int(value):
        values = _int_list(name, [value] * 2, what)
    else:
        values = _int_list(name, value, what)
        if len(values) == 1:
            values = values * 2
    if len(values) not in (2, 4):
        raise ValueError(f"{name} must be an int or a list of 1, 2 or 4 ints, got {_shown(value)}")
    if any(v < 1 for v in values):
        raise ValueError(f"{name} must be positive, got {_shown(value)}")
    if any(v > _INT32_MAX for v in values):  # the op's list(int) attrs hold int32
        raise ValueError(f"{name} entries must fit in int32, got {_shown(value)}")
    if len(values) == 2:
        return [1, 1] + values if data_format == "NCHW" else [1] + values + [1]
    return values


def _padding_attrs(padding) -> tuple[str, list[int]]:
    """'SAME' / 'VALID', or explicit [[0, 0], [top, bottom], [left, right], [0, 0]].

    The explicit pairs are in data_format order.
    """
    if isinstance(padding, str):
        upper = padding.upper()
        if upper in ("SAME", "VALID"):
            return upper, []
        raise ValueError(
            "padding must be 'SAME', 'VALID' or a list of 4 [before, after] pairs, got "
            f"{_shown(padding)}"
        )
    what = "'SAME', 'VALID' or a list of 4 [before, after] pairs of ints"
    pairs = [_int_list("padding", p, what, shown=padding) for p in _items("padding", padding, what)]
    if len(pairs) != 4 or any(len(p) != 2 for p in pairs):
        raise ValueError(
            "explicit padding must be 4 [before, after] pairs (one per dimension), got "
            f"{_shown(padding)}"
        )
    flat = [v for p in pairs for v in p]
    if any(v < 0 for v in flat):
        raise ValueError(f"explicit padding must be non-negative, got {_shown(padding)}")
    if any(v > _INT32_MAX for v in flat):  # explicit_paddings is a list(int) attr: int32
        raise ValueError(f"explicit padding entries must fit in int32, got {_shown(padding)}")
    return "EXPLICIT", flat


def _data_format(data_format: str) -> str:
    if not isinstance(data_format, str) or data_format.upper() not in ("NHWC", "NCHW"):
        raise ValueError(f"data_format must be 'NHWC' or 'NCHW', got {_shown(data_format)}")
    return data_format.upper()


def _exact_key(value, depth: int = 3):
    """A hashable key that tells apart every argument spelling `_conv_attrs` treats differently,
    or None where it cannot (such arguments are checked on every call). The type is part of it at
    every level: (1, True) and (1.0, 1.0) hash and compare equal to (1, 1) but are refused.
    Lists and tuples nest at most `depth` deep (the arguments, padding, its pairs) and hold at
    most 5 entries (the five arguments; valid lists hold 4 or fewer), so that a hostile argument
    costs no more than its check."""
    kind = type(value)
    if kind is int or kind is str or value is None:
        return (kind, value)
    if kind is list or kind is tuple:
        if depth == 0 or len(value) > 5:
            return None
        parts = []
        for v in value:
            part = _exact_key(v, depth - 1)
            if part is None:
                return None
            parts.append(part)
        return (kind, tuple(parts))
    if kind is tf.DType or value is np.float16 or value is np.float32:
        return (kind, value)
    return None


# Checked attrs by `_exact_key` of the arguments (never mutated by their users), so that a
# repeated eager call does not check the same arguments again (about 20 us of Python a call).
_ATTRS_CACHE: dict = {}
_ATTRS_CACHE_SIZE = 256


def _conv_attrs(strides, padding, data_format, dilations, accumulation) -> dict:
    """The attrs of the Fp16Conv2D family from the arguments of `conv2d` and its backprops, each
    checked (a ValueError naming it): Tacc, strides and dilations as 4 ints in data_format
    order, padding with its explicit_paddings, data_format. The result is shared between calls
    with the same arguments: read it, do not change it."""
    key = _exact_key((strides, padding, data_format, dilations, accumulation))
    attrs = _ATTRS_CACHE.get(key) if key is not None else None
    if attrs is None:
        attrs = _checked_conv_attrs(strides, padding, data_format, dilations, accumulation)
        if key is not None:
            if len(_ATTRS_CACHE) >= _ATTRS_CACHE_SIZE:
                _ATTRS_CACHE.clear()
            _ATTRS_CACHE[key] = attrs
    return attrs


def _checked_conv_attrs(strides, padding, data_format, dilations, accumulation) -> dict:
    data_format = _data_format(data_format)
    tacc = accumulation_dtype(accumulation)
    strides = _window_attr("strides", strides, data_format)
    dilations = _window_attr("dilations", 1 if dilations is None else dilations, data_format)
    padding, explicit = _padding_attrs(padding)
    return dict(
        Tacc=tacc,
        strides=strides,
        padding=padding,
        explicit_paddings=explicit,
        data_format=data_format,
        dilations=dilations,
    )


# The op function of each op type of the family.
_CONV_OPS = {
    "Fp16Conv2D": _ops.fp16_conv2d,
    "Fp16Conv2DBackpropInput": _ops.fp16_conv2d_backprop_input,
    "Fp16Conv2DBackpropFilter": _ops.fp16_conv2d_backprop_filter,
}


# TensorFlow's own op for each op type that may be handed to it (stock_conv.py) and its pass.
# Both ops take their operands in one order (x, w, dy roles: input, filter, out_backprop). The
# generated op functions, which `tf.raw_ops` wraps in a keyword-only function: called with the
# operands by position, as the op library's are, one Python frame and a dict fewer per call.
_STOCK_OPS = {
    "Fp16Conv2D": (gen_nn_ops.conv2d, "fprop"),
    "Fp16Conv2DBackpropInput": (gen_nn_ops.conv2d_backprop_input, "dgrad"),
    "Fp16Conv2DBackpropFilter": (gen_nn_ops.conv2d_backprop_filter, "wgrad"),
}


def _static_shape(t) -> list:
    """A tensor's shape as known when the op is built, or an `*_sizes` operand's value; entries
    None where unknown."""
    if isinstance(t, np.ndarray):
        return list(t.shape)
    # DTypes are interned (tf.as_dtype): `is` spares DType.__eq__'s conversion (~1 us a call).
    if t.dtype is tf.int32:
        # An eager tensor is its value (tf.get_static_value's checks cost about 3 us more).
        value = t.numpy() if type(t) is _EagerTensor else tf.get_static_value(t)
        return [None] * 4 if value is None else value.tolist()
    return t.shape.as_list() if t.shape.rank is not None else []


def _choose(op_type: str, attrs: dict, args: list, dtype: tf.DType | None = None) -> tuple:
    """Which op runs `op_type` on `args` (in its input order): TensorFlow's own where it keeps the
    contract and is faster (float32 with Tacc=float, `stock_conv.stock_wins`), else the op
    library's. Returns (op function, taking the operands by position, its attrs, whether it is
    TensorFlow's op). `dtype`: the float operands' dtype where the caller has it."""
    if op_type in _STOCK_OPS and attrs["Tacc"] is tf.float32:  # cheap (the shapes are not)
        if dtype is None:
            dtype = next(d for d in (tf.as_dtype(a.dtype) for a in args) if d is not tf.int32)
        if dtype is tf.float32:
            stock, pass_ = _STOCK_OPS[op_type]
            # The operands are x, w (and dy) in every op's input order (`_STOCK_OPS`).
            x, w, *dy = [_static_shape(a) for a in args]
            if stock_conv.stock_wins(pass_, dtype, x, w, dy[0] if dy else None, attrs):
                stock_attrs = {k: v for k, v in attrs.items() if k != "Tacc"}
                return stock, stock_attrs, True
    return _CONV_OPS[op_type], attrs, False


def _conv(op_type: str, attrs: dict, args: list, dtype: tf.DType | None = None) -> tf.Tensor:
    """`op_type` on `args` (in its input order), run by the op `_choose` picks."""
    fn, kwargs, stock = _choose(op_type, attrs, args, dtype)
    y = fn(*args, **kwargs)
    if stock and op_type == "Fp16Conv2D":
        n, h, w, c = _static_shape(args[0])
        if n is None:
            # TensorFlow's oneDNN Conv2D returns an empty batch in its input's shape
            # [0, H, W, C] (TF 2.21): a reshape to [N, P, Q, K] gives it the output's and
            # costs nothing otherwise. N is counted from x's size, not read from its
            # shape, which Grappler would find equal to y's and drop the reshape.
            n = tf.size(args[0], out_type=tf.int64) // (h * w * c)
            pqk = tf.constant(y.shape[1:].as_list(), tf.int64)
            y = tf.reshape(y, tf.concat([[n], pqk], 0))
    return y


# The eager fast path. An eager call of `conv2d` or its backprops whose operands are all eager
# tensors is known by its signature (`_eager_call`: the op, each float operand's dtype and shape,
# the sizes operand's value, the arguments as `_exact_key` tells them apart). Once a call has
# passed every check and its op has run, that op (`_choose`) with its attrs is kept for the
# signature, and the next call with it runs the op straight away: the same op, attrs and
# operands, so the same result or error. Python between two eager ops is costly: on a 2-core
# machine it runs while the op's pool threads are still busy or spinning and with caches full of
# the op's data (measured on the 16x32x32x16 * 3x3x16x16 float32 wgrad, Intel Xeon: the checked
# path added 130-160 us to TensorFlow's op of about 480 us when each call followed another, where
# the same Python takes about 15 us in a tight loop; each extra function call or environment
# read about 5 us). Nothing else the choice depends on changes in a process once an op has run:
# a visible GPU, oneDNN, and oneDNN's floating-point math mode once oneDNN has
# run (`stock_conv.onednn_ran`); Grappler's rewrites concern graphs only.
_EAGER_PLANS: dict = {}
_EAGER_PLANS_SIZE = 256
_INT32_ENUM = tf.int32.as_datatype_enum


_TWO_OPERANDS = object()  # `_eager_call`'s z for the forward, which has two


def _eager_call(
    op_type: str, args: tuple, name, x, y, z=_TWO_OPERANDS, sizes_at: int = -1
) -> tuple:
    """The eager fast path of a call on operands x, y (and z) in the op's input order, the one at
    `sizes_at` its sizes operand: (the call's signature, the op kept for it run on the
    operands), the result None where no op is kept yet (see `_EAGER_PLANS`), the signature None
    where the call takes the checked path every time: an operand other than an eager tensor, a
    sizes operand other than an int32 [4], a name other than a str or None, arguments
    `_exact_key` cannot key, a function being traced (which may capture eager tensors). One
    function without comprehensions and one flat key: between two ops each Python frame costs
    several us here, and so does each call into TensorFlow's Python (`tf.executing_eagerly` is
    three: its context's thread-local flag is read here as the generated op functions read it)."""
    ctx = _tfe_context._context  # None until TensorFlow's context exists
    if (
        type(x) is not _EagerTensor
        or type(y) is not _EagerTensor
        or (z is not _TWO_OPERANDS and type(z) is not _EagerTensor)
        or (name is not None and type(name) is not str)
        or ctx is None
        or not ctx._thread_local_data.is_eager
    ):
        return None, None
    # The arguments as spelled where that is the usual spelling (an int stride, str padding,
    # data_format and accumulation, dilations None or an int: no two such tuples that compare
    # equal are treated differently), else `_exact_key` of them.
    strides, padding, data_format, dilations, accumulation = args
    if not (
        type(strides) is int
        and type(padding) is str
        and type(data_format) is str
        and (dilations is None or type(dilations) is int)
        and type(accumulation) is str
    ):
        args = _exact_key(args)
        if args is None:
            return None, None
    if sizes_at < 0:
        key = (
            op_type,
            x._datatype_enum(),
            x._shape_tuple(),
            y._datatype_enum(),
            y._shape_tuple(),
            args,
        )
        operands = (x, y)
    else:
        operands = (x, y, z)
        sizes = operands[sizes_at]
        if sizes._datatype_enum() != _INT32_ENUM or sizes._shape_tuple() != (4,):
            return None, None
        other = operands[1 - sizes_at]  # the float operand beside dy
        key = (
            op_type,
            tuple(sizes.numpy().tolist()),
            other._datatype_enum(),
            other._shape_tuple(),
            z._datatype_enum(),
            z._shape_tuple(),
            args,
        )
    plan = _EAGER_PLANS.get(key)
    if plan is None:
        return key, None
    return key, plan(*operands)


def _operand(name: str, value):
    """A float operand for the op function: an eager float16/float32 NumPy array as it is (the
    op's fast path wraps its buffer, where `tf.convert_to_tensor` would copy it first), anything
    else through `tf.convert_to_tensor` (an eager tensor as it is: it would return it, in about
    1.5 us)."""
    if type(value) is _EagerTensor and tf.executing_eagerly():
        return value
    if (
        isinstance(value, np.ndarray)
        and value.dtype in (np.float16, np.float32)
        and value.dtype.isnative
        and tf.executing_eagerly()
    ):
        return value
    return tf.convert_to_tensor(value, name=name)


def _run_conv_op(
    op_type: str, name: str | None, attrs: dict, stock: bool = True, key=None, **operands
) -> tf.Tensor:
    """Builds `op_type` (not inside XLA) on `operands`, given in the op's input order, in a name
    scope: a `*_sizes` operand is an int32 [4] (`_sizes`), the others are tensors of one float
    dtype (`_check_dtypes`, which names the first). Float32 with Tacc=float may run TensorFlow's
    own op instead (`_conv`) unless `stock` is False. `key`: the call's signature
    (`_eager_call`), under which the op that ran is kept for the next eager call with it."""
    check_not_in_xla(op_type)
    if name is not None and not isinstance(name, str):  # as tf.name_scope would, in every mode
        raise ValueError(f"name must be a string or None, got {_shown(name)}")
    # An eager op has no name, and a name scope around its call costs about 25 us.
    scope = contextlib.nullcontext() if tf.executing_eagerly() else tf.name_scope(name or op_type)
    with scope:
        tensors = {k: _operand(k, v) for k, v in operands.items() if not k.endswith("_sizes")}
        dtype = _check_dtypes(attrs["Tacc"], **tensors)
        args = [_sizes(k, v) if k.endswith("_sizes") else tensors[k] for k, v in operands.items()]
        if not stock:
            return _CONV_OPS[op_type](*args, **attrs)
        if key is None:
            return _conv(op_type, attrs, args, dtype)
        fn, kwargs, is_stock = _choose(op_type, attrs, args, dtype)
        y = fn(*args, **kwargs)
        # Kept once it has run, which an asynchronous op has not (one that raises keeps nothing);
        # the operands `_eager_call` accepts reach the op as they are (eager tensors, int32
        # sizes), as on the fast path.
        if not tf.config.experimental.get_synchronous_execution():
            return y
        if is_stock and stock_conv.onednn_runs_float32_convs():
            # TensorFlow's oneDNN op returns an empty result without oneDNN: only a problem with
            # elements has made oneDNN read (and keep) its math mode. Otherwise nothing is kept,
            # so that every call asks the mode again.
            if 0 in y._shape_tuple() or any(0 in t._shape_tuple() for t in tensors.values()):
                return y
            if not stock_conv.onednn_ran():  # its floating-point math mode strict for good?
                return y
        if len(_EAGER_PLANS) >= _EAGER_PLANS_SIZE:
            _EAGER_PLANS.clear()
        _EAGER_PLANS[key] = functools.partial(fn, **kwargs)
        return y


def conv2d(
    input,
    filters,
    strides: IntOrList,
    padding,
    data_format: str = "NHWC",
    dilations: IntOrList | None = None,
    accumulation="float16",
    name: str | None = None,
) -> tf.Tensor:
    """2-D convolution like `tf.nn.conv2d`, with the accumulation precision chosen per call.

    Args:
      input: 4-D float16 or float32 tensor, [N, H, W, C] for NHWC or [N, C, H, W] for NCHW.
      filters: same dtype as `input`, HWIO [KH, KW, C / groups, K]. When C is a multiple
        `groups` of the filter's in-channels, the convolution is grouped (K divisible by groups).
      strides: int or list of 1, 2 or 4 ints (4: in data_format order, 1 at batch and channel).
      padding: 'SAME', 'VALID' (any case, as Keras writes them: 'same' too), or explicit
        [[0, 0], [top, bottom], [left, right], [0, 0]] pairs in data_format order (elements;
        padded positions are zeros that take part in the sum).
      data_format: 'NHWC' (default) or 'NCHW' (any case).
      dilations: int or list of 1, 2 or 4 ints; default 1.
      accumulation: 'float16' (default; true fp16 accumulation, needs float16 inputs) or
        'float32'; or tf.float16/tf.float32, np.float16/np.float32. Nothing else (see
        `accumulation_dtype`).
      name: op name.

    Returns:
      Tensor of the input dtype, [N, P, Q, K] (NHWC) or [N, K, P, Q] (NCHW) with P, Q as in
      `tf.nn.conv2d`: VALID P = floor((H - (KH-1)*dh - 1) / sh) + 1, SAME P = ceil(H / sh).

    Numerics: see the module docstring. With accumulation='float16' a partial sum that reaches
    65520 in magnitude becomes inf (binary16 max is 65504; IEEE 754-2019 7.4), and once the
    accumulator is ≥ 2048 adding a term below 1 may leave it unchanged (spacing 2 there).

    Raises:
      ValueError: malformed `strides`, `dilations`, `padding`, `data_format` or `accumulation`,
        dtypes other than float16/float32 or differing between `input` and `filters`,
        accumulation float16 with float32 inputs (in graph mode also the shape/attr errors
        below, when shapes are known).
      tf.errors.InvalidArgumentError: ranks other than 4, channel mismatch, non-positive strides
        or dilations, strides/dilations other than 1 on batch or channel, negative or misplaced
        explicit paddings, output size ≤ 0, element counts that overflow.
    """
    args = (strides, padding, data_format, dilations, accumulation)
    key, y = _eager_call("Fp16Conv2D", args, name, input, filters)
    if y is not None:
        return y
    attrs = _conv_attrs(*args)
    return _run_conv_op("Fp16Conv2D", name, attrs, key=key, input=input, filters=filters)


def _attrs_of(op) -> dict:
    """`op`'s conv attrs as `_conv_attrs` spells them (string attrs as str, not bytes)."""
    attrs = {
        k: op.get_attr(k)
        for k in ("Tacc", "strides", "padding", "explicit_paddings", "data_format", "dilations")
    }
    return {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}


def _size_values(name: str, sizes) -> np.ndarray:
    """`sizes` (not a tensor) as 4 integers in [0, 2^31 - 1], or a ValueError naming `name`.
    A list or tuple must hold ints (no bools, which NumPy would take as 0 and 1), shown as given."""
    if isinstance(sizes, (list, tuple)):
        if len(sizes) != 4 or not all(_is_int(v) for v in sizes):
            raise ValueError(f"{name} must be 4 integers (a 1-D int32 tensor), got {_shown(sizes)}")
        listed = [int(v) for v in sizes]
        if min(listed) < 0 or max(listed) > _INT32_MAX:
            raise ValueError(f"{name} must be 4 integers in [0, 2^31 - 1], got {_shown(listed)}")
        return np.array(listed, np.int64)
    values = np.asarray(sizes)
    if values.dtype.kind not in "iu" or values.shape != (4,):
        shown = values.tolist() if values.dtype != object else sizes
        raise ValueError(f"{name} must be 4 integers (a 1-D int32 tensor), got {_shown(shown)}")
    listed = values.tolist()  # Python ints: cheaper than NumPy's reductions for 4 values
    if min(listed) < 0 or max(listed) > _INT32_MAX:
        raise ValueError(f"{name} must be 4 integers in [0, 2^31 - 1], got {_shown(listed)}")
    return values


def _sizes(name: str, sizes) -> tf.Tensor:
    """`input_sizes` / `filter_sizes` as int32 [4], like tf.nn.conv2d_backprop_*: values known when
    the graph is built are checked here (4 non-negative integers below 2^31), never wrapped."""
    if type(sizes) is _EagerTensor and sizes.dtype is tf.int32 and tf.executing_eagerly():
        _size_values(name, sizes.numpy())  # checked; an eager tensor is its value already
        return sizes
    if isinstance(sizes, (list, tuple)) and any(tf.is_tensor(v) for v in sizes):
        # [tf.shape(dy)[0], 4, 4, 1], as tf.nn.conv2d_transpose takes it: one int64 tensor (so
        # that nothing wraps), checked below as any sizes tensor. The ints are checked here,
        # the tensors must be int32/int64 scalars.
        bad = len(sizes) != 4 or any(
            (tf.is_tensor(v) and (v.dtype not in (tf.int32, tf.int64) or v.shape.rank != 0))
            or (not tf.is_tensor(v) and not (_is_int(v) and 0 <= int(v) <= _INT32_MAX))
            for v in sizes
        )
        if bad:
            raise ValueError(
                f"{name} must be 4 integers in [0, 2^31 - 1] (ints or int32/int64 scalar "
                f"tensors), got {_shown(sizes)}"
            )
        sizes = tf.stack(
            [
                tf.cast(v, tf.int64) if tf.is_tensor(v) else tf.constant(int(v), tf.int64)
                for v in sizes
            ]
        )
    if not tf.is_tensor(sizes):
        return tf.constant(_size_values(name, sizes), tf.int32, name=name)
    if sizes.dtype not in (tf.int32, tf.int64):
        raise ValueError(f"{name} must be an int32 (or int64) tensor, got dtype {sizes.dtype.name}")
    static = tf.get_static_value(sizes)
    if static is not None:
        return tf.constant(_size_values(name, static), tf.int32, name=name)
    if sizes.dtype == tf.int32:
        return sizes
    # Unknown int64 values: refuse at run time rather than wrap (either way).
    checks = [
        tf.debugging.assert_less_equal(
            sizes, tf.constant(_INT32_MAX, tf.int64), message=f"{name} must be below 2^31"
        ),
        tf.debugging.assert_non_negative(sizes, message=f"{name} must be non-negative"),
    ]
    with tf.control_dependencies(checks):
        return tf.cast(sizes, tf.int32)


# NumPy's float16 and float32 as tf.DTypes, looked up without tf.as_dtype (a few us a call).
_FLOAT_DTYPES = {np.dtype(np.float16): tf.float16, np.dtype(np.float32): tf.float32}


def _check_dtypes(tacc: tf.DType, **tensors) -> tf.DType:
    """All tensors float16 or float32 and of one dtype, float16 where `tacc` is float16 (the
    op's rule "Tacc=half requires T=half", raised here as a ValueError); returns the dtype."""
    dtype = None
    for name, t in tensors.items():
        t_dtype = t.dtype  # a tensor's, or a NumPy array's (`_operand`)
        t_dtype = _FLOAT_DTYPES.get(t_dtype) if type(t_dtype) is not tf.DType else t_dtype
        if t_dtype is None:
            t_dtype = tf.as_dtype(t.dtype)
        # Identity first: DTypes are interned, and DType.__eq__ costs about 0.5 us.
        if t_dtype is not tf.float16 and t_dtype is not tf.float32:
            if t_dtype not in (tf.float16, tf.float32):
                raise ValueError(f"{name} must be float16 or float32, got dtype {t_dtype.name}")
        if dtype is not None and t_dtype is not dtype and t_dtype != dtype:
            first = next(iter(tensors))
            raise ValueError(
                f"{name} must have the dtype of {first} ({dtype.name}), got {t_dtype.name}"
            )
        dtype = t_dtype
    if tacc is not dtype and tacc == tf.float16 and dtype == tf.float32:
        raise ValueError(
            "accumulation='float16' needs float16 inputs (got float32): cast them to "
            "float16, or use accumulation='float32'"
        )
    return dtype


def conv2d_backprop_input(
    input_sizes,
    filters,
    out_backprop,
    strides: IntOrList,
    padding,
    data_format: str = "NHWC",
    dilations: IntOrList | None = None,
    accumulation="float16",
    name: str | None = None,
) -> tf.Tensor:
    """Gradient of `conv2d` with respect to its input (dgrad), like `tf.nn.conv2d_backprop_input`.

    Args:
      input_sizes: int32 [4], the input's shape in data_format order.
      filters: HWIO [KH, KW, C / groups, K], float16 or float32.
      out_backprop: the gradient of the convolution's output, its shape in data_format order.
      strides, padding, data_format, dilations, accumulation: as in `conv2d`.

    Returns:
      Tensor of shape `input_sizes` and the filters' dtype.

    Numerics: as `conv2d`; the CPU reduction order for accumulation='float16' is
    (kh, kw, out_channel) ascending over the output positions that touch each input element.

    Raises:
      ValueError / tf.errors.InvalidArgumentError: as `conv2d`, and when `input_sizes` is not 4
        non-negative ints or `out_backprop`'s shape is not the convolution's output shape.
    """
    args = (strides, padding, data_format, dilations, accumulation)
    operands = (input_sizes, filters, out_backprop)
    key, y = _eager_call("Fp16Conv2DBackpropInput", args, name, *operands, sizes_at=0)
    if y is not None:
        return y
    attrs = _conv_attrs(*args)
    return _run_conv_op(
        "Fp16Conv2DBackpropInput",
        name,
        attrs,
        key=key,
        input_sizes=input_sizes,
        filters=filters,
        out_backprop=out_backprop,
    )


def conv2d_backprop_filter(
    input,
    filter_sizes,
    out_backprop,
    strides: IntOrList,
    padding,
    data_format: str = "NHWC",
    dilations: IntOrList | None = None,
    accumulation="float16",
    name: str | None = None,
) -> tf.Tensor:
    """Gradient of `conv2d` with respect to its filters (wgrad).

    Like `tf.nn.conv2d_backprop_filter`.

    Args:
      input: the convolution's input, 4-D in data_format order, float16 or float32.
      filter_sizes: int32 [4], HWIO [KH, KW, C / groups, K].
      out_backprop: the gradient of the convolution's output, its shape in data_format order.
      strides, padding, data_format, dilations, accumulation: as in `conv2d`.

    Returns:
      Tensor of shape `filter_sizes` and the input's dtype.

    Numerics: as `conv2d`; the CPU reduction order for accumulation='float16' is
    (batch, out_row, out_col) ascending: a float16 accumulator over N*P*Q terms stagnates
    once it reaches 2048 when the terms are below 1 (see README "Numerics").

    Raises:
      ValueError / tf.errors.InvalidArgumentError: as `conv2d_backprop_input`, for `filter_sizes`.
    """
    args = (strides, padding, data_format, dilations, accumulation)
    operands = (input, filter_sizes, out_backprop)
    key, y = _eager_call("Fp16Conv2DBackpropFilter", args, name, *operands, sizes_at=1)
    if y is not None:
        return y
    attrs = _conv_attrs(*args)
    return _run_conv_op(
        "Fp16Conv2DBackpropFilter",
        name,
        attrs,
        key=key,
        input=input,
        filter_sizes=filter_sizes,
        out_backprop=out_backprop,
    )


# Gradients, as TensorFlow's nn_grad.py registers them for Conv2D and its backprops, with the
# forward op's attrs (Tacc included) passed on, so training uses the same accumulation.
@tf.RegisterGradient("Fp16Conv2D")
def _fp16_conv2d_grad(op, grad):
    a = _attrs_of(op)
    x, w = op.inputs
    return [
        _conv("Fp16Conv2DBackpropInput", a, [tf.shape(x), w, grad]),
        _conv("Fp16Conv2DBackpropFilter", a, [x, tf.shape(w), grad]),
    ]


@tf.RegisterGradient("Fp16Conv2DBackpropInput")
def _fp16_conv2d_backprop_input_grad(op, grad):
    a = _attrs_of(op)
    _, w, dy = op.inputs
    return [
        None,
        _conv("Fp16Conv2DBackpropFilter", a, [grad, tf.shape(w), dy]),
        _conv("Fp16Conv2D", a, [grad, w]),
    ]


@tf.RegisterGradient("Fp16Conv2DBackpropFilter")
def _fp16_conv2d_backprop_filter_grad(op, grad):
    a = _attrs_of(op)
    x, _, dy = op.inputs
    return [
        _conv("Fp16Conv2DBackpropInput", a, [tf.shape(x), grad, dy]),
        None,
        _conv("Fp16Conv2D", a, [x, grad]),
    ]


def depthwise_conv2d(
    input,
    filter,
    strides: IntOrList,
    padding: str,
    dilations: IntOrList | None = None,
    accumulation="float16",
    name: str | None = None,
    bias=None,
) -> tf.Tensor:
    """Depthwise convolution like `tf.nn.depthwise_conv2d` (NHWC), accumulation chosen per call.

    Args:
      input: 4-D float16 or float32 tensor [N, H, W, C].
      filter: same dtype, [KH, KW, C, M] (M the depth multiplier).
      strides: int or list of 1, 2 or 4 ints (4: NHWC order, 1 at batch and channel).
      padding: 'SAME' or 'VALID', any case (tf.nn.conv2d's output size and padding rules).
      dilations: int or list of 1, 2 or 4 ints; default 1.
      accumulation: 'float16' (default; needs float16 inputs) or 'float32'.
      name: op name.
      bias: optional 1-D tensor of the same dtype, [C*M]: added to each output channel in the
        op, with the bits of `tf.nn.bias_add` on the result (the sum in float32, rounded once to
        the dtype: TensorFlow's float16 BiasAdd computes in float32 too); its gradient is
        TensorFlow's BiasAddGrad.

    Returns:
      Tensor of the input dtype, [N, P, Q, C*M]; channel c*M + m is input channel c convolved
      with filter[:, :, c, m] (tf.nn.depthwise_conv2d's order), plus bias[c*M + m].

    Numerics: one accumulator per output over (kh, kw) ascending, as the grouped `conv2d` with
    groups = C and filter [KH, KW, 1, C*M] (same bits); the CPU kernel vectorizes over the C*M
    channels. Gradients: the grouped Fp16Conv2DBackpropInput (over (kh, kw, m)) and
    Fp16Conv2DBackpropFilter (over (n, p, q)) with the same accumulation.

    Raises:
      ValueError: malformed `strides`, `dilations`, `padding` or `accumulation`, dtypes other than
        float16/float32 or differing.
      tf.errors.InvalidArgumentError: ranks other than 4, filter in-channels other than C,
        KH or KW of 0, non-positive strides or dilations, a VALID input smaller than the
        effective filter, a bias not of shape [C*M].

    Zero N, C or M (or H, W with SAME) give an empty output, the shape of TF's shape function
    for tf.nn.depthwise_conv2d (size rules: cc/kernels/conv_shape.h); its gradients are zeros.
    """
    tacc = accumulation_dtype(accumulation)
    if not isinstance(padding, str) or padding.upper() not in ("SAME", "VALID"):
        raise ValueError(f"padding must be 'SAME' or 'VALID', got {_shown(padding)}")
    strides_attr = _window_attr("strides", strides, "NHWC")
    dilations_attr = _window_attr("dilations", 1 if dilations is None else dilations, "NHWC")
    check_not_in_xla("Fp16DepthwiseConv2D")
    if name is not None and not isinstance(name, str):
        raise ValueError(f"name must be a string or None, got {_shown(name)}")
    with tf.name_scope(name or "Fp16DepthwiseConv2D"):
        input = tf.convert_to_tensor(input, name="input")
        filter = tf.convert_to_tensor(filter, name="filter")
        if bias is None:
            _check_dtypes(tacc, input=input, filter=filter)
        else:
            # Python numbers take the input's dtype (as in tf.nn.bias_add); arrays keep theirs.
            py = isinstance(bias, (list, tuple, int, float))
            bias = tf.convert_to_tensor(bias, dtype=input.dtype if py else None, name="bias")
            _check_dtypes(tacc, input=input, filter=filter, bias=bias)
        return _depthwise_op(input, filter, bias, tacc, strides_attr, padding, dilations_attr)


def _depthwise_op(input, filter, bias, tacc, strides, padding, dilations) -> tf.Tensor:
    """Fp16DepthwiseConv2D with checked arguments (`depthwise_conv2d`'s; attrs as lists of 4).
    Float32 operands with tacc float16 are accepted here: the op rounds them to float16 before
    the first step and returns the float16 sum as float32, what casts around a float16 op give
    (the layers of a float32 model use this; `depthwise_conv2d` asks its callers to cast)."""
    return _ops.fp16_depthwise_conv2d(
        input,
        filter,
        [] if bias is None else [bias],
        Tacc=tacc,
        strides=strides,
        padding=padding.upper(),
        dilations=dilations,
    )


@tf.RegisterGradient("Fp16DepthwiseConv2D")
def _fp16_depthwise_conv2d_grad(op, grad):
    # The grouped convolution with groups = C is the same sum: its dgrad and wgrad ops give the
    # gradients, with the forward op's Tacc, strides, padding and dilations. The bias's is
    # BiasAddGrad's, as after tf.nn.bias_add. With float32 operands and Tacc=half (the operands
    # rounded to float16 by the op) the gradients are those of the float16 op between casts: the
    # output gradient rounded to float16, the float16 gradients widened (a Cast's gradient is the
    # cast back). Where a higher-order gradient reaches an operand by two paths, the casts'
    # composition adds the two in float16 at the cast's output, this in float32 (one rounding
    # less).
    x, w = op.inputs[:2]
    bias_grads = [tf.raw_ops.BiasAddGrad(out_backprop=grad)] if len(op.inputs) > 2 else []
    if x.dtype == tf.float32 and op.get_attr("Tacc") == tf.float16:
        dx, dw = _fp16_depthwise_conv2d_grads(
            op, tf.cast(x, tf.float16), tf.cast(w, tf.float16), tf.cast(grad, tf.float16)
        )
        return [tf.cast(dx, tf.float32), tf.cast(dw, tf.float32)] + bias_grads
    return _fp16_depthwise_conv2d_grads(op, x, w, grad) + bias_grads


def _fp16_depthwise_conv2d_grads(op, x, w, grad):
    """[dx, dw] of Fp16DepthwiseConv2D for the operands x, w and output gradient grad."""
    shape = tf.shape(w)
    grouped = tf.reshape(w, tf.stack([shape[0], shape[1], 1, shape[2] * shape[3]]))
    a = dict(
        Tacc=op.get_attr("Tacc"),
        strides=op.get_attr("strides"),
        padding=op.get_attr("padding"),
        explicit_paddings=[],
        data_format="NHWC",
        dilations=op.get_attr("dilations"),
    )

    def zeros():
        return [tf.zeros_like(x), tf.zeros_like(w)]

    def grads():
        dx = _ops.fp16_conv2d_backprop_input(tf.shape(x), grouped, grad, **a)
        dw = _ops.fp16_conv2d_backprop_filter(x, tf.shape(grouped), grad, **a)
        return [dx, tf.reshape(dw, shape)]

    # An empty output (zero N, P, Q, C or M) has all-zero gradients; the grouped ops reject
    # C = 0 (no groups), so they are not called then: statically when a size is known to be 0,
    # otherwise through tf.cond on the element count.
    if grad.shape.rank is not None and 0 in grad.shape.as_list():
        return zeros()
    if grad.shape.is_fully_defined():
        return grads()
    return tf.cond(tf.size(grad, out_type=tf.int64) > 0, grads, zeros)
