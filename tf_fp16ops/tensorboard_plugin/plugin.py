"""TensorBoard backend of the "fp16 audit" dashboard.

Routes (under `/data/plugin/fp16_audit/`), all GET:
  index.js, view.html, style.css   the frontend (static files shipped in this package)
  runs                             {"runs": [run summary...], "classes": [class...]}
  findings?run=RUN                 {"run", "step", "wall_time", "report", "findings": [finding...]}
  compare?run_a=A&run_b=B          {"run_a", "run_b", "changed", "unchanged", "only_a", "only_b"}
  sensitivity_runs                 {"runs": [{"run", "step", "layers", "set_size", "tolerance"}...],
                                    "errors": [{"run", "error"}...] (unreadable result_json)}
  sensitivity?run=RUN              {"run", "step", "wall_time", "result": SensitivityResult JSON}
Sensitivity results are the text summary `fp16_sensitivity/result_json` (text plugin data) that
`tf_fp16ops.sensitivity(..., logdir=)` writes; they are read the same way, latest step.
Data are read through TensorBoard's data provider (tensors of plugin "fp16_audit", latest step).
Errors: a missing query argument gives 400, an unknown run 404 (TensorBoard's PublicError
responses), each naming the argument and value.
"""

from __future__ import annotations

import json
from importlib import resources

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
            text = _scalar_str(series[-1].numpy)
            try:
                result, error = json.loads(text), None
            except json.JSONDecodeError as e:
                result = None
                error = f"run={run!r}: {SENSITIVITY_TAG} is not JSON ({e}): {text[:80]!r}"
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

    @wrappers.Request.application
    def _sensitivity_runs_route(self, request):
        ctx, eid = plugin_util.context(request.environ), plugin_util.experiment_id(request.environ)
        return http_util.Respond(request, self.sensitivity_runs_impl(ctx, eid), "application/json")

    @wrappers.Request.application
    def _sensitivity_route(self, request):
        ctx, eid = plugin_util.context(request.environ), plugin_util.experiment_id(request.environ)
        run = _required_arg(request, "run")
        return http_util.Respond(request, self.sensitivity_impl(ctx, eid, run), "application/json")


class Fp16AuditPlugin(_SensitivityData, base_plugin.TBPlugin):
    """The "fp16 audit" dashboard: per run, the audit's conv call sites; runs compared."""

    plugin_name = metadata.PLUGIN_NAME

    def __init__(self, context: base_plugin.TBContext):
        self._data_provider = context.data_provider

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
        """{run: (TensorDatum of the latest step, parsed plugin metadata)} for `tag`."""
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
                meta = metadata.parse_plugin_metadata(listing[run][tag].plugin_content)
                out[run] = (series[-1], meta)
        return out

    def _report(self, ctx, experiment: str, run: str) -> dict:
        got = self._read_tag(ctx, experiment, metadata.REPORT_TAG, [run])
        if run not in got:
            raise errors.NotFoundError(f"run={run!r} has no {metadata.REPORT_TAG} data")
        datum, meta = got[run]
        return {
            "report": json.loads(_scalar_str(datum.numpy)),
            "step": datum.step,
            "wall_time": datum.wall_time,
            "audit_schema_version": meta.get("audit_schema_version"),
        }

    def _findings(self, ctx, experiment: str, run: str) -> list[dict]:
        got = self._read_tag(ctx, experiment, metadata.FINDINGS_TAG, [run])
        if run not in got:
            raise errors.NotFoundError(f"run={run!r} has no {metadata.FINDINGS_TAG} data")
        return [json.loads(_to_str(x)) for x in got[run][0].numpy.reshape(-1)]

    def runs_impl(self, ctx, experiment: str) -> dict:
        reports = self._read_tag(ctx, experiment, metadata.REPORT_TAG)
        runs = []
        for run in sorted(reports):
            datum, meta = reports[run]
            rep = json.loads(_scalar_str(datum.numpy))
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
        return {"runs": runs, "classes": [{"name": n, "description": d} for n, d in CLASS_LEGEND]}

    def findings_impl(self, ctx, experiment: str, run: str) -> dict:
        rep = self._report(ctx, experiment, run)
        return {"run": run, **rep, "findings": self._findings(ctx, experiment, run)}

    def compare_impl(self, ctx, experiment: str, run_a: str, run_b: str) -> dict:
        cmp = compare_findings(
            self._findings(ctx, experiment, run_a), self._findings(ctx, experiment, run_b)
        )
        return {"run_a": run_a, "run_b": run_b, **cmp.to_dict()}

    # -- routes -------------------------------------------------------------------------------

    def _static_route(self, filename: str, mime: str):
        @wrappers.Request.application
        def route(request):
            return http_util.Respond(request, _static_bytes(filename), mime)

        return route

    @wrappers.Request.application
    def _runs_route(self, request):
        ctx, eid = plugin_util.context(request.environ), plugin_util.experiment_id(request.environ)
        return http_util.Respond(request, self.runs_impl(ctx, eid), "application/json")

    @wrappers.Request.application
    def _findings_route(self, request):
        ctx, eid = plugin_util.context(request.environ), plugin_util.experiment_id(request.environ)
        run = _required_arg(request, "run")
        return http_util.Respond(request, self.findings_impl(ctx, eid, run), "application/json")

    @wrappers.Request.application
    def _compare_route(self, request):
        ctx, eid = plugin_util.context(request.environ), plugin_util.experiment_id(request.environ)
        a, b = _required_arg(request, "run_a"), _required_arg(request, "run_b")
        return http_util.Respond(request, self.compare_impl(ctx, eid, a, b), "application/json")


def _required_arg(request, name: str) -> str:
    value = request.args.get(name)
    if not value:
        raise errors.InvalidArgumentError(f"query argument {name!r} is required (got {value!r})")
    return value


def _to_str(x) -> str:
    return x.decode("utf-8") if isinstance(x, bytes) else str(x)


def _scalar_str(arr) -> str:
    return _to_str(arr.reshape(-1)[0] if getattr(arr, "ndim", 0) else arr.item())
