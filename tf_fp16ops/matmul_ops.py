"""Matrix products with the accumulation precision chosen per call: the Fp16MatMul op, its
gradients, and `einsum` lowered onto it.

Numerics contract (README "Numerics"): one accumulator per output element, starting at +0, over
the contraction index k ascending.
  accumulation="float32": each step one binary32 FMA; the result is rounded once to the input
    dtype.
  accumulation="float16" (inputs must be float16): each step is acc = round_fp16(x*y + acc),
    the exact product and one round-to-nearest-even (the semantics of CUDA's __hfma, CUDA Math
    API "Half Precision Intrinsics"), on every CPU instruction-set path. Bit-exact against the
    NumPy reference of tests/support/reference.py (`batch_matmul`).
Shapes and broadcasting are those of `tf.linalg.matmul` on rank >= 2 tensors (TensorFlow's
BatchMatMulV2): x [..., M, K], y [..., K, N] -> [broadcast batch..., M, N].
"""

from __future__ import annotations

import string

import numpy as np
import tensorflow as tf

from tf_fp16ops._platform import library as _library
from tf_fp16ops._platform.xla import check_not_in_xla
from tf_fp16ops.ops import _check_dtypes, accumulation_dtype
from tf_fp16ops.ops import _shown as _shown_value

_ops = _library.load()


def _flag(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be a bool, got {value!r}")
    return bool(value)


def matmul(
    a,
    b,
    transpose_a: bool = False,
    transpose_b: bool = False,
    adjoint_a: bool = False,
    adjoint_b: bool = False,
    accumulation="float16",
    name: str | None = None,
) -> tf.Tensor:
    """Matrix product like `tf.linalg.matmul` (rank >= 2, batch dimensions broadcast), with the
    accumulation precision chosen per call.

    Args:
      a: float16 or float32 tensor [..., M, K] ([..., K, M] with transpose_a or adjoint_a).
      b: the same dtype, [..., K, N] ([..., N, K] with transpose_b or adjoint_b). The batch
        dimensions (all but the last two) broadcast as NumPy's (equal, or one of them 1).
      transpose_a, transpose_b, adjoint_a, adjoint_b: as in `tf.linalg.matmul` (for real dtypes
        adjoint and transpose are the same; at most one of each pair may be set).
      accumulation: 'float16' (default; true fp16 accumulation, needs float16 inputs) or
        'float32'; also tf.float16/tf.float32 and np.float16/np.float32 (nothing else: 'half',
        'float' or 'fp16' are a ValueError, see `tf_fp16ops.ops.accumulation_dtype`).
      name: op name.

    Returns:
      Tensor of the input dtype, [broadcast batch..., M, N]. K = 0 gives zeros (+0, the empty
      sum); a zero M, N or batch dimension gives an empty output.

    Numerics: see the module docstring; the reduction runs over k = 0, ..., K-1. With
    accumulation='float16' a partial sum of magnitude >= 65520 becomes inf (binary16 max 65504,
    IEEE 754-2019 7.4) and once the accumulator is >= 2048 a term below 1 may leave it unchanged.
    Gradients (registered for the op, same accumulation): da = g @ b^T reduces over n, db =
    a^T @ g over m; when `b` is 2-D and `a` has batch dimensions (a Dense/EinsumDense kernel),
    db is one chain over all rows of the batch (batch-major, then m). Other broadcast batch
    dimensions are summed afterwards by tf.reduce_sum.

    Raises:
      ValueError: non-bool flags, both of a transpose/adjoint pair set, dtypes other than
        float16/float32 or differing, a bad `accumulation`; at graph build also the shape errors
        below when the shapes are known.
      tf.errors.InvalidArgumentError: rank < 2, inner dimensions that differ, batch dimensions
        that do not broadcast, an output of more than 2^63 - 1 elements, accumulation float16
        with float32 inputs.
    """
    ta, tb = _flag("transpose_a", transpose_a), _flag("transpose_b", transpose_b)
    ja, jb = _flag("adjoint_a", adjoint_a), _flag("adjoint_b", adjoint_b)
    if ta and ja:
        raise ValueError("only one of transpose_a and adjoint_a can be True")
    if tb and jb:
        raise ValueError("only one of transpose_b and adjoint_b can be True")
    tacc = accumulation_dtype(accumulation)
    check_not_in_xla("Fp16MatMul")
    if name is not None and not isinstance(name, str):  # as conv2d's, naming the value
        raise ValueError(f"name must be a string or None, got {_shown_value(name)}")
    with tf.name_scope(name or "Fp16MatMul"):
        a = tf.convert_to_tensor(a, name="a")
        b = tf.convert_to_tensor(b, name="b")
        _check_dtypes(tacc, a=a, b=b)
        for arg, t in (("a", a), ("b", b)):
            if t.shape.rank is not None and t.shape.rank < 2:
                raise ValueError(f"{arg} must have rank >= 2, got shape {t.shape}")
        return _ops.fp16_mat_mul(a, b, Tacc=tacc, adj_x=ta or ja, adj_y=tb or jb)


def _reduce_to(grad: tf.Tensor, shape: tf.Tensor, like: tf.Tensor) -> tf.Tensor:
    """Sums a broadcast gradient back to an operand's shape (batch dimensions only)."""
    if like.shape.is_fully_defined() and grad.shape.is_fully_defined():
        if like.shape == grad.shape:
            return grad
    out_batch = tf.shape(grad)[:-2]
    in_batch = shape[:-2]
    _, axes = tf.raw_ops.BroadcastGradientArgs(s0=out_batch, s1=in_batch)
    return tf.reshape(tf.reduce_sum(grad, axes), shape)


@tf.RegisterGradient("Fp16MatMul")
def _fp16_matmul_grad(op, grad):
    """BatchMatMulV2's gradient (tensorflow/python/ops/math_grad.py) on Fp16MatMul, with the
    forward op's Tacc."""
    x, y = op.inputs
    adj_x, adj_y = op.get_attr("adj_x"), op.get_attr("adj_y")
    tacc = op.get_attr("Tacc")

    def mm(a, b, ax=False, ay=False):
        return _ops.fp16_mat_mul(a, b, Tacc=tacc, adj_x=ax, adj_y=ay)

    if not adj_x:
        gx = mm(grad, y, ay=True) if not adj_y else mm(grad, y)
    else:
        gx = mm(y, grad, ay=True) if not adj_y else mm(y, grad, ax=True, ay=True)
    # dy: one chain over every row when y is 2-D and x has batch dimensions (not adj_x).
    fold = y.shape.rank == 2 and x.shape.rank is not None and x.shape.rank > 2 and not adj_x
    if fold:
        x2 = tf.reshape(x, tf.stack([-1, tf.shape(x)[-1]]))
        g2 = tf.reshape(grad, tf.stack([-1, tf.shape(grad)[-1]]))
        gy = mm(g2, x2, ax=True) if adj_y else mm(x2, g2, ax=True)
    elif not adj_x:
        gy = mm(grad, x, ax=True) if adj_y else mm(x, grad, ax=True)
    else:
        gy = mm(grad, x, ax=True, ay=True) if adj_y else mm(x, grad)
    gx = _reduce_to(gx, tf.shape(x), x)
    if not fold:
        gy = _reduce_to(gy, tf.shape(y), y)
    return [gx, gy]


# ------------------------------------------------------------------------------------ einsum
_ELLIPSIS = "..."


def _parse(equation: str, ranks: tuple[int | None, int | None]) -> tuple[list, list, list]:
    """Splits 'lhs,rhs->out' into the labels of a, b and the output: each letter written, and for
    '...' one int per dimension it covers (0, 1, ..., right-aligned across the operands, as NumPy
    aligns them), so an equation of any rank has labels enough and the ints never meet a letter.

    Raises:
      ValueError: an equation outside the supported form, or ranks that do not fit it.
    """
    if not isinstance(equation, str):
        raise ValueError(f"equation must be a string, got {equation!r}")
    eq = equation.replace(" ", "")
    if "->" not in eq or eq.count("->") != 1:
        raise ValueError(f"equation must have the explicit form 'lhs,rhs->out', got {equation!r}")
    inputs, out = eq.split("->")
    terms = inputs.split(",")
    if len(terms) != 2:
        raise ValueError(f"equation must have exactly two operands, got {equation!r}")
    for term in [*terms, out]:
        rest = term.replace(_ELLIPSIS, "", 1)
        if not all(c in string.ascii_letters for c in rest):
            raise ValueError(f"equation labels must be letters (and one '...'), got {equation!r}")
    spans = []
    for arg, term, rank in zip(("a", "b"), terms, ranks, strict=True):
        n = len(term.replace(_ELLIPSIS, ""))
        if _ELLIPSIS in term:
            if rank is None:
                raise ValueError(
                    f"operand {arg} of {equation!r} has unknown rank; its '...' needs a known rank"
                )
            if rank < n:
                raise ValueError(f"operand {term!r} of {equation!r} has rank {rank} < {n}")
            spans.append(rank - n)
        else:
            if rank is not None and rank != n:
                raise ValueError(f"operand {term!r} of {equation!r} must have rank {n}, got {rank}")
            spans.append(0)
    width = max(spans)

    def expand(term: str, span: int) -> list:
        if _ELLIPSIS not in term:
            return list(term)
        head, tail = term.split(_ELLIPSIS)
        return [*head, *range(width - span, width), *tail]

    lhs, rhs = (expand(t, s) for t, s in zip(terms, spans, strict=True))
    if _ELLIPSIS not in out and width and any(_ELLIPSIS in t for t in terms):
        raise ValueError(f"'...' of the operands must appear in the output of {equation!r}")
    return lhs, rhs, expand(out, width)


def equation_problem(equation) -> str | None:
    """Why `einsum` does not take `equation` (checked without operands: ranks are not known), or
    None when it does."""
    try:
        # Without operands, '...' stands for no labels: the label rules are the same.
        eq = equation.replace("...", "") if isinstance(equation, str) else equation
        lhs, rhs, out = _parse(eq, (None, None))
        _check_labels(equation, lhs, rhs, out)
    except ValueError as e:
        return str(e)
    return None


def _check_labels(equation, lhs, rhs, out) -> None:
    """The label rules of `einsum` on parsed labels (ints, the '...' dimensions, always obey
    them: each is in the output and in every operand whose '...' covers it)."""
    for term in (lhs, rhs, out):
        for c in term:
            if term.count(c) > 1:
                raise ValueError(f"a label repeats within one term of {equation!r}: {c!r}")
    for c in out:
        if c not in lhs and c not in rhs:
            raise ValueError(f"output label {c!r} of {equation!r} is in no operand")
    for c in set(lhs) ^ set(rhs):
        if c not in out:
            raise ValueError(
                f"label {c!r} of {equation!r} is summed within one operand only (not supported)"
            )


def _with_rank(t: tf.Tensor, arg: str, rank: int, equation: str) -> tf.Tensor:
    """`t` with static rank `rank`: t itself when its rank is known (`_parse` checked it), else t
    after a run-time check of its rank (InvalidArgumentError naming the operand)."""
    if t.shape.rank is not None:
        return t
    check = tf.debugging.assert_rank(
        t, rank, message=f"einsum {_run_time(equation)}: operand {arg} must have rank {rank}"
    )
    with tf.control_dependencies([check] if check is not None else []):
        t = tf.identity(t)
    t.set_shape([None] * rank)
    return t


def _dims(t: tf.Tensor) -> list:
    """Each dimension as a Python int when static, else a scalar int32 tensor."""
    dyn = None
    out = []
    for i, d in enumerate(t.shape.as_list()):
        if d is None:
            dyn = tf.shape(t) if dyn is None else dyn
            out.append(dyn[i])
        else:
            out.append(d)
    return out


def _prod(values) -> object:
    p = 1
    for v in values:
        p = p * v
    return p


def _shape(values) -> object:
    if all(isinstance(v, int) for v in values):
        return list(values)
    return tf.stack([tf.cast(v, tf.int32) for v in values])


def _vector(values) -> tf.Tensor:
    """Sizes (Python ints or scalar tensors) as one int32 vector."""
    return tf.convert_to_tensor(_shape(values), tf.int32)


def _shown(dims) -> str:
    """Dimensions for a message, unknown ones as None (TensorShape's spelling)."""
    return str([d if isinstance(d, int) else None for d in dims])


def _run_time(equation: str) -> str:
    """The equation as run-time messages show it: unquoted, since tf.Assert escapes quotes."""
    return equation.replace(" ", "")


def _size_checks(equation: str, lhs, rhs, shared, da, db) -> list:
    """The run-time checks that the `shared` labels (batch and contracted) have one size in a and
    b, for the pairs of sizes not both static; raises at once for a static pair that differs.

    Messages name only what the user wrote: a letter label, or '...' for the dimensions the
    ellipsis covers (all of them in one message, with each operand's '...' dimensions). The
    run-time ones leave quotes out (tf.Assert would print them escaped): "einsum mk,kn->mn:
    label k has size 3 in a and 5 in b".

    Raises:
      ValueError: a letter label or '...' dimension whose static sizes differ.
    """
    checks = []
    ell_pairs = []
    for c in shared:
        sa, sb = da[lhs.index(c)], db[rhs.index(c)]
        if isinstance(c, int):
            ell_pairs.append((sa, sb))
            continue
        if isinstance(sa, int) and isinstance(sb, int):
            if sa != sb:
                raise ValueError(f"label {c!r} of {equation!r} has size {sa} in a and {sb} in b")
            continue
        msg = tf.strings.format(
            f"einsum {_run_time(equation)}: label {c} has size {{}} in a and {{}} in b", (sa, sb)
        )
        checks.append(tf.Assert(tf.equal(tf.cast(sa, tf.int32), tf.cast(sb, tf.int32)), [msg]))
    if not ell_pairs:
        return checks
    ell_a = [d for c, d in zip(lhs, da, strict=True) if isinstance(c, int)]
    ell_b = [d for c, d in zip(rhs, db, strict=True) if isinstance(c, int)]
    why = (
        "do not match: {} in a and {} in b (tf_fp16ops.einsum needs them equal where both "
        "operands have them; it does not broadcast them)"
    )
    if any(isinstance(x, int) and isinstance(y, int) and x != y for x, y in ell_pairs):
        what = f"the '...' dimensions of {equation!r} " + why
        raise ValueError(what.format(_shown(ell_a), _shown(ell_b)))
    dynamic = [(x, y) for x, y in ell_pairs if not (isinstance(x, int) and isinstance(y, int))]
    if dynamic:
        what = f"einsum {_run_time(equation)}: the dimensions of ... " + why
        msg = tf.strings.format(what, (_vector(ell_a), _vector(ell_b)))
        same = tf.equal(_vector([x for x, _ in dynamic]), _vector([y for _, y in dynamic]))
        checks.append(tf.Assert(tf.reduce_all(same), [msg]))
    return checks


def einsum(equation: str, a, b, *, accumulation="float16", name: str | None = None) -> tf.Tensor:
    """A two-operand `tf.einsum` lowered onto one Fp16MatMul (transposes and reshapes around it).

    Supported equations: explicit 'lhs,rhs->out' with letter labels and at most one '...' per
    term (expanded right-aligned, as NumPy does); every label appears in the output or in both
    operands. The labels fall into batch labels (in a, b and the output), contracted labels (in
    a and b only), and free labels of a or of b (in that operand and the output). This covers
    the equations of keras.layers.EinsumDense ('abc,cd->abd', 'abc,cde->abde', '...b,bc->...c')
    and keras.layers.MultiHeadAttention ('abc,cde->abde', 'abcd,cde->abe', 'aecd,abcd->acbe',
    'acbe,aecd->abcd').

    Lowering: a is transposed to [batch, free_a, contracted] and b to [batch, contracted,
    free_b] (a transpose that would only swap the last two axes becomes adj_x/adj_y), each
    group flattened in row-major order (batch labels in output order, contracted labels in a's
    order, free labels in their operand's order), one Fp16MatMul, then reshape and transpose to
    the output. So the reduction order is the contracted labels' flattened index ascending, in
    a's label order, with the numerics of `matmul`; gradients are those of `matmul` through the
    transposes and reshapes.

    Args:
      equation: the einsum equation (see above).
      a, b: float16 or float32 tensors of one dtype, ranks matching the equation.
      accumulation: as in `matmul`.
      name: op name.

    Returns:
      Tensor of the input dtype with the output labels' dimensions.

    Raises:
      ValueError: an equation outside the supported form (implicit output, one or more than two
        operands, a label repeated in one term, a label summed in one operand only, an output
        label in no operand), ranks that do not match it (also an operand of unknown rank whose
        term has '...'), a batch or contracted label whose static sizes differ between a and b
        (the message names the equation, the label and both sizes), '...' dimensions shared by
        a and b whose static sizes differ (they must be equal: no broadcasting), and the errors
        of `matmul`.
      tf.errors.InvalidArgumentError: when running, the same size checks for sizes not known
        when the graph is built (graph mode with unknown dimensions; the message names the
        equation, the label or '...', and both sizes), and an operand of unknown static rank
        whose rank does not match its term (the message names the operand).
    """
    tacc = accumulation_dtype(accumulation)
    if name is not None and not isinstance(name, str):  # as conv2d's, naming the value
        raise ValueError(f"name must be a string or None, got {_shown_value(name)}")
    with tf.name_scope(name or "Fp16Einsum"):
        a = tf.convert_to_tensor(a, name="a")
        b = tf.convert_to_tensor(b, name="b")
        _check_dtypes(tacc, a=a, b=b)
        lhs, rhs, out = _parse(equation, (a.shape.rank, b.shape.rank))
        _check_labels(equation, lhs, rhs, out)
        a = _with_rank(a, "a", len(lhs), equation)
        b = _with_rank(b, "b", len(rhs), equation)
        batch = [c for c in out if c in lhs and c in rhs]
        contracted = [c for c in lhs if c in rhs and c not in out]
        free_a = [c for c in lhs if c not in rhs]
        free_b = [c for c in rhs if c not in lhs]
        da, db = _dims(a), _dims(b)
        checks = _size_checks(equation, lhs, rhs, batch + contracted, da, db)
        if checks:
            # The reshapes below would otherwise run (and fail, or flatten sizes that differ
            # into one equal product) before the checks.
            with tf.control_dependencies(checks):
                a, b = tf.identity(a), tf.identity(b)
        size = {}
        for c in batch + contracted:
            sa, sb = da[lhs.index(c)], db[rhs.index(c)]
            size[c] = sa if isinstance(sa, int) else sb
        for c in free_a:
            size[c] = da[lhs.index(c)]
        for c in free_b:
            size[c] = db[rhs.index(c)]

        def arrange(t, term, first, second):
            """t transposed to batch + first + second, or to batch + second + first with adj."""
            direct = batch + first + second
            swapped = batch + second + first
            order = direct
            adj = False
            if [term.index(c) for c in swapped] == list(range(len(term))) and (
                [term.index(c) for c in direct] != list(range(len(term)))
            ):
                order, adj = swapped, True
            perm = [term.index(c) for c in order]
            if perm != list(range(len(term))):
                t = tf.transpose(t, perm)
            groups = (first, second) if not adj else (second, first)
            shape = [_prod(size[c] for c in batch)] + [_prod(size[c] for c in g) for g in groups]
            return tf.reshape(t, _shape(shape)), adj

        a3, adj_a = arrange(a, lhs, free_a, contracted)
        b3, adj_b = arrange(b, rhs, contracted, free_b)
        y = matmul(a3, b3, adjoint_a=adj_a, adjoint_b=adj_b, accumulation=tacc)
        labels = batch + free_a + free_b
        y = tf.reshape(y, _shape([size[c] for c in labels]))
        perm = [labels.index(c) for c in out]
        if perm != list(range(len(labels))):
            y = tf.transpose(y, perm)
        return y
