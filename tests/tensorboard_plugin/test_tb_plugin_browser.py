"""End to end: `tf-fp16-audit --logdir` on two exports of one small Keras model, a real
`tensorboard` server, and Debian's Chromium (headless, through Selenium and Debian's chromedriver)
driving the "fp16 audit" dashboard: one table row per finding with the right classes, filters,
sorting, the run-vs-run comparison, and a screenshot.

Model: image[16,16,8] -> Conv2D "stem" 3x3x16 -> Conv2D "block1" 3x3x16 -> DepthwiseConv2D "dw"
3x3 -> Conv2D "head" 1x1x32, exported (two signatures, "serve" and "serving_default", so each
conv has two call sites) as
  fp32: policy float32 -> every conv is fp32;
  fp16: policy mixed_float16 with "head" kept at float32, and "block1" converted to this
        package's Fp16Conv2D with accumulation float16 -> on CPU "stem" is fp16-storage (TF's
        Conv2D T=half accumulates in fp32 unless TF_CONV2D_USE_FP16_ACCUMULATE is "1"),
        "block1" fp16-accumulate (Tacc=half), "head" fake-fp16 (a float32 conv fed fp16-rounded
        activations, the seed's conv16_32 pattern).

The fp32 model's `tf_fp16ops.sensitivity(..., logdir=)` results go to the same logdir; the tab
shows them as a bar chart beside that run's call sites.

Set TF_FP16OPS_UPDATE_SCREENSHOT=1 to copy the screenshots to docs/images/fp16_audit_dashboard.png
and docs/images/fp16_audit_sensitivity.png.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="Debian's chromium and chromium-driver are not installed "
    "(`make system-deps` installs them as root)",
)

REPO = Path(__file__).resolve().parents[2]
SCREENSHOT_COPY = REPO / "docs" / "images" / "fp16_audit_dashboard.png"
LAYERS = ("stem", "block1", "dw", "head")
# Expected classes in the fp16 export, from the construction above ("dw" is left to the audit's
# rule for CPU DepthwiseConv2dNative and only checked to be shown as the audit reports it).
EXPECTED_FP16 = {"stem": "fp16-storage", "block1": "fp16-accumulate", "head": "fake-fp16"}
SENS_TOLERANCE = 1e-3
SENSITIVITY_SHOT = REPO / "docs" / "images" / "fp16_audit_sensitivity.png"
SERVER_WAIT_S = 120
UI_WAIT_S = 30


def _layer_of(node: str) -> str:
    """The Keras layer of a conv node name such as "tiny_1/block1_1/Fp16Conv2D/Fp16Conv2D"."""
    for part in node.split("/"):
        base = part.rsplit("_", 1)[0] if part.rsplit("_", 1)[-1].isdigit() else part
        if base in LAYERS:
            return base
    raise AssertionError(f"no layer of {LAYERS} in node name {node!r}")


def _build(policy: str, head_policy: str | None = None):
    import keras

    inp = keras.Input((16, 16, 8), name="image")
    x = keras.layers.Conv2D(16, 3, padding="same", name="stem", dtype=policy)(inp)
    x = keras.layers.Conv2D(16, 3, padding="same", name="block1", dtype=policy)(x)
    x = keras.layers.DepthwiseConv2D(3, padding="same", name="dw", dtype=policy)(x)
    x = keras.layers.Conv2D(32, 1, name="head", dtype=head_policy or policy)(x)
    return keras.Model(inp, x, name="tiny")


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    """Exports both models, runs the audit CLI on each with --logdir; returns
    (logdir, {run: findings})."""
    import numpy as np

    import tf_fp16ops
    from tf_fp16ops.audit.cli import main

    tmp = tmp_path_factory.mktemp("tb_browser")
    fp32 = _build("float32")
    fp32.export(str(tmp / "models" / "fp32"), verbose=False)
    # Sensitivity of the fp32 model into the same --logdir as its audit (run "fp32", the parent
    # of the audit's run "fp32/audit"), as README shows.
    x = np.random.default_rng(0).standard_normal((4, 16, 16, 8)).astype(np.float32)
    tf_fp16ops.sensitivity(
        fp32, x, tolerance=SENS_TOLERANCE, progress=False, logdir=str(tmp / "logs" / "fp32")
    )
    converted = tf_fp16ops.convert(
        _build("mixed_float16", head_policy="float32"), accumulation="float16", layers=["block1"]
    )
    converted.export(str(tmp / "models" / "fp16"), verbose=False)
    findings = {}
    for name in ("fp32", "fp16"):
        out = tmp / f"{name}.json"
        rc = main(
            [
                str(tmp / "models" / name),
                "--device",
                "cpu",
                "--logdir",
                str(tmp / "logs" / name),
                "--format",
                "json",
                "--output",
                str(out),
            ]
        )
        assert rc == 0
        findings[f"{name}/audit"] = json.loads(out.read_text())["findings"]
    _write_newer_release_run(tmp / "logs" / BAD_RUN)
    return tmp / "logs", findings


# A run as a newer release would write it (plugin-data version 99): the tab must name it and
# still show the two good runs.
BAD_RUN = "zz_newer/audit"
BAD_REASON = "fp16_audit plugin_data version 99 is newer than this reader"


def _write_newer_release_run(run_dir):
    from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, types_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    from tf_fp16ops.tensorboard_plugin import metadata

    s = summary_pb2.Summary()
    for tag in (metadata.FINDINGS_TAG, metadata.REPORT_TAG):
        md = summary_pb2.SummaryMetadata(data_class=summary_pb2.DATA_CLASS_TENSOR)
        md.plugin_data.plugin_name = metadata.PLUGIN_NAME
        md.plugin_data.content = json.dumps({"version": 99, "kind": tag.split("/")[1]}).encode()
        t = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, string_val=[b"{}"])
        s.value.add(tag=tag, tensor=t, metadata=md)
    w = EventFileWriter(str(run_dir))
    w.add_event(event_pb2.Event(step=0, wall_time=1.0, summary=s))
    w.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def tensorboard_url(audited, tmp_path_factory):
    """A `tensorboard --logdir` subprocess on a free 127.0.0.1 port, stopped (its process group)
    at the end."""
    logdir, _ = audited
    log = tmp_path_factory.mktemp("tb_log") / "tensorboard.log"
    port = _free_port()
    exe = Path(sys.executable).with_name("tensorboard")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "tensorboard.main"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    with open(log, "wb") as logf:
        proc = subprocess.Popen(
            cmd + ["--logdir", str(logdir), "--host", "127.0.0.1", "--port", str(port)],
            stdout=logf,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_WAIT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(
                    f"tensorboard exited with {proc.returncode}:\n{log.read_text()[-3000:]}"
                )
            try:
                with urllib.request.urlopen(f"{url}/data/plugins_listing", timeout=5) as r:
                    if json.loads(r.read().decode()).get("fp16_audit", {}).get("enabled"):
                        with urllib.request.urlopen(
                            f"{url}/data/plugin/fp16_audit/runs", timeout=5
                        ) as r2:
                            if len(json.loads(r2.read().decode())["runs"]) == 2:
                                break
            except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    f"tensorboard did not serve both fp16_audit runs within {SERVER_WAIT_S} s:\n"
                    f"{log.read_text()[-3000:]}"
                )
            time.sleep(0.5)
        yield url
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1500,1300",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium_profile')}",
    ):
        opts.add_argument(arg)
    # An explicit driver path: Selenium Manager (which would download drivers) is not used.
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(UI_WAIT_S)
    try:
        yield driver
    finally:
        driver.quit()


def _rows(driver):
    """(data-class, class cell text, node, op) of each visible row of the findings table."""
    from selenium.webdriver.common.by import By

    out = []
    for tr in driver.find_elements(By.CSS_SELECTOR, "#findings tbody tr"):
        tds = tr.find_elements(By.TAG_NAME, "td")
        out.append((tr.get_attribute("data-class"), tds[0].text, tds[2].text, tds[3].text))
    return out


def test_dashboard_in_chromium(browser, tensorboard_url, audited, tmp_path):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import Select, WebDriverWait

    _, findings = audited
    # Rows are rebuilt on every change: an element read mid-update is stale, so poll again.
    wait = WebDriverWait(browser, UI_WAIT_S, ignored_exceptions=(StaleElementReferenceException,))
    browser.get(f"{tensorboard_url}/#fp16_audit")
    # The tab is listed in TensorBoard's header, and its iframe loads our module.
    wait.until(lambda d: "fp16 audit" in d.find_element(By.TAG_NAME, "body").text.lower())
    frame = wait.until(
        EC.presence_of_element_located(
            (By.CSS_SELECTOR, 'iframe[src*="plugin_entry.html?name=fp16_audit"]')
        )
    )
    browser.switch_to.frame(frame)

    # Default run: the first in sorted order, fp16/audit. One row per finding, classes as audited.
    fp16 = findings["fp16/audit"]
    assert len(fp16) == 2 * len(LAYERS)  # two signatures
    wait.until(lambda d: len(_rows(d)) == len(fp16))
    assert (
        Select(browser.find_element(By.ID, "run")).first_selected_option.get_attribute("value")
        == "fp16/audit"
    )
    rows = _rows(browser)
    assert Counter((node, cls) for cls, _, node, _ in rows) == Counter(
        (f["node"], f["audit_class"]) for f in fp16
    )
    # The run a newer release wrote is named with its reason beside the good runs, not listed.
    options = [
        o.get_attribute("value")
        for o in Select(browser.find_element(By.ID, "run")).options
        if o.get_attribute("value").endswith("/audit")
    ]
    assert options == ["fp16/audit", "fp32/audit"]
    message = browser.find_element(By.ID, "message")
    assert message.is_displayed()
    assert message.text.startswith(f"Audit runs not shown: run='{BAD_RUN}': {BAD_REASON}")
    assert all(
        cls == text for cls, text, _, _ in rows
    )  # the class chip says what the row colour encodes
    by_layer = {}
    for cls, _, node, _ in rows:
        by_layer.setdefault(_layer_of(node), set()).add(cls)
    for layer, cls in EXPECTED_FP16.items():
        assert by_layer[layer] == {cls}, layer
    assert browser.find_element(By.ID, "row-count").text == f"({len(fp16)} of {len(fp16)} shown)"
    # Rows are coloured by class: each class's rows share one background, distinct from the others.
    colours = {}
    for tr in browser.find_elements(By.CSS_SELECTOR, "#findings tbody tr"):
        colours.setdefault(tr.get_attribute("data-class"), set()).add(
            tr.value_of_css_property("background-color")
        )
    assert all(len(c) == 1 for c in colours.values()) and len(
        {next(iter(c)) for c in colours.values()}
    ) == len(colours)

    # FLOP-share bar: one segment per class with known FLOPs; the legend names every class present.
    legend = {
        li.get_attribute("data-class")
        for li in browser.find_elements(By.CSS_SELECTOR, "#legend li")
    }
    assert legend == {f["audit_class"] for f in fp16}
    segs = browser.find_elements(By.CSS_SELECTOR, "#flop-bar .seg")
    flop_classes = {f["audit_class"] for f in fp16 if f["flops"]}
    assert {s.get_attribute("data-class") for s in segs} == flop_classes
    assert sum(s.size["width"] for s in segs) == pytest.approx(
        browser.find_element(By.ID, "flop-bar").size["width"] - 2, abs=len(segs) + 1
    )  # fills the bar (1px borders)
    # The call-site bar: segment widths proportional to the class counts.
    counts = Counter(f["audit_class"] for f in fp16)
    widths = {
        s.get_attribute("data-class"): s.size["width"]
        for s in browser.find_elements(By.CSS_SELECTOR, "#count-bar .seg")
    }
    inner = browser.find_element(By.ID, "count-bar").size["width"] - 2
    assert widths.keys() == counts.keys()
    for cls, n in counts.items():
        assert widths[cls] == pytest.approx(inner * n / len(fp16), abs=1.5), cls

    # Filters: by class, then by free text.
    Select(browser.find_element(By.ID, "class-filter")).select_by_value("fake-fp16")
    wait.until(lambda d: {r[0] for r in _rows(d)} == {"fake-fp16"})
    assert len(_rows(browser)) == sum(f["audit_class"] == "fake-fp16" for f in fp16) == 2
    Select(browser.find_element(By.ID, "class-filter")).select_by_value("")
    box = browser.find_element(By.ID, "filter")
    box.send_keys("fp16conv2d")  # case-insensitive; matches the op column
    wait.until(lambda d: len(_rows(d)) == 2)
    assert {(r[0], r[3]) for r in _rows(browser)} == {("fp16-accumulate", "Fp16Conv2D")}
    assert browser.find_element(By.ID, "row-count").text == f"(2 of {len(fp16)} shown)"
    box.clear()
    box.send_keys(" ")  # clear() fires no input event; a blank filter matches everything
    wait.until(lambda d: len(_rows(d)) == len(fp16))

    # Sorting: by class, ascending then descending.
    header = browser.find_element(By.CSS_SELECTOR, '#findings th[data-key="class"]')
    header.click()
    classes = [r[0] for r in _rows(browser)]
    assert classes == sorted(classes) and header.get_attribute("aria-sort") == "ascending"
    header.click()
    assert [r[0] for r in _rows(browser)] == sorted(classes, reverse=True)

    # Run-vs-run: compared with the fp32 export, every conv changed class (fp32 has no fp16 conv).
    Select(browser.find_element(By.ID, "compare-run")).select_by_value("fp32/audit")
    wait.until(
        lambda d: (
            d.find_element(By.ID, "comparison").is_displayed()
            and len(d.find_elements(By.CSS_SELECTOR, "#changes tbody tr")) > 0
        )
    )
    changes = [
        (
            tr.get_attribute("data-class-a"),
            tr.get_attribute("data-class-b"),
            tr.find_elements(By.TAG_NAME, "td")[3].text,
        )
        for tr in browser.find_elements(By.CSS_SELECTOR, "#changes tbody tr")
    ]
    assert len(changes) == len(fp16)
    assert {b for _, b, _ in changes} == {"fp32"}
    for layer, cls in EXPECTED_FP16.items():
        assert {a for a, _, node in changes if _layer_of(node) == layer} == {cls}, layer
    assert browser.find_element(By.ID, "comparison-title").text.startswith(
        f"{len(fp16)} convs changed class"
    )

    browser.switch_to.default_content()
    shot = tmp_path / "fp16_audit_dashboard.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    if os.environ.get("TF_FP16OPS_UPDATE_SCREENSHOT") == "1":
        SCREENSHOT_COPY.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, SCREENSHOT_COPY)

    # The other run: all fp32, and the comparison now runs the other way.
    browser.switch_to.frame(
        browser.find_element(By.CSS_SELECTOR, 'iframe[src*="plugin_entry.html?name=fp16_audit"]')
    )
    Select(browser.find_element(By.ID, "compare-run")).select_by_value("fp16/audit")
    Select(browser.find_element(By.ID, "run")).select_by_value("fp32/audit")
    wait.until(lambda d: {r[0] for r in _rows(d)} == {"fp32"})
    assert len(_rows(browser)) == len(findings["fp32/audit"]) == 2 * len(LAYERS)
    wait.until(
        lambda d: (
            {
                tr.get_attribute("data-class-a")
                for tr in d.find_elements(By.CSS_SELECTOR, "#changes tbody tr")
            }
            == {"fp32"}
        )
    )


def _js_exp(v: float) -> str:
    """JavaScript's `v.toExponential(2)` ("1.56e-3")."""
    mantissa, exp = f"{v:.2e}".split("e")
    return f"{mantissa}e{int(exp):+d}"


def test_sensitivity_chart_beside_the_call_sites(browser, tensorboard_url, audited, tmp_path):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import Select, WebDriverWait

    _, findings = audited
    url = f"{tensorboard_url}/data/plugin/fp16_audit/sensitivity?run=fp32"
    with urllib.request.urlopen(url, timeout=10) as r:
        result = json.loads(r.read().decode())["result"]
    wait = WebDriverWait(browser, UI_WAIT_S, ignored_exceptions=(StaleElementReferenceException,))
    browser.get("about:blank")  # a fresh page load, not a hash change of the previous test's page
    browser.get(f"{tensorboard_url}/#fp16_audit")
    frame = wait.until(
        EC.presence_of_element_located(
            (By.CSS_SELECTOR, 'iframe[src*="plugin_entry.html?name=fp16_audit"]')
        )
    )
    browser.switch_to.frame(frame)
    wait.until(lambda d: len(_rows(d)) == len(findings["fp16/audit"]))

    # fp16/audit has no sensitivity run beside it: no chart, no sensitivity column.
    def sens_run(d):
        option = Select(d.find_element(By.ID, "sens-run")).first_selected_option
        return option.get_attribute("value")

    assert sens_run(browser) == ""
    assert not browser.find_element(By.ID, "sensitivity").is_displayed()
    column = browser.find_element(By.CSS_SELECTOR, '#findings th[data-key="sensitivity"]')
    assert not column.is_displayed()

    # fp32/audit: the sensitivity run "fp32" is picked, one bar per converted layer, by rank.
    Select(browser.find_element(By.ID, "run")).select_by_value("fp32/audit")
    wait.until(lambda d: sens_run(d) == "fp32")
    bar_css = "#sens-chart rect.sens-bar"
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, bar_css)) == len(LAYERS))
    bars = browser.find_elements(By.CSS_SELECTOR, bar_css)
    names = [b.get_attribute("data-layer") for b in bars]
    assert sorted(names) == sorted(LAYERS)  # every conv layer of the model, once
    assert [int(b.get_attribute("data-rank")) for b in bars] == list(range(1, len(LAYERS) + 1))
    by_name = {layer["name"]: layer for layer in result["layers"]}
    # Each bar's label: the layer's position in the model, its Keras path and its class.
    labels = [t.text for t in browser.find_elements(By.CSS_SELECTOR, "#sens-chart text.label")]
    assert labels == [
        f"#{by_name[n]['position']} {by_name[n]['path']} ({by_name[n]['class_name']})"
        for n in names
    ]
    assert all(by_name[n]["path"].endswith("/" + n) for n in names)
    # Log axis: bar length grows with max_rel; in-set bars end left of the tolerance line.
    widths = [float(b.get_attribute("width")) for b in bars]
    assert widths == sorted(widths, reverse=True) and widths[0] > widths[-1] > 0
    tol_x = float(browser.find_element(By.ID, "sens-tolerance").get_attribute("x1"))
    in_set = {n for n in names if by_name[n]["in_fp16_set"]}
    assert 0 < len(in_set) < len(LAYERS)  # SENS_TOLERANCE lies between this model's errors
    colours = {}
    for b, w in zip(bars, widths, strict=True):
        n = b.get_attribute("data-layer")
        assert (b.get_attribute("data-in-set") == "true") == (n in in_set)
        colours.setdefault(n in in_set, set()).add(b.value_of_css_property("fill"))
        if n in in_set:
            assert float(b.get_attribute("x")) + w <= tol_x + 0.5, n
    assert len(colours[True]) == len(colours[False]) == 1 and colours[True] != colours[False]
    # The call-site table: every row's sensitivity cell names its layer's max_rel and rank.
    wait.until(
        lambda d: all(
            tr.find_elements(By.TAG_NAME, "td")[-1].text
            for tr in d.find_elements(By.CSS_SELECTOR, "#findings tbody tr")
        )
    )
    for tr in browser.find_elements(By.CSS_SELECTOR, "#findings tbody tr"):
        tds = tr.find_elements(By.TAG_NAME, "td")
        layer = by_name[_layer_of(tds[2].text)]
        want = f"max_rel {_js_exp(layer['max_rel'])} · rank {layer['rank']}"
        assert tds[-1].text.startswith(want), tds[-1].text

    browser.switch_to.default_content()
    shot = tmp_path / "fp16_audit_sensitivity.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    if os.environ.get("TF_FP16OPS_UPDATE_SCREENSHOT") == "1":
        SENSITIVITY_SHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, SENSITIVITY_SHOT)
