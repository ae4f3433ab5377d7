"""Errors raised by the audit for inputs it cannot read."""

from __future__ import annotations


class AuditInputError(ValueError):
    """An input path or object that the audit cannot read.

    The message names the input and says what is wrong with it (missing file,
    wrong format, truncated or malformed protobuf). The CLI prints it and exits
    with status 2, without a traceback.
    """


class MalformedModelError(AuditInputError):
    """A malformed part found inside a model (node input string, Keras config field).

    Raised by code that does not know which file it reads; the message names the part
    (node, layer, field) and the bad value. `at(source)` gives the `AuditInputError`
    that also names the input, as the loaders and `analyze` raise it.
    """

    def at(self, source: str) -> AuditInputError:
        return AuditInputError(f"{source}: {self}")


def as_text(s: str) -> str:
    """`s` with the bytes of a path that is not valid UTF-8 written as backslash escapes.

    Python decodes such paths with surrogate escapes (os.fsdecode: b"m\\xff.pb" -> "m\\udcff.pb"),
    which no UTF-8 output (terminal, JSON file, TensorBoard event) can encode; here they become
    the text "m\\\\xff.pb", so every report and message can be written and still names the file.
    """
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        raw = s.encode("utf-8", "surrogateescape") if _only_escapes(s) else None
        if raw is not None:
            return raw.decode("utf-8", "backslashreplace")
        return s.encode("utf-8", "backslashreplace").decode("utf-8")


def printable(s: str) -> str:
    """`s` with every character that is not printable (control characters such as ESC, CR, LF
    and BEL; format characters) written as its backslash escape ("\\x1b", "\\n"): names read
    from a model reach the terminal, Markdown and stderr through it, so that none can forge a
    line or send an escape sequence to the terminal."""
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in s)


def _only_escapes(s: str) -> bool:
    """Whether every surrogate in `s` is one of os.fsdecode's escapes (U+DC80..U+DCFF)."""
    return all(not 0xD800 <= ord(c) <= 0xDFFF or 0xDC80 <= ord(c) <= 0xDCFF for c in s)
