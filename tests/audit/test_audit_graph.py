"""The call-graph walk: the same call sites as before it was made linear, and bounded on chains
and diamonds (each case in a subprocess under a time and address-space limit)."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from support.callgraph_models import GOLDEN_MODELS, chain, diamond
from support.hostile import run_bounded
from tf_fp16ops.audit import RuntimeContext, audit
from tf_fp16ops.audit.limits import Limits

CTX = RuntimeContext(device="cpu", tf_version="test", cpu_onednn_fp16=False)
GOLDEN = os.path.join(os.path.dirname(__file__), "..", "data", "callgraph_sites_before.json")


@pytest.mark.parametrize("name", sorted(GOLDEN_MODELS))
def test_call_sites_match_the_recorded_output_of_the_previous_walk(name):
    # tests/data/callgraph_sites_before.json: site ids, notes and the SHA-256 of every finding's
    # to_dict() (sorted-key JSON) written by the audit before the walk was rewritten (the
    # per-path walk that rebuilt the set of scopes on the path at every step).
    want = json.load(open(GOLDEN))[name]
    r = audit(GOLDEN_MODELS[name](), CTX)
    assert [f.site_id for f in r.findings] == want["site_ids"]
    assert list(r.notes) == want["notes"]
    got = json.dumps([_schema1(f.to_dict()) for f in r.findings], sort_keys=True).encode()
    assert hashlib.sha256(got).hexdigest() == want["findings_sha256"]
    assert r.partial == ()


def _schema1(d: dict) -> dict:
    """A finding dict in the schema 1.x layout the golden file was recorded in: flags as their
    messages, without what schema 2.0 added (the fields kind and xla, the in-loop / in-branch
    flags)."""
    d = {k: v for k, v in d.items() if k not in ("kind", "xla")}
    d["flags"] = [fl["message"] for fl in d["flags"] if fl["code"] not in ("in-loop", "in-branch")]
    return d


def _paths(gd):
    """Independent reference: every call path from the root to a conv, by plain recursion."""
    fns = {f.signature.name: f for f in gd.library.function}

    def walk(fname, path):
        f = fns[fname]
        out = [path + (n.name,) for n in f.node_def if n.op == "Conv2D"]
        for n in f.node_def:
            callee = n.attr["f"].func.name if "f" in n.attr else None
            if callee and callee not in {p.split("->")[1] for p in path if "->" in p}:
                out += walk(callee, path + (f"{n.name}->{callee}",))
        return out

    return walk("L0", ("top->L0",))


@pytest.mark.parametrize("depth", [2, 5, 9])
def test_diamond_sites_are_every_call_path(depth):
    r = audit(diamond(depth), CTX)
    want = sorted(" > ".join(p[:-1]) + " | " + p[-1] for p in _paths(diamond(depth)))
    got = sorted(f.site_id.split(" | ", 1)[1] for f in r.findings)
    assert got == want and len(got) == 2 ** (depth - 1)


@pytest.mark.parametrize("direct", [False, True], ids=["PartitionedCall", "function-op"])
def test_50k_deep_chain_within_10_s_and_1_gb(tmp_path, direct):
    p = tmp_path / "chain.pb"
    p.write_bytes(chain(50_000, direct=direct).SerializeToString())
    res = run_bounded(["--format", "json", str(p)])
    assert res.returncode == 0, res.stderr
    (f,) = json.loads(res.stdout)["findings"]
    assert len(f["call_nodes"]) == 50_000 and f["function_path"][-1] == "L49999"
    # a provenance trace stops after 10,000 steps (each argument crossing is one), marked so
    assert f["data"]["source_node"] == "(chain too long)"
    assert f["data"]["source_op"] == "?" and len(f["data"]["crossed"]) == 10_000


def test_provenance_crosses_every_call_of_a_5000_deep_chain():
    (f,) = audit(chain(5000), CTX).findings
    assert (f.data.source_node, f.data.source_op, len(f.data.crossed)) == ("x", "Placeholder", 5000)
    assert f.data.crossed[0] == "L4999:a<-c" and f.data.crossed[-1] == "L0:a<-top"
    assert (f.filter.source_node, f.filter.source_op) == ("w", "Const")


def test_depth_40_diamond_is_cut_by_the_path_budget_within_10_s_and_1_gb(tmp_path):
    p = tmp_path / "diamond.pb"
    p.write_bytes(diamond(40).SerializeToString())  # 2**39 call paths, 40 calls each
    res = run_bounded(["--format", "json", str(p)])
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert len(report["findings"]) == 500_000 // 40
    assert len({f["site_id"] for f in report["findings"]}) == 500_000 // 40
    line = (
        "call paths: the first 12500 call sites are reported, whose call paths hold at most "
        "500000 calls in all; the call graph has more (--max-path-frames)"
    )
    assert report["partial"] == [line]
    assert res.stderr == f"tf-fp16-audit: over budget: {p}: {line}\n"


def test_site_budget_marks_the_report_partial_in_every_format(tmp_path):
    p = tmp_path / "diamond.pb"
    p.write_bytes(diamond(20).SerializeToString())
    line = (
        "call sites: the first 300 (call path, op) pairs are reported (ops: "
        "convolutions and the matmul family); the call graph has more (--max-sites)"
    )
    table = run_bounded(["--max-sites", "300", str(p)])
    assert table.stdout.startswith(f"PARTIAL REPORT (over budget): {line}\n")
    md = run_bounded(["--max-sites", "300", "--format", "markdown", str(p)])
    assert f"**Partial report (over budget):** {line}" in md.stdout
    for res in (table, md):
        assert res.returncode == 0 and res.stderr == f"tf-fp16-audit: over budget: {p}: {line}\n"


def test_expansion_budget_marks_the_report_partial():
    r = audit(diamond(30), CTX, limits=Limits(max_expansions=100))
    assert r.partial == (
        "call graph: walk stopped after 100 call edges (--max-expansions); later call paths are "
        "not reported",
    )
    assert 0 < len(r.findings) < 100


def test_node_budget_marks_the_report_partial():
    r = audit(chain(50), CTX, limits=Limits(max_nodes=10))
    assert r.findings == ()
    assert r.partial == (
        "nodes: only the first 10 nodes are indexed (--max-nodes); function 'L7' and later "
        "scopes are cut",
    )


def test_sites_along_one_long_chain_share_a_walk_budget(monkeypatch):
    """Convs hanging off the far end of a long ExpandDims chain each walked the rest of it (a
    9,000-long chain with 3,000 convs: 13.5 million steps, 78 s and 2 GB). The walks share a
    budget (here lowered to 100,000 steps; 1000 convs at 2000-2999 of a 3000 chain need about
    2.5 million); past it the sites' sources are "(chain too long)" and the report is partial."""
    from support.audit_helpers import add_node
    from tf_fp16ops.audit import protos
    from tf_fp16ops.audit.passes import provenance

    monkeypatch.setattr(provenance, "MAX_TOTAL_STEPS", 100_000)

    gd = protos.GraphDef()
    add_node(gd.node, "x", "Placeholder", dtype="DT_HALF")
    add_node(gd.node, "axis", "Const", dtype="DT_INT32")
    add_node(gd.node, "w", "Const", dtype="DT_HALF")
    prev = "x"
    for i in range(3000):
        add_node(gd.node, f"e{i}", "ExpandDims", [prev, "axis"], T="DT_HALF")
        prev = f"e{i}"
    for j in range(1000):
        add_node(
            gd.node,
            f"conv{j}",
            "Conv2D",
            [f"e{2000 + j}", "w"],
            T="DT_HALF",
            strides=[1, 1, 1, 1],
            padding=b"VALID",
        )
    r = audit(gd, CTX)
    assert len(r.findings) == 1000
    sources = [f.data.source_node for f in r.findings]
    assert sources.count("x") > 0 and sources.count("(chain too long)") > 0, sources[:3]
    assert sources.count("x") + sources.count("(chain too long)") == 1000
    assert r.partial == (
        "provenance: the input walks of all call sites took 100,000 steps; the sites after that "
        'have source "(chain too long)"',
    )
