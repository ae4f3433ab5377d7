"""Hostile model files: devices, FIFOs, symlinks out of the model, oversized files, zip bombs and
paths named inside a model. Each case runs `tf-fp16-audit` in a subprocess limited to 1 GiB of
address space and 10 s of CPU time (tests/support/hostile.py) and must end with one clear line."""

from __future__ import annotations

import json
import os
import re
import struct
import zipfile

import pytest

from support.hostile import run_bounded
from tf_fp16ops.audit import AuditInputError, RuntimeContext, audit
from tf_fp16ops.audit.limits import Limits

CTX = RuntimeContext(device="cpu", tf_version="test", cpu_onednn_fp16=False)


def _one_error_line(res, needle: str):
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tf-fp16-audit: error: "), res.stderr
    assert needle in lines[0], lines[0]
    assert "internal error" not in lines[0] and "MemoryError" not in lines[0]


@pytest.mark.parametrize("name", ["saved_model.pb", "saved_model.pbtxt"])
def test_saved_model_file_symlinked_to_dev_zero(tmp_path, name):
    sm = tmp_path / "sm"
    sm.mkdir()
    os.symlink("/dev/zero", sm / name)
    res = run_bounded([str(sm)])
    _one_error_line(
        res,
        f"{sm / name}: is a symlink to /dev/zero, outside the model directory {sm}; "
        "only files inside the model are read",
    )


@pytest.mark.parametrize("name", ["x.pb", "x.pbtxt", "m.keras"])
def test_model_file_symlinked_to_dev_zero(tmp_path, name):
    os.symlink("/dev/zero", tmp_path / name)
    res = run_bounded([str(tmp_path / name)])
    _one_error_line(
        res, f"{tmp_path / name}: a character device, not a regular file; only regular files"
    )


@pytest.mark.parametrize("name", ["saved_model.pb", "keras_metadata.pb", "g.pb", "m.keras"])
def test_fifo_does_not_hang(tmp_path, name):
    sm = tmp_path / "sm"
    sm.mkdir()
    if name == "keras_metadata.pb":
        (sm / "saved_model.pb").write_bytes(_saved_model_bytes())
    os.mkfifo(sm / name)
    target = sm if name in ("saved_model.pb", "keras_metadata.pb") else sm / name
    res = run_bounded(["--format", "json", str(target)])
    if name == "keras_metadata.pb":  # unreadable Keras metadata is a note, not an error
        assert res.returncode == 0, res.stderr
        (note,) = [n for n in json.loads(res.stdout)["notes"] if "keras_metadata" in n]
        assert "a FIFO, not a regular file" in note
    else:
        _one_error_line(res, f"{sm / name}: a FIFO, not a regular file")


def _saved_model_bytes() -> bytes:
    from support.callgraph_models import chain
    from tf_fp16ops.audit import protos

    sm = protos.SavedModel()
    mg = sm.meta_graphs.add()
    mg.meta_info_def.tags.append("serve")
    mg.graph_def.CopyFrom(chain(3))
    return sm.SerializeToString()


def test_symlink_inside_the_model_directory_is_read(tmp_path):
    sm = tmp_path / "sm"
    sm.mkdir()
    (sm / "real.pb").write_bytes(_saved_model_bytes())
    os.symlink("real.pb", sm / "saved_model.pb")
    assert len(audit(str(sm), CTX).findings) == 1


def test_file_over_the_size_limit_is_refused_before_reading(tmp_path):
    p = tmp_path / "huge.pb"
    with open(p, "wb") as f:  # sparse: 300 MiB declared, nothing written
        f.truncate(300 * 2**20)
    res = run_bounded([str(p)])
    _one_error_line(
        res,
        f"{p}: 314572800 bytes is over the limit of 268435456 bytes per input file "
        "(raise it with --max-file-size)",
    )


def test_max_file_size_flag(tmp_path):
    p = tmp_path / "g.pb"
    p.write_bytes(_saved_model_bytes())  # a SavedModel message is not a GraphDef: any content
    size = p.stat().st_size
    _one_error_line(
        run_bounded(["--max-file-size", str(size - 1), str(p)]),
        f"{p}: {size} bytes is over the limit of {size - 1} bytes per input file",
    )
    sm = tmp_path / "sm"
    sm.mkdir()
    (sm / "saved_model.pb").write_bytes(_saved_model_bytes())
    ok = run_bounded(["--max-file-size", str(size), "--format", "json", str(sm)])
    assert ok.returncode == 0 and len(json.loads(ok.stdout)["findings"]) == 1
    bad = run_bounded(["--max-file-size", "12X", str(sm)])
    assert bad.returncode == 2 and "--max-file-size: expected a positive size" in bad.stderr


def _keras_zip(path, config: bytes):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("config.json", config)


def _declare_size(path, declared: int):
    """Rewrites the uncompressed size of the archive's only member in its local header and its
    central directory entry (a bomb's header, without writing the bomb)."""
    data = bytearray(path.read_bytes())
    local = data.index(b"PK\x03\x04")
    struct.pack_into("<I", data, local + 22, declared)
    central = data.index(b"PK\x01\x02")
    struct.pack_into("<I", data, central + 24, declared)
    path.write_bytes(bytes(data))


def test_keras_member_declaring_1_28_gb_is_not_decompressed(tmp_path):
    p = tmp_path / "bomb.keras"
    _keras_zip(p, b'{"class_name": "Sequential", "config": {"layers": []}}')
    _declare_size(p, 1_280_000_000)
    _one_error_line(
        run_bounded([str(p)]),
        f"{p}: config.json declares 1280000000 bytes uncompressed, over the limit of 268435456 "
        "bytes per input file (raise it with --max-file-size)",
    )


def test_real_zip_bomb_is_refused_by_its_declared_size(tmp_path):
    p = tmp_path / "bomb.keras"
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as z:
        with z.open("config.json", "w", force_zip64=True) as member:
            for _ in range(8):
                member.write(b" " * 2**20)  # 8 MiB of spaces: 8 KB compressed
    assert p.stat().st_size < 100_000
    _one_error_line(
        run_bounded(["--max-file-size", "1M", str(p)]),
        f"{p}: config.json declares 8388608 bytes uncompressed, over the limit of 1048576",
    )


def test_member_longer_than_declared_is_a_corrupt_archive(tmp_path):
    p = tmp_path / "m.keras"
    _keras_zip(p, b'{"class_name": "Sequential", "config": {"layers": []}}' + b" " * 4000)
    _declare_size(p, 10)  # zipfile stops at the declared size and its CRC check fails
    _one_error_line(run_bounded([str(p)]), f"{p}: not a valid .keras (zip) archive: Bad CRC-32")


def _tfsm_keras(path, filepath: str, n: int = 1):
    layers = [
        {
            "class_name": "TFSMLayer",
            "config": {"name": f"t{i}", "filepath": filepath, "call_endpoint": "serve"},
        }
        for i in range(n)
    ]
    cfg = {"class_name": "Functional", "config": {"name": "m", "layers": layers}}
    _keras_zip(path, json.dumps(cfg).encode())


def test_tfsm_layer_is_an_external_reference_not_read(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "saved_model.pb").write_bytes(_saved_model_bytes())
    p = tmp_path / "m.keras"
    _tfsm_keras(p, str(outside))
    r = audit(str(p), CTX)
    assert r.findings == ()
    assert (
        f"layer 't0' (TFSMLayer) is an external reference to {outside}: not read (the audit "
        "reads only the model file; --allow-external-dir DIR lets it read SavedModels under DIR)"
    ) in r.notes
    # allowed: its conv is audited
    r = audit(str(p), CTX, limits=Limits(external_dirs=(str(tmp_path),)))
    assert [f.node for f in r.findings] == ["conv"]
    res = run_bounded(["--allow-external-dir", str(outside), "--format", "json", str(p)])
    assert res.returncode == 0 and len(json.loads(res.stdout)["findings"]) == 1
    # a directory that does not hold it is no permission
    other = tmp_path / "other"
    other.mkdir()
    r = audit(str(p), CTX, limits=Limits(external_dirs=(str(other),)))
    assert r.findings == ()


def test_3000_tfsm_layers_pointing_at_dev_zero(tmp_path):
    sm = tmp_path / "zero_sm"
    sm.mkdir()
    os.symlink("/dev/zero", sm / "saved_model.pb")
    p = tmp_path / "m.keras"
    _tfsm_keras(p, str(sm), n=3000)
    res = run_bounded(["--format", "json", str(p)])
    assert res.returncode == 0, res.stderr
    notes = json.loads(res.stdout)["notes"]
    assert sum("is an external reference to" in n for n in notes) == 3000
    # even when allowed, the symlink out of that SavedModel directory is not followed
    res = run_bounded(["--allow-external-dir", str(tmp_path), "--format", "json", str(p)])
    assert res.returncode == 0, res.stderr
    notes = json.loads(res.stdout)["notes"]
    bad = [n for n in notes if "could not be read" in n]
    assert len(bad) == 3000 and "outside the model directory" in bad[0]


def test_layer_config_naming_a_vocabulary_file_is_reported(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read\n")
    cfg = {
        "class_name": "Functional",
        "config": {
            "name": "m",
            "layers": [
                {"class_name": "StringLookup", "config": {"name": "s", "vocabulary": str(secret)}}
            ],
        },
    }
    p = tmp_path / "m.keras"
    _keras_zip(p, json.dumps(cfg).encode())
    r = audit(str(p), CTX)
    assert (
        f"layer 's' (StringLookup) names the path {str(secret)!r} in 'vocabulary': an external "
        "reference, not read"
    ) in r.notes
    assert not any("do not read" in n for n in r.notes)


def test_100k_layer_keras_config_is_cut_at_the_site_budget(tmp_path):
    layers = [
        {
            "class_name": "Conv2D",
            "config": {"name": f"c{i}", "filters": 8, "kernel_size": 3, "dtype": "float16"},
            "build_config": {"input_shape": [None, 8, 8, 3]},
        }
        for i in range(100_000)
    ]
    p = tmp_path / "big.keras"
    _keras_zip(p, json.dumps({"class_name": "Sequential", "config": {"layers": layers}}).encode())
    assert p.stat().st_size < 400_000
    # A budget of 5,000 sites (the default is 20,000): the cut is the same code, and the
    # bounded run keeps its margin under the CPU limit on a loaded 2-core machine (the default
    # budget takes ~10 CPU s there, json included).
    res = run_bounded(["--format", "json", "--max-sites", "5000", str(p)])
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    line = (
        "layers: the Keras config is reconstructed only up to 5000 layers with call sites "
        "(--max-sites); layers from #5000 on are left out"
    )
    assert report["partial"] == [line] and len(report["findings"]) == 5_000
    assert res.stderr == f"tf-fp16-audit: over budget: {p}: {line}\n"


def test_library_errors_are_audit_input_errors(tmp_path):
    os.mkfifo(tmp_path / "g.pb")
    with pytest.raises(AuditInputError, match="a FIFO, not a regular file"):
        audit(str(tmp_path / "g.pb"), CTX)
    with pytest.raises(ValueError, match="Limits.max_sites must be a positive integer, got 0"):
        Limits(max_sites=0)


def test_path_that_is_not_utf8_is_escaped_text_in_every_output(tmp_path):
    sm = os.fsdecode(os.path.join(os.fsencode(tmp_path), b"m\xff"))  # "m\udcff"
    os.mkdir(sm)
    with open(os.path.join(sm, "saved_model.pb"), "wb") as f:
        f.write(_saved_model_bytes())
    shown = f"{tmp_path}/m\\xff"  # the bytes of the name as a backslash escape
    logs = tmp_path / "logs"
    res = run_bounded(["--format", "json", "--logdir", str(logs), sm])
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["source"] == shown
    json.dumps(report, ensure_ascii=False).encode("utf-8")  # no lone surrogate (strict codec)
    assert os.listdir(logs)  # event files written
    # Markdown: a name with a backslash is escaped text, not a code span (its "\\" and any "_"
    # of the temporary directory's name backslash-escaped).
    as_markdown = re.sub(r"([\\_])", r"\\\1", shown)
    for fmt, text in (("table", shown), ("markdown", as_markdown)):
        res = run_bounded(["--format", fmt, sm])
        assert res.returncode == 0 and text in res.stdout, (text, res.stdout, res.stderr)
        res.stdout.encode("utf-8")
    missing = os.fsdecode(os.path.join(os.fsencode(tmp_path), b"gone\xfe.pb"))
    res = run_bounded([missing])
    assert res.stderr == (
        f"tf-fp16-audit: error: {tmp_path}/gone\\xfe.pb: no such file or directory\n"
    )


def test_hdf5_file_is_named_as_such(tmp_path):
    p = tmp_path / "model.h5"
    p.write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(200))  # the HDF5 superblock signature
    _one_error_line(
        run_bounded([str(p)]),
        f"{p}: an HDF5 file (a Keras 2 .h5 model or weights), not a SavedModel, GraphDef or "
        ".keras archive",
    )


def test_a_config_of_millions_of_empty_objects_is_refused_at_the_object_limit(tmp_path):
    # 3 million `{}` in `layers`: a 9 MB config.json that json.loads alone would turn into
    # about 0.6 GB of dicts (83 million filled 15 GB); stopped at --max-nodes objects.
    p = tmp_path / "dicts.keras"
    body = b'{"class_name": "Sequential", "config": {"layers": [' + b"{}," * 3_000_000 + b"{}]}}"
    _keras_zip(p, body)
    _one_error_line(
        run_bounded([str(p)]),
        "config.json holds more than 1,000,000 JSON objects, over the node limit "
        "(raise it with --max-nodes)",
    )


def test_200k_layers_of_one_name_get_scopes_in_linear_time(tmp_path):
    # Each duplicate name probed name_1, name_2, ... from 1: quadratic (20,000 took 27 s of CPU;
    # a million, under 150 KB zipped, ran past minutes). Within the bounded run's 10 CPU s now.
    layers = [{"class_name": "ReLU", "config": {"name": "x"}}] * 200_000
    p = tmp_path / "same.keras"
    _keras_zip(p, json.dumps({"class_name": "Sequential", "config": {"layers": layers}}).encode())
    res = run_bounded(["--format", "json", str(p)])
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["findings"] == []


def test_duplicate_layer_names_get_distinct_scopes():
    from tf_fp16ops.audit.keras_config import static_graph_from_config

    conv = {"filters": 2, "kernel_size": 1, "dtype": "float32"}
    layers = [
        {
            "class_name": "Conv2D",
            "config": {**conv, "name": n},
            "build_config": {"input_shape": [None, 4, 4, 2]},
        }
        for n in ("c", "c", "c_1", "c")
    ]
    gd = static_graph_from_config({"class_name": "Sequential", "config": {"layers": layers}})[0]
    convs = sorted(n.name.split("/")[0] for n in gd.node if n.op == "Conv2D")
    assert convs == ["c", "c_1", "c_1_1", "c_2"]
