"""Finding codes: every flag of a call site is a code, a severity and its fields; words come from
the table here (renderers call `Flag.message`), gates select codes (`--fail-on`), and counting
never searches text.

Severities follow Polygraphy's `check lint` levels (NVIDIA/TensorRT tools/Polygraphy): "error"
(the op cannot run as written), "warning" (the precision is not what the graph suggests, or
fp16 accumulation can lose the sum), "info" (a fact worth knowing).

| code | severity | fields |
|---|---|---|
| fake-fp16 | warning | side, how ("round-trip" or "computed-in-fp32") |
| noop-round-trip | warning | side, via |
| dtype-mismatch | warning | side, dtype, T |
| variable-cast | info | from, to |
| policy-mismatch | warning | policy, T |
| tf32 | info | |
| amp-predicted-rewrite | info | |
| fp16-acc-long-reduction | warning | terms, limit |
| tensor-core-unfriendly | info | input_channels, output_channels, groups, depthwise; K, N |
| invalid-attrs | error | attrs (list of "key=value") |
| size-overflow | error | |
| in-loop | info | op, node |
| in-branch | info | op, node, branch |
| xla-may-drop-round-trip | info | |

Meanings (`side`: "input"/"filter" of a conv, "a"/"b" of a matmul):
  fake-fp16: a T=float op on values rounded to fp16 on the way in.
  noop-round-trip: half -> float/double -> half on an operand, a cast pair that changes nothing.
  dtype-mismatch: an operand's dtype is not the op's T.
  variable-cast: the variable is stored in `from` and cast to `to` (mixed precision).
  policy-mismatch: the Keras layer's policy computes in fp16/bf16, the graph in T.
  tf32: T=float inputs rounded to TF32 on tensor cores.
  amp-predicted-rewrite: grappler's auto mixed precision would rewrite the op to half.
  fp16-acc-long-reduction: fp16 accumulation over more than 2048 terms can stagnate or overflow.
  tensor-core-unfriendly: sizes that are not multiples of 8, or groups > 1 (depthwise: true for
    a depthwise conv, one group per input channel; K, N for a matmul).
  invalid-attrs: attrs (or recorded shapes) no TensorFlow kernel accepts, for convs and the
    matmul family alike (passes/shapes.py `invalid_attrs`, `negative_outputs`,
    `invalid_matmul_attrs`); size-overflow: sizes beyond int64.
  in-loop / in-branch: the site is in a While body / an If or Case branch, so its FLOPs count
    one iteration / that branch.
  xla-may-drop-round-trip: fake-fp16 inside XLA, whose simplifier may remove
    convert(convert(x, f16), f32) (openxla/xla#41605): the op may run on plain fp32 values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

SEVERITIES = ("error", "warning", "info")


def _side(f: dict, what: str) -> str:
    return f"{what}-{f['side']}"


def _fake(f: dict) -> str:
    how = (
        "float->half->float round trip"
        if f["how"] == "round-trip"
        else "fp16 values computed in fp32"
    )
    return f"fake-fp16-{f['side']}({how})"


def _tensor_core(f: dict) -> str:
    sizes = [
        (name.replace("_", " "), f[name])
        for name in ("input_channels", "output_channels", "K", "N")
        if name in f
    ]
    parts = []
    if sizes:
        words = " and ".join(f"{n} {v}" for n, v in sizes)
        parts.append(words + (" not multiples of 8" if len(sizes) > 1 else " not a multiple of 8"))
    if f.get("depthwise"):
        parts.append(f"depthwise: groups={f['groups']}, one per input channel")
    elif "groups" in f:
        parts.append(f"groups={f['groups']}")
    return "tensor-core-unfriendly(" + "; ".join(parts) + ")"


# code -> (severity, words from fields)
CODES: dict[str, tuple[str, Callable[[dict], str]]] = {
    "fake-fp16": ("warning", _fake),
    "noop-round-trip": (
        "warning",
        lambda f: f"noop-round-trip-{f['side']}(half->{f['via']}->half)",
    ),
    "dtype-mismatch": (
        "warning",
        lambda f: f"dtype-mismatch-{f['side']}({f['dtype']} into T={f['T']})",
    ),
    "variable-cast": ("info", lambda f: f"variable-cast({f['from']} variable cast to {f['to']})"),
    "policy-mismatch": (
        "warning",
        lambda f: f"policy-mismatch(policy {f['policy']}, graph computes T={f['T']})",
    ),
    "tf32": ("info", lambda f: "tf32"),
    "amp-predicted-rewrite": ("info", lambda f: "amp-predicted-rewrite"),
    "fp16-acc-long-reduction": (
        "warning",
        lambda f: f"fp16-acc-long-reduction({f['terms']}>{f['limit']})",
    ),
    "tensor-core-unfriendly": ("info", _tensor_core),
    "invalid-attrs": ("error", lambda f: "invalid-attrs(" + "; ".join(f["attrs"]) + ")"),
    "size-overflow": ("error", lambda f: "size-overflow"),
    "in-loop": ("info", lambda f: f"in-loop({f['op']} {f['node']!r})"),
    "in-branch": ("info", lambda f: f"in-branch({f['branch']} of {f['op']} {f['node']!r})"),
    "xla-may-drop-round-trip": ("info", lambda f: "xla-may-drop-round-trip"),
}


@dataclass(frozen=True)
class Flag:
    """One flag of a call site: a code of `CODES`, its severity and its fields.

    Attributes:
      code: e.g. "tensor-core-unfriendly".
      severity: "error", "warning" or "info" (from the code).
      fields: (name, value) pairs, e.g. (("input_channels", 3),); values are str, int or tuples of
        str.
    """

    code: str
    severity: str
    fields: tuple[tuple[str, object], ...] = ()

    def get(self, name: str, default=None):
        for k, v in self.fields:
            if k == name:
                return v
        return default

    @property
    def message(self) -> str:
        """The words of this flag (the text flags had before schema 2.0)."""
        return CODES[self.code][1](dict(self.fields))

    def to_dict(self) -> dict:
        return {
            "code": self.code,
            "severity": self.severity,
            "fields": {k: list(v) if isinstance(v, tuple) else v for k, v in self.fields},
            "message": self.message,
        }


def flag(code: str, **fields) -> Flag:
    """A Flag of `code` with `fields`.

    Raises:
      KeyError: `code` is not in CODES.
    """
    severity = CODES[code][0]
    return Flag(code, severity, tuple(fields.items()))


def parse_codes(text: str) -> tuple[str, ...]:
    """The codes of a `--fail-on` value ("CODE[,CODE...]"), each checked against CODES.

    Raises:
      ValueError: an empty list, an empty item ("a,,b", a trailing comma: perhaps a code that
        was meant to be there) or an unknown code, naming it and the known codes.
    """
    codes = tuple(c.strip() for c in text.split(","))
    if not all(codes):
        raise ValueError(f"--fail-on expects CODE[,CODE...], got {text!r}")
    for c in codes:
        if c not in CODES:
            raise ValueError(f"--fail-on: unknown code {c!r} (codes: {', '.join(sorted(CODES))})")
    return codes
