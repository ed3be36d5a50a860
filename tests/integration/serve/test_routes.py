"""The routes of ``llmp serve``, through Starlette's test client: each tab gives what the library
gives, and every bad input (spec text, form value, query string) is a diagnostic, never a 500."""

from __future__ import annotations

import csv
import io
import json
from urllib.parse import parse_qs

import pytest

pytest.importorskip("starlette", reason="llmp serve needs the [serve] extra")
pytest.importorskip("httpx", reason="Starlette's test client needs httpx (the [dev] extra)")

from starlette.testclient import TestClient

import llmp
from llmp.cli import main
from llmp.serve.app import STARTER, create_app
from llmp.serve.edit import write_sets

HX = {"HX-Request": "true"}


@pytest.fixture(scope="module")
def client(small_spec):
    # The test client runs a response's background work before returning: no warm-up here (one
    # test below turns it on and checks it).
    return TestClient(create_app([str(small_spec)], ahead=False))


@pytest.fixture(scope="module")
def form(small_spec):
    return {"file": str(small_spec), "text": small_spec.read_text(), "tab": "editor"}


def test_the_page_serves_the_spec_and_its_check(client, small_spec):
    r = client.get("/")
    assert r.status_code == 200
    assert "small_llama" in r.text and 'id="check-ok"' in r.text
    assert "/static/htmx.min.js" in r.text and "http" not in r.text.split("<body")[0].replace("http-equiv", "")


def test_every_asset_is_served_from_the_package(client):
    for name in ("htmx.min.js", "app.js", "app.css", "LICENSE.htmx.txt"):
        assert client.get(f"/static/{name}").status_code == 200


def test_without_a_spec_the_starter_is_shown():
    r = TestClient(create_app()).get("/")
    assert r.status_code == 200 and "llama3_8b" in r.text
    assert llmp.loads(STARTER).model.name == "llama3_8b"


def test_check_gives_llmp_checks_diagnostic_with_its_location(client, form, small_spec):
    bad = form["text"].replace("hidden = 2048", "hiden = 2048")
    r = client.post("/check", data={**form, "text": bad}, headers=HX)
    assert r.status_code == 200
    with pytest.raises(llmp.LlmpError) as err:
        llmp.loads(bad, filename=str(small_spec))
    assert 'data-line="2"' in r.text
    assert "unknown field" in r.text and "did you mean &#39;hidden&#39;" in r.text
    assert err.value.span.line == 2


def test_prediction_is_llmp_predicts(client, form, small_spec):
    r = client.post("/predict", data=form, headers=HX)
    assert r.status_code == 200
    pred = llmp.predict(llmp.load(small_spec))
    from llmp.units import format_time

    assert format_time(pred.step_time_s) in r.text
    assert format_time(pred.band[0]) in r.text and format_time(pred.band[1]) in r.text
    assert 'class="gantt"' in r.text and 'id="trace-link"' in r.text


def test_the_trace_link_gives_the_trace_predict_writes(client, form):
    r = client.get("/trace", params=form)
    assert r.status_code == 200
    data = r.json()
    assert data["traceEvents"] and data["otherData"]["step_time_s"] > 0
    assert "attachment" in r.headers["content-disposition"]


def test_whatif_compares_against_the_spec(client, form, small_spec):
    r = client.post("/whatif", data={**form, "wi_tp": "4"}, headers=HX)
    assert r.status_code == 200
    base = llmp.predict(llmp.load(small_spec))
    new = llmp.predict(llmp.load(small_spec, ["parallel.tp=4"]))
    from llmp.units import format_bytes

    assert format_bytes(base.memory.total, binary=True) in r.text
    assert format_bytes(new.memory.total, binary=True) in r.text
    assert "--set parallel.tp=4" in r.text


def test_whatif_predicts_the_neighbouring_changes_ahead(small_spec, form):
    from llmp.serve import compute
    from llmp.serve.controls import neighbours

    warming = TestClient(create_app([str(small_spec)]))
    compute._prediction.cache_clear()
    assert warming.post("/whatif", data=form, headers=HX).status_code == 200
    assert compute.idle(60)
    spec = llmp.load(small_spec)
    nearby = neighbours(spec, [])
    assert ["parallel.tp=4"] in nearby and ["train.recompute=full"] in nearby
    cached = compute._prediction.cache_info().currsize
    assert cached >= 2  # the spec's own and the neighbours the rules accept
    hits = compute._prediction.cache_info().hits
    warming.post("/whatif", data={**form, "wi_tp": "4"}, headers=HX)
    assert compute._prediction.cache_info().hits > hits


def test_a_control_the_layout_cannot_take_is_shown_at_the_field(client, form):
    r = client.post("/whatif", data={**form, "wi_tp": "3"}, headers=HX)
    assert r.status_code == 200
    field = r.text.split('id="err-tp"', 1)[1].split("</small>", 1)[0]
    assert "layout" in field or "divid" in field


def test_the_node_control_brings_its_catalog_node_into_scope(client, form):
    r = client.post("/whatif", data={**form, "wi_node": "dgx_a100"}, headers=HX)
    assert r.status_code == 200 and 'id="whatif-table"' in r.text


def test_search_draws_the_layouts_and_a_click_loads_one(client, form):
    r = client.post("/search", data={**form, "search_gpus": "8", "top": "3"}, headers=HX)
    assert r.status_code == 200
    assert 'class="scatter"' in r.text and "data-layout=" in r.text
    action = r.text.split('data-layout="', 1)[1].split('"', 1)[0].replace("&#34;", '"').replace("&quot;", '"')
    sets = json.loads(action)
    page = client.post("/", data={**form, "layout": json.dumps(sets)})
    assert page.status_code == 200 and "layout loaded from the search" in page.text


def test_plan_reports_the_run_with_failures(client, form):
    r = client.post("/plan", data={**form, "tokens": "10B", "gpus": "8", "price": "2"}, headers=HX)
    assert r.status_code == 200
    assert 'id="plan-ettr"' in r.text and 'id="plan-charts"' in r.text and "kWh" in r.text


@pytest.mark.slow  # a plan search and its chart (2 s)
def test_plan_exports_csv_and_png(client, form):
    data = {**form, "tokens": "10B", "gpus": "8"}
    r = client.post("/export/plan.csv", data=data)
    assert r.status_code == 200
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert any(row["chosen"] == "True" and row["gpus"] == "8" for row in rows)
    assert {"days", "days_low", "days_high", "days_with_failures", "facility_kwh"} <= set(rows[0])
    pytest.importorskip("matplotlib")
    png = client.post("/export/plan.png", data=data)
    assert png.status_code == 200 and png.content[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_exported_spec_has_the_overrides_written_in(client, form, small_spec):
    r = client.post("/export/spec", data={**form, "wi_tp": "4", "wi_micro_batch": "2"})
    assert r.status_code == 200
    spec = llmp.loads(r.text, filename=str(small_spec))
    assert spec.parallel.tp == 4 and spec.train.micro_batch == 2
    assert 'filename="small.llmp"' in r.headers["content-disposition"]


def test_the_link_reproduces_the_view(client, form):
    page = client.post("/", data={**form, "wi_tp": "4", "tab": "whatif"})
    link = page.text.split('id="view-link" href="', 1)[1].split('"', 1)[0].replace("&amp;", "&")
    query = parse_qs(link.removeprefix("/?"))
    assert query["tab"] == ["whatif"] and query["set"] == ["parallel.tp=4"]
    again = client.get(link)
    assert again.status_code == 200 and 'data-tab="whatif"' in again.text


def test_the_picker_writes_the_node_into_the_spec(client, form, small_spec):
    r = client.post("/", data={**form, "pick_node": "dgx_a100"})
    assert r.status_code == 200
    text = r.text.split('name="text"', 1)[1].split(">", 1)[1].split("</textarea>", 1)[0]
    import html

    spec = llmp.loads(html.unescape(text), filename=str(small_spec))
    assert spec.cluster.node.id == "dgx_a100"


@pytest.mark.parametrize(("method", "path", "data", "needle"), [
    ("get", "/?tab=nowhere", None, "unknown tab"),
    ("get", "/?spec=7", None, "names none of the"),
    ("post", "/search", {"search_gpus": "eight"}, "whole numbers"),
    ("post", "/search", {"top": "0"}, "top needs"),
    ("post", "/plan", {"tokens": "lots"}, "token count"),
    ("post", "/plan", {"tokens": "1T", "price": "free"}, "needs a number"),
    ("post", "/plan", {"tokens": "1T", "deadline": "soon"}, "duration"),
    ("post", "/plan", {"tokens": "1T", "pue": "0.5"}, "PUE"),
    ("post", "/", {"layout": "[1, 2"}, "not a list of overrides"),
    ("post", "/", {"pick_node": "nowhere"}, "unknown catalog node"),
    ("post", "/predict", {"set": "parallel.tp"}, "section.field=value"),
    ("post", "/predict", {"text": "model {"}, "error"),
])
def test_bad_input_is_a_diagnostic_never_a_500(client, form, method, path, data, needle):
    if method == "get":
        r = client.get(path)
    else:
        r = client.post(path, data={**form, **data}, headers=HX)
    assert r.status_code in (200, 400)
    assert needle in r.text and "Traceback" not in r.text


def test_write_sets_replaces_written_fields_and_adds_missing_ones(small_spec):
    text = small_spec.read_text()
    edited = write_sets(text, ["parallel.tp=4", "parallel.ep=1", "train.recompute=full", "node.gpus_per_node=8"])
    spec = llmp.loads(edited.text)
    assert spec.parallel.tp == 4 and spec.train.recompute.value == "full"
    assert edited.left == ("node.gpus_per_node=8",)


def test_serve_without_the_web_packages_says_how_to_get_them(capsys, monkeypatch):
    import builtins

    real = builtins.__import__

    def refuse(name, *args, **kwargs):
        if name == "uvicorn":
            raise ImportError("no uvicorn", name="uvicorn")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", refuse)
    assert main(["serve", "--port", "8123"]) == 1
    assert '.[serve]' in capsys.readouterr().err


def test_serve_refuses_a_bad_port_and_a_missing_spec(capsys, tmp_path):
    assert main(["serve", "--port", "70000"]) == 1
    assert "not a TCP port" in capsys.readouterr().err
    assert main(["serve", str(tmp_path / "missing.llmp")]) == 1
    assert "Traceback" not in capsys.readouterr().err


def test_a_plan_input_the_plan_refuses_is_shown_at_its_field(client, form):
    r = client.post("/plan", data={**form, "tokens": "15TB", "restart": "10m", "pue": "0.9"}, headers=HX)
    assert r.status_code == 200
    for field, needle in (("tokens", "token count"), ("restart", "duration"), ("pue", "PUE")):
        slot = r.text.split(f'id="perr-{field}"', 1)[1].split("</small>", 1)[0]
        assert needle in slot
    assert r.text.split('id="perr-gpus"', 1)[1].split("</small>", 1)[0].endswith(">")  # empty: gpus is fine
