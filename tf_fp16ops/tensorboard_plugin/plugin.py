"""TensorBoard backend of the "fp16 audit" dashboard.

Routes (under `/data/plugin/fp16_audit/`), all GET:
  index.js, view.html, style.css   the frontend (static files shipped in this package)
  runs                             {"runs": [run summary...], "classes": [class...],
                                    "errors": [{"run", "error"}...] (runs that cannot be read:
                                    metadata too new or malformed, not UTF-8, not JSON, too
                                    large, nested too deeply)}
  findings?run=RUN                 {"run", "step", "wall_time", "report", "findings": [finding...]}
  compare?run_a=A&run_b=B          {"run_a", "run_b", "changed", "unchanged", "only_a", "only_b"}
  sensitivity_runs                 {"runs": [{"run", "step", "layers", "set_size", "tolerance"}...],
                                    "errors": [{"run", "error"}...] (unreadable result_json)}
  sensitivity?run=RUN              {"run", "step", "wall_time", "result": SensitivityResult JSON}
Sensitivity results are the text summary `fp16_sensitivity/result_json` (text plugin data) that
`tf_fp16ops.sensitivity(..., logdir=)` writes; they are read the same way, latest step.
Data are read through TensorBoard's data provider (tensors of plugin "fp16_audit", latest step).
Errors: a missing query argument or a run whose data cannot be read (the reasons above) gives
400, an unknown run 404 (TensorBoard's PublicError responses, a JSON body {"error": ...} here),
each naming the argument, the run and the reason; bad data never gives 500. One unreadable run
never hides the others.
"""

from __future__ import annotations

import json
from importlib import resources

import numpy as np
from tensorboard import errors, plugin_util
from tensorboard.backend import http_util
from tensorboard.data import provider
from tensorboard.plugins import base_plugin
from werkzeug import wrappers

from . import metadata
from .compare import compare_findings

# The audit's classes (tf_fp16ops.audit.findings.CLASSES, same order) with the dashboard's legend
# text. Kept here rather than imported so that this module does not import the audit (and
# TensorFlow).
CLASS_LEGEND = (
    ("fp16-accumulate", "products summed in fp16"),
    ("fp16-storage", "fp16 tensors, fp32 accumulation"),
    ("fake-fp16", "fp32 conv on values rounded to fp16"),
    ("bf16", "bfloat16 tensors, fp32 accumulation"),
    ("fp32", "fp32 tensors and accumulation"),
    ("fp64", "fp64 tensors and accumulation"),
    ("unknown", "not determined statically"),
)
_STATIC = {
    "/index.js": ("index.js", "text/javascript"),
    "/view.html": ("view.html", "text/html"),
    "/style.css": ("style.css", "text/css"),
}


# Largest JSON document read from one summary: an audit report of the default site budget is a few
# MB (about 1 KB per call site); anything larger is named as too large instead of parsed.
MAX_JSON_BYTES = 32 * 2**20


class BadRunData(ValueError):
    """A run's plugin data that cannot be read; the message names the run and the reason."""


def _json_of(raw, run: str, what: str, limit: int = MAX_JSON_BYTES):
    """The JSON value of bytes/str `raw` (a summary's text), or BadRunData naming `run`, `what`
    and why: larger than `limit` bytes, not UTF-8, not JSON, nested too deeply."""
    if isinstance(raw, str):
        try:
            raw = raw.encode("utf-8")
        except UnicodeEncodeError:
            raise BadRunData(f"run={run!r}: {what} is not UTF-8 text") from None
    if len(raw) > limit:
        raise BadRunData(
            f"run={run!r}: {what} is {len(raw)} bytes, larger than the {limit} bytes "
            "this dashboard reads"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadRunData(
            f"run={run!r}: {what} is not UTF-8 ({e.reason} at byte {e.start})"
        ) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise BadRunData(f"run={run!r}: {what} is not JSON ({e}): {text[:80]!r}") from None
    except RecursionError:
        raise BadRunData(f"run={run!r}: {what} is JSON nested too deeply to read") from None


def _json_object(raw, run: str, what: str, limit: int = MAX_JSON_BYTES) -> dict:
    v = _json_of(raw, run, what, limit)
    if not isinstance(v, dict):
        raise BadRunData(f"run={run!r}: {what} is not a JSON object (got {type(v).__name__})")
    return v


def _static_bytes(filename: str) -> bytes:
    return resources.files(__package__).joinpath("static", filename).read_bytes()


# -- sensitivity results (tf_fp16ops.sensitivity) ----------------------------------------------
# Tag and plugin of `SensitivityResult.write_summaries`' JSON (tf.summary.text: plugin "text", a
# scalar string tensor); the name is repeated here so that this module imports no TensorFlow.
SENSITIVITY_TAG = "fp16_sensitivity/result_json"
TEXT_PLUGIN = "text"


class _SensitivityData:
    """Routes `sensitivity_runs` and `sensitivity` of `Fp16AuditPlugin` (module docstring)."""

    def _read_sensitivity(self, ctx, experiment: str, runs: list[str] | None = None) -> dict:
        """{run: (TensorDatum of the latest step, parsed result dict or None, error or None)} of
        `SENSITIVITY_TAG`; the error names the run when its text is not a JSON object with a
        "layers" list."""
        flt = provider.RunTagFilter(runs=runs, tags=[SENSITIVITY_TAG])
        listing = self._data_provider.list_tensors(
            ctx, experiment_id=experiment, plugin_name=TEXT_PLUGIN, run_tag_filter=flt
        )
        if not listing:
            return {}
        data = self._data_provider.read_tensors(
            ctx,
            experiment_id=experiment,
            plugin_name=TEXT_PLUGIN,
            downsample=1,
            run_tag_filter=provider.RunTagFilter(runs=list(listing), tags=[SENSITIVITY_TAG]),
        )
        out = {}
        for run, tags in data.items():
            series = tags.get(SENSITIVITY_TAG)
            if not series:
                continue
            try:
                text = _scalar(series[-1].numpy)
                result, error = _json_of(text, run, SENSITIVITY_TAG, self.max_json_bytes), None
            except BadRunData as e:
                result, error = None, str(e)
            if error is None and (
                not isinstance(result, dict) or not isinstance(result.get("layers"), list)
            ):
                result, error = (
                    None,
                    (
                        f"run={run!r}: {SENSITIVITY_TAG} is not a sensitivity "
                        f"result (no 'layers' list)"
                    ),
                )
            out[run] = (series[-1], result, error)
        return out

    def _has_sensitivity(self) -> bool:
        """Whether any run has `SENSITIVITY_TAG` (called by TensorBoard's plugin listing, which has
        already checked for "fp16_audit" data)."""
        from tensorboard import context as tb_context

        listing = self._data_provider.list_tensors(
            tb_context.RequestContext(),
            experiment_id="",
            plugin_name=TEXT_PLUGIN,
            run_tag_filter=provider.RunTagFilter(tags=[SENSITIVITY_TAG]),
        )
        return any(SENSITIVITY_TAG in tags for tags in (listing or {}).values())

    def sensitivity_runs_impl(self, ctx, experiment: str) -> dict:
        """Readable runs under "runs"; runs whose result cannot be read under "errors"."""
        runs, errs = [], []
        for run, (datum, result, error) in sorted(self._read_sensitivity(ctx, experiment).items()):
            if error:
                errs.append({"run": run, "error": error})
                continue
            runs.append(
                {
                    "run": run,
                    "step": datum.step,
                    "layers": len(result["layers"]),
                    "set_size": len(result.get("fp16_set") or ()),
                    "tolerance": result.get("tolerance"),
                }
            )
        return {"runs": runs, "errors": errs}

    def sensitivity_impl(self, ctx, experiment: str, run: str) -> dict:
        got = self._read_sensitivity(ctx, experiment, [run])
        if run not in got:
            raise errors.NotFoundError(f"run={run!r} has no {SENSITIVITY_TAG} data")
        datum, result, error = got[run]
        if error:
            raise errors.InvalidArgumentError(error)
        return {"run": run, "step": datum.step, "wall_time": datum.wall_time, "result": result}

    def _sensitivity_runs_route(self, environ, start_response):
        return _json_route(lambda ctx, eid, request: self.sensitivity_runs_impl(ctx, eid))(
            environ, start_response
        )

    def _sensitivity_route(self, environ, start_response):
        def body(ctx, eid, request):
            return self.sensitivity_impl(ctx, eid, _required_arg(request, "run"))

        return _json_route(body)(environ, start_response)


class Fp16AuditPlugin(_SensitivityData, base_plugin.TBPlugin):
    """The "fp16 audit" dashboard: per run, the audit's conv call sites; runs compared."""

    plugin_name = metadata.PLUGIN_NAME

    def __init__(self, context: base_plugin.TBContext, max_json_bytes: int = MAX_JSON_BYTES):
        """`max_json_bytes`: largest report, findings tensor or sensitivity result read per run
        (larger ones are named as too large in `runs` and answered with 400)."""
        self._data_provider = context.data_provider
        self.max_json_bytes = max_json_bytes

    def is_active(self) -> bool:
        # TensorBoard core marks the plugin active when any run has data of `data_plugin_names()`
        # (our plugin name) and asks this only otherwise: active with sensitivity results alone.
        return self._has_sensitivity()

    def frontend_metadata(self) -> base_plugin.FrontendMetadata:
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name="fp16 audit")

    def get_plugin_apps(self):
        apps = {route: self._static_route(name, mime) for route, (name, mime) in _STATIC.items()}
        apps.update(
            {
                "/runs": self._runs_route,
                "/findings": self._findings_route,
                "/compare": self._compare_route,
            }
        )
        apps.update(
            {
                "/sensitivity_runs": self._sensitivity_runs_route,
                "/sensitivity": self._sensitivity_route,
            }
        )
        return apps

    # -- data ---------------------------------------------------------------------------------

    def _read_tag(self, ctx, experiment: str, tag: str, runs: list[str] | None = None) -> dict:
        """{run: (TensorDatum of the latest step, parsed plugin metadata or None, error or None)}
        for `tag`; the error names the run and why its metadata cannot be read (a newer version,
        malformed)."""
        flt = provider.RunTagFilter(runs=runs, tags=[tag])
        listing = self._data_provider.list_tensors(
            ctx, experiment_id=experiment, plugin_name=metadata.PLUGIN_NAME, run_tag_filter=flt
        )
        if not listing:
            return {}
        data = self._data_provider.read_tensors(
            ctx,
            experiment_id=experiment,
            plugin_name=metadata.PLUGIN_NAME,
            downsample=1,
            run_tag_filter=provider.RunTagFilter(runs=list(listing), tags=[tag]),
        )
        out = {}
        for run, tags in data.items():
            series = tags.get(tag)
            if series:
                try:
                    meta = metadata.parse_plugin_metadata(listing[run][tag].plugin_content)
                except ValueError as e:
                    out[run] = (series[-1], None, f"run={run!r}: {e}")
                    continue
                out[run] = (series[-1], meta, None)
        return out

    def _report(self, ctx, experiment: str, run: str) -> dict:
        got = self._read_tag(ctx, experiment, metadata.REPORT_TAG, [run])
        if run not in got:
            raise errors.NotFoundError(f"run={run!r} has no {metadata.REPORT_TAG} data")
        datum, meta, error = got[run]
        if error:
            raise BadRunData(error)
        return {
            "report": _json_object(
                _scalar(datum.numpy), run, metadata.REPORT_TAG, self.max_json_bytes
            ),
            "step": datum.step,
            "wall_time": datum.wall_time,
            "audit_schema_version": meta.get("audit_schema_version"),
        }

    def _findings(self, ctx, experiment: str, run: str) -> list[dict]:
        got = self._read_tag(ctx, experiment, metadata.FINDINGS_TAG, [run])
        if run not in got:
            raise errors.NotFoundError(f"run={run!r} has no {metadata.FINDINGS_TAG} data")
        datum, _, error = got[run]
        if error:
            raise BadRunData(error)
        arr = np.asarray(datum.numpy).reshape(-1)
        size = sum(len(x) if isinstance(x, (bytes, str)) else 0 for x in arr)
        if size > self.max_json_bytes:
            raise BadRunData(
                f"run={run!r}: {metadata.FINDINGS_TAG} holds {size} bytes, larger than the "
                f"{self.max_json_bytes} bytes this dashboard reads"
            )
        where = metadata.FINDINGS_TAG
        return [_json_object(x, run, f"{where}[{i}]") for i, x in enumerate(arr)]

    def runs_impl(self, ctx, experiment: str) -> dict:
        reports = self._read_tag(ctx, experiment, metadata.REPORT_TAG)
        runs, errs = [], []
        for run in sorted(reports):
            datum, meta, error = reports[run]
            try:
                if error:
                    raise BadRunData(error)
                rep = _json_object(
                    _scalar(datum.numpy), run, metadata.REPORT_TAG, self.max_json_bytes
                )
            except BadRunData as e:
                errs.append({"run": run, "error": str(e)})
                continue
            runs.append(
                {
                    "run": run,
                    "source": rep.get("source"),
                    "source_format": rep.get("source_format"),
                    "device": (rep.get("context") or {}).get("device"),
                    "call_sites": (rep.get("summary") or {}).get("call_sites"),
                    "audit_schema_version": meta.get("audit_schema_version"),
                    "step": datum.step,
                }
            )
        classes = [{"name": n, "description": d} for n, d in CLASS_LEGEND]
        return {"runs": runs, "classes": classes, "errors": errs}

    def findings_impl(self, ctx, experiment: str, run: str) -> dict:
        rep = self._report(ctx, experiment, run)
        return {"run": run, **rep, "findings": self._findings(ctx, experiment, run)}

    def compare_impl(self, ctx, experiment: str, run_a: str, run_b: str) -> dict:
        fa, fb = self._findings(ctx, experiment, run_a), self._findings(ctx, experiment, run_b)
        try:
            cmp = compare_findings(fa, fb)
        except (KeyError, TypeError, AttributeError, ValueError) as e:
            raise BadRunData(
                f"run_a={run_a!r}, run_b={run_b!r}: findings cannot be compared: a finding "
                f"lacks or mistypes a field ({type(e).__name__}: {e})"
            ) from None
        return {"run_a": run_a, "run_b": run_b, **cmp.to_dict()}

    # -- routes -------------------------------------------------------------------------------

    def _bad_data_is_400(self, fn, *args):
        try:
            return fn(*args)
        except BadRunData as e:
            raise errors.InvalidArgumentError(str(e)) from None

    def _static_route(self, filename: str, mime: str):
        @wrappers.Request.application
        def route(request):
            return http_util.Respond(request, _static_bytes(filename), mime)

        return route

    def _runs_route(self, environ, start_response):
        return _json_route(lambda ctx, eid, request: self.runs_impl(ctx, eid))(
            environ, start_response
        )

    def _findings_route(self, environ, start_response):
        def body(ctx, eid, request):
            return self._bad_data_is_400(
                self.findings_impl, ctx, eid, _required_arg(request, "run")
            )

        return _json_route(body)(environ, start_response)

    def _compare_route(self, environ, start_response):
        def body(ctx, eid, request):
            a, b = _required_arg(request, "run_a"), _required_arg(request, "run_b")
            return self._bad_data_is_400(self.compare_impl, ctx, eid, a, b)

        return _json_route(body)(environ, start_response)


def _json_route(body):
    """A WSGI app answering `body(ctx, experiment_id, request)` as JSON; a PublicError (400 bad
    argument or data, 404 unknown run) as {"error": message} with its status code."""

    @wrappers.Request.application
    def app(request):
        ctx, eid = plugin_util.context(request.environ), plugin_util.experiment_id(request.environ)
        try:
            return http_util.Respond(request, body(ctx, eid, request), "application/json")
        except errors.PublicError as e:
            return http_util.Respond(
                request, {"error": str(e)}, "application/json", code=e.http_code
            )

    return app


def _required_arg(request, name: str) -> str:
    value = request.args.get(name)
    if not value:
        raise errors.InvalidArgumentError(f"query argument {name!r} is required (got {value!r})")
    return value


def _scalar(arr):
    """The one element of a scalar (or 1-element) string tensor, as TensorBoard gives it (bytes);
    BadRunData-free: an empty tensor gives b"" (not JSON, named by the caller)."""
    flat = np.asarray(arr).reshape(-1)
    if flat.size == 0:
        return b""
    x = flat[0]
    return x if isinstance(x, (bytes, str)) else str(x)
