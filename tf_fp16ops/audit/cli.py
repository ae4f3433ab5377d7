"""`tf-fp16-audit`: which convolutions of a TensorFlow model really run in fp16.

Exit status: 0 audit done (and gates passed); 1 a gate failed; 2 unreadable input or bad usage.
"""

from __future__ import annotations

import argparse
import os
import sys

from tf_fp16ops._platform.cli import ArgumentParser

from .limits import DEFAULT as DEFAULT_LIMITS

EPILOG = """\
classes:
  fp16-accumulate  products summed in fp16 (this package's Tacc=half, or a TF switch)
  fp16-storage     T=half tensors, fp32 accumulation (TensorFlow's default for half)
  fake-fp16        T=float conv on values rounded to fp16 on the way in
  bf16 / fp32 / fp64 / unknown
switches (exact strings; sources in docs/design.md):
  TF_FP16_CONV_USE_FP32_COMPUTE   GPU: only "0" selects fp16 compute for T=half
  TF_CONV2D_USE_FP16_ACCUMULATE   CPU Conv2D (Eigen kernel): only "1" selects fp16 accumulation;
                                  ignored where oneDNN takes T=half convs (fp32 accumulation)
  TF_ENABLE_ONEDNN_OPTS           CPU: oneDNN takes T=half convs when on (default where the CPU has
                                  avx512_vnni/avx512_bf16/avx_vnni/amx) and the CPU has avx512bw +
                                  avx512_fp16/amx_fp16 or avx_ne_convert (TensorFlow's rule,
                                  tensorflow/core/util/util.cc); "0" brings back the Eigen kernels
  TF_FP16_MATMUL_USE_FP32_COMPUTE GPU matmuls (a boolean): "0" or "false" select fp16 compute
                                  for T=half; XLA's dots ignore it
  TF_ENABLE_AUTO_MIXED_PRECISION  ignored in TF2 (reported as ignored); use --amp
inside XLA-compiled functions (jit_compile=True, auto-jit marks) XLA decides the accumulation:
  CPU fp32 for T=half (measured), GPU as read from XLA's source (labelled so)
flags are codes (severity, fields): fake-fp16, noop-round-trip, dtype-mismatch, variable-cast,
  policy-mismatch, tf32, amp-predicted-rewrite, fp16-acc-long-reduction, tensor-core-unfriendly,
  invalid-attrs, size-overflow, in-loop, in-branch, xla-may-drop-round-trip (--fail-on selects)
examples:
  tf-fp16-audit saved_model_dir
  tf-fp16-audit model.pb --device gpu --compute-capability 8.0 --env TF_FP16_CONV_USE_FP32_COMPUTE=0
  tf-fp16-audit model.keras --format json --output audit.json
  tf-fp16-audit saved_model_dir --require fp16-accumulate --fail-under 0.9
  tf-fp16-audit saved_model_dir --ops matmul --fail-on fake-fp16,fp16-acc-long-reduction
  tf-fp16-audit saved_model_dir --logdir /tmp/audit && tensorboard --logdir /tmp/audit
  tf-fp16-audit saved_model_dir --run --input-shape keras_tensor=1,32,32,3
  tf-fp16-audit saved_model_dir --run --probe-switch TF_CONV2D_USE_FP16_ACCUMULATE=1
runtime evidence (--run; EXECUTES the model in this process):
  loads this package's op library and the model, calls one signature on random inputs (fixed
  seed), collects the graphs TensorFlow really executed (after grappler, placement and the oneDNN
  rewrite), matches them to the static call sites, and runs tiny probe convolutions for every
  executed (op, T, Tacc, device) to observe the accumulation: rounding probe (1 + 63 x 2^-12:
  fp32 gives 1.015625, fp16 gives 1.0), the 49-tap probe (0.9794921875 vs 0.98046875)
  and overflow (65504^2 - 65504^2: 0 vs inf/NaN). CPU probes run in a child process with this
  environment; one past 2048 MiB resident or 60 s is stopped and reported not-probed. Each call
  site is then "confirmed", "CONTRADICTED" (with the reason), "unverified" or "not found" (no
  executed node matched it: pruned by grappler, or one of several sites with the same name).
"""


def _non_negative_int(text: str) -> int:
    """argparse type of --max-rows: an integer >= 0."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return n


def _positive_int(text: str) -> int:
    """argparse type of the budget flags: an integer >= 1."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return n


def _size(text: str) -> int:
    """argparse type of --max-file-size: bytes, or K/M/G (powers of 1024)."""
    from .limits import parse_size

    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="tf-fp16-audit",
        description="Static audit of TensorFlow models: for every convolution and matmul call "
        "site, the storage dtype T, "
        "the effective accumulation and why, casts on its inputs, the Keras policy, FLOPs and risk "
        "flags. Models are parsed as protos and never executed; without --run and --build-keras "
        "TensorFlow is not imported (nor needed).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="SavedModel directory, GraphDef .pb/.pbtxt, or .keras archive",
    )
    p.add_argument(
        "--format",
        choices=("table", "json", "markdown"),
        default="table",
        help="report format (default: table)",
    )
    p.add_argument("--output", metavar="FILE", help="write the report to FILE instead of stdout")
    p.add_argument(
        "--max-rows",
        type=_non_negative_int,
        default=None,
        metavar="N",
        help="table: show at most N rows",
    )
    p.add_argument(
        "--signature", metavar="NAME", help="only call sites reached from this SavedModel signature"
    )
    p.add_argument(
        "--ops",
        choices=("conv", "matmul", "all"),
        default="all",
        help="call sites to report: convolutions, the matmul family (MatMul, BatchMatMul*, "
        "Einsum, _FusedMatMul, Fp16MatMul) or both (default: all)",
    )
    p.add_argument(
        "--build-keras",
        action="store_true",
        help=".keras: build the model in Keras safe mode and trace it (default: read config only)",
    )
    lim = p.add_argument_group(
        "limits (untrusted models: only regular files inside the model are read; past a budget "
        "the report is marked partial and one 'over budget' line is printed)"
    )
    lim.add_argument(
        "--max-file-size",
        type=_size,
        default=DEFAULT_LIMITS.max_file_bytes,
        metavar="SIZE",
        help="largest file or archive member read, e.g. 512M or 2G (default: 256M)",
    )
    lim.add_argument(
        "--max-nodes",
        type=_positive_int,
        default=DEFAULT_LIMITS.max_nodes,
        metavar="N",
        help=f"nodes indexed over all graphs and functions (default: {DEFAULT_LIMITS.max_nodes})",
    )
    lim.add_argument(
        "--max-sites",
        type=_positive_int,
        default=DEFAULT_LIMITS.max_sites,
        metavar="N",
        help="call sites reported: (call path, op) pairs, convolutions and the matmul family "
        f"(default: {DEFAULT_LIMITS.max_sites})",
    )
    lim.add_argument(
        "--max-expansions",
        type=_positive_int,
        default=DEFAULT_LIMITS.max_expansions,
        metavar="N",
        help="call edges followed while enumerating call paths "
        f"(default: {DEFAULT_LIMITS.max_expansions})",
    )
    lim.add_argument(
        "--max-path-frames",
        type=_positive_int,
        default=DEFAULT_LIMITS.max_path_frames,
        metavar="N",
        help="calls in the call paths of the reported sites, summed: bounds the report's size "
        f"on deep call graphs (default: {DEFAULT_LIMITS.max_path_frames})",
    )
    lim.add_argument(
        "--max-weights",
        type=_positive_int,
        default=DEFAULT_LIMITS.max_weights,
        metavar="N",
        help="weight elements a .keras model built by Keras (--build-keras, --run) may create, "
        f"checked before each is allocated (default: {DEFAULT_LIMITS.max_weights})",
    )
    lim.add_argument(
        "--allow-external-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="let paths named inside a model (a TFSMLayer's SavedModel) be read when they lie "
        "under DIR (repeatable; default: such paths are reported as external references, not "
        "read)",
    )
    g = p.add_argument_group("runtime context (default: this process)")
    g.add_argument("--device", choices=("gpu", "cpu"), help="device convolutions run on")
    g.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="environment switch as the model's process would see it (repeatable)",
    )
    g.add_argument(
        "--amp",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="auto mixed precision rewrite requested (prediction only)",
    )
    g.add_argument("--compute-capability", metavar="X.Y", help="GPU compute capability, e.g. 8.0")
    g.add_argument("--cudnn-version", metavar="X.Y.Z", help="cuDNN version, e.g. 8.9.7")
    g.add_argument(
        "--cpu-onednn-fp16",
        choices=("yes", "no"),
        help="whether TensorFlow's oneDNN rewrite takes T=half convs on the target CPU "
        "(fp32 accumulation, TF_CONV2D_USE_FP16_ACCUMULATE ignored); "
        "default: derived "
        "from this machine's /proc/cpuinfo flags and TF_ENABLE_ONEDNN_OPTS",
    )
    c = p.add_argument_group("CI gates (exit status 1 when failed)")
    c.add_argument(
        "--fail-under",
        type=float,
        metavar="FRACTION",
        help="minimum share (of FLOPs, or of call sites when FLOPs are unknown) in the --require "
        "category (default category: fp16)",
    )
    c.add_argument(
        "--fail-on",
        metavar="CODE[,CODE]",
        action="append",
        default=[],
        help="fail when any call site has a flag with one of these codes (repeatable; codes: "
        "see the table in tf_fp16ops/audit/codes.py, e.g. fake-fp16,fp16-acc-long-reduction)",
    )
    c.add_argument(
        "--require",
        choices=("fp16-accumulate", "fp16"),
        help="category that must cover all call sites (or --fail-under of them)",
    )
    r = p.add_argument_group("runtime evidence (executes the model)")
    r.add_argument(
        "--run",
        action="store_true",
        help="EXECUTE the model once (SavedModel signature or .keras model) and probe the executed "
        "convolutions; report static vs observed accumulation per conv",
    )
    r.add_argument(
        "--input-shape",
        action="append",
        default=[],
        metavar="NAME=D0,D1,...",
        help="--run: shape of input NAME where the signature leaves dimensions unknown "
        "(repeatable; "
        "an unknown batch dimension defaults to 1)",
    )
    r.add_argument(
        "--seed", type=int, default=0, help="--run: seed of the random inputs (default 0)"
    )
    r.add_argument(
        "--probe-switch",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="--run: also run the probes in a subprocess with this environment switch "
        "(e.g. TF_CONV2D_USE_FP16_ACCUMULATE=1; several in one subprocess "
        "joined by "
        "commas, e.g. TF_CONV2D_USE_FP16_ACCUMULATE=1,TF_ENABLE_ONEDNN_OPTS=0); "
        "repeatable, one subprocess each",
    )
    t = p.add_argument_group("TensorBoard")
    t.add_argument(
        "--logdir",
        metavar="DIR",
        help="also write TensorBoard event files (text, scalars, graph) to DIR",
    )
    return p


def _parse_env(items: list[str]) -> dict[str, str]:
    env = {}
    for item in items:
        if "=" not in item or not item.split("=", 1)[0]:
            raise ValueError(f"--env expects NAME=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        env[k] = v
    return env


def _run(path: str, ctx, args, shapes, switch_envs):
    """--run for one path: (report with runtime evidence, loaded model for the TensorBoard
    graph)."""
    import tensorflow as tf

    from .errors import AuditInputError
    from .limits import Limits
    from .loader import build_keras, load_path
    from .runtime.evidence import verify_path

    try:
        report = verify_path(
            path,
            ctx,
            signature=args.signature,
            input_shapes=shapes,
            seed=args.seed,
            switch_envs=switch_envs,
            max_weights=args.max_weights,
        )
    except (tf.errors.OpError, RuntimeError) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise AuditInputError(f"{path}: executing the model failed: {msg}") from None
    if path.endswith(".keras"):
        model = build_keras(path, Limits(max_weights=args.max_weights))
    else:
        model = load_path(path)
    return report, model


def _write_logdir(report, logdir: str, model) -> None:
    """TensorBoard event files for one report; an unwritable `logdir` is an AuditInputError."""
    from .errors import AuditInputError
    from .render.tensorboard import write_tensorboard

    try:
        write_tensorboard(report, logdir, [(u.label, u.graph_def) for u in model.units])
    except OSError as e:
        msg = e.strerror or str(e)
        raise AuditInputError(
            f"--logdir {logdir}: cannot write event files: {msg.strip().splitlines()[0]}"
        ) from None


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.fail_under is not None and not 0.0 <= args.fail_under <= 1.0:
        parser.error(f"--fail-under must be a fraction in [0, 1], got {args.fail_under}")
    from .codes import parse_codes

    try:
        fail_on = tuple(c for item in args.fail_on for c in parse_codes(item))
    except ValueError as e:
        parser.error(str(e))
    if args.logdir is not None and (
        not args.logdir or (os.path.exists(args.logdir) and not os.path.isdir(args.logdir))
    ):
        print(f"tf-fp16-audit: error: --logdir {args.logdir!r}: not a directory", file=sys.stderr)
        return 2
    if args.run or args.build_keras:
        # Only these execute or build the model; the static audit never imports TensorFlow.
        from .._platform.quiet import import_tensorflow

        try:
            import_tensorflow()
        except ImportError as e:
            flag = "--run" if args.run else "--build-keras"
            print(f"tf-fp16-audit: error: {flag} needs TensorFlow: {e}", file=sys.stderr)
            return 2
    from .analyze import analyze, select_kind
    from .context import RuntimeContext
    from .errors import AuditInputError, MalformedModelError, as_text, printable
    from .gates import check, check_codes
    from .loader import build_keras, load_path
    from .render.jsonfmt import render_json
    from .render.markdown import render_markdown
    from .render.terminal import render_terminal

    try:
        ctx = RuntimeContext.from_process().with_overrides(
            device=args.device,
            env=_parse_env(args.env),
            amp=args.amp,
            compute_capability=args.compute_capability,
            cudnn_version=args.cudnn_version,
            cpu_onednn_fp16=args.cpu_onednn_fp16,
        )
    except ValueError as e:
        print(f"tf-fp16-audit: error: {e}", file=sys.stderr)
        return 2
    from .limits import Limits

    limits = Limits(
        max_file_bytes=args.max_file_size,
        max_nodes=args.max_nodes,
        max_sites=args.max_sites,
        max_expansions=args.max_expansions,
        max_path_frames=args.max_path_frames,
        max_weights=args.max_weights,
        external_dirs=tuple(args.allow_external_dir),
    )
    outputs, status, failed, wrote_logdir = [], 0, False, False
    reports = []
    run_opts = None
    if args.run:
        from .runtime.inputs import parse_input_shapes

        try:
            run_opts = (
                parse_input_shapes(args.input_shape),
                tuple(_parse_env(item.split(",")) for item in args.probe_switch),
            )
        except ValueError as e:
            print(
                f"tf-fp16-audit: error: {str(e).replace('--env', '--probe-switch')}",
                file=sys.stderr,
            )
            return 2
    elif args.input_shape or args.probe_switch:
        given = [
            f
            for f, v in (("--input-shape", args.input_shape), ("--probe-switch", args.probe_switch))
            if v
        ]
        parser.error(f"{' and '.join(given)} need{'s' if len(given) == 1 else ''} --run")
    for i, path in enumerate(args.paths):
        try:
            if run_opts is not None:
                report, model = _run(path, ctx, args, *run_opts)
                if args.ops != "all":
                    report = select_kind(report, args.ops)
            else:
                model = (
                    build_keras(path, limits)
                    if args.build_keras and path.endswith(".keras")
                    else load_path(path, limits)
                )
                report = analyze(model, ctx, signature=args.signature, limits=limits)
                if args.ops != "all":
                    report = select_kind(report, args.ops)
            if args.logdir:
                sub = (
                    args.logdir if len(args.paths) == 1 else os.path.join(args.logdir, f"model{i}")
                )
                _write_logdir(report, sub, model)
                wrote_logdir = True
            reports.append(report)
            if args.format == "table":
                outputs.append(render_terminal(report, args.max_rows))
            elif args.format == "markdown":
                outputs.append(render_markdown(report))
        # A path that cannot be audited is one error line and exit status 2; the other paths
        # are still audited and reported (as grep and compilers do with several files).
        except MalformedModelError as e:
            print(f"tf-fp16-audit: error: {printable(as_text(str(e.at(path))))}", file=sys.stderr)
            failed = True
            continue
        except AuditInputError as e:
            print(f"tf-fp16-audit: error: {printable(as_text(str(e)))}", file=sys.stderr)
            failed = True
            continue
        except Exception as e:  # noqa: BLE001 - last resort: a clean message instead of a traceback
            msg = " ".join(str(e).split())[:500]
            print(
                f"tf-fp16-audit: error: internal error while auditing {printable(as_text(path))}: "
                f"{type(e).__name__}: {printable(msg)}",
                file=sys.stderr,
            )
            failed = True
            continue
        for reason in report.partial:
            print(
                f"tf-fp16-audit: over budget: {printable(as_text(path))}: {printable(reason)}",
                file=sys.stderr,
            )
        for gate in (check(report, args.fail_under, args.require), check_codes(report, fail_on)):
            if gate is not None:
                print(f"{printable(as_text(path))}: {printable(gate.message)}", file=sys.stderr)
                if not gate.passed:
                    status = 1
    if failed and not reports:
        return 2
    if args.format == "json":
        import json

        outputs = (
            [render_json(reports[0])]
            if len(args.paths) == 1
            else [json.dumps([r.to_dict() for r in reports], indent=2) + "\n"]
        )
    text = "\n".join(outputs)
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as e:
            print(f"tf-fp16-audit: error: --output {args.output}: {e.strerror}", file=sys.stderr)
            return 2
    else:
        sys.stdout.write(text)
    if wrote_logdir:
        print(f"TensorBoard: tensorboard --logdir {args.logdir}", file=sys.stderr)
    return 2 if failed else status
