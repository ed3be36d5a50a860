"""The routes of ``llmp serve``: a Starlette app whose pages lay out what the library returns.

One form holds the whole view (spec text, overrides, tab, plan and search inputs); every request
posts it, htmx swaps the returned fragment into its tab, and a link made of the same fields
(``GET /?...``) reproduces the view. Bad input (spec text, a form value, a query string) comes
back as the diagnostic the CLI prints, in the tab and at the field; never a traceback.
"""

from __future__ import annotations

import csv
import io
import json
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.datastructures import FormData, QueryParams
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from llmp.dsl.includes import read_file
from llmp.errors import InputError, LlmpError
from llmp.hardware.catalog import catalog_ids
from llmp.planning.plot import plot
from llmp.serve import compute, pages
from llmp.serve.edit import with_use, write_sets
from llmp.serve.view import Tab, View, download_name, from_params

HERE = Path(__file__).parent
STARTER = """# A starting point: Llama 3 8B on four DGX H100 nodes (edit it, or start llmp serve with a .llmp file)
use "dgx_h100"
model llama3_8b { arch = llama  layers = 32  hidden = 4096  heads = 32  kv_heads = 8
                  ffn_hidden = 14336  vocab = 128256  seq_len = 8192 }
cluster four_dgx { node = dgx_h100  nodes = 4 }
train { precision = bf16  global_batch = 512  micro_batch = 1  recompute = selective
        parallel { tp = 8  sequence_parallel = true  zero = 1 } }
"""
"""The spec shown when the app is started without one (the README's tour spec)."""


def _read(path: str) -> tuple[str, str]:
    return path, read_file(path)


class Page:
    """The app's state: the specs it was started with, and its templates."""

    def __init__(self, specs: Sequence[str]) -> None:
        self.specs = [_read(p) for p in specs]
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))
        self.templates.env.globals.update(pages.GLOBALS)

    @property
    def default(self) -> tuple[str, str]:
        return self.specs[0] if self.specs else ("starter.llmp", STARTER)

    async def view(self, request: Request) -> tuple[View, Mapping[str, str]]:
        """The view the request describes (its form, else its query string), and the raw fields."""
        data: FormData | QueryParams = await request.form() if request.method == "POST" else request.query_params
        single = {k: v for k, v in data.items() if isinstance(v, str)}
        if "spec" in single:
            try:
                filename, text = self.specs[int(single["spec"])]
            except (ValueError, IndexError):
                raise InputError(f"spec={single['spec']!r} names none of the {len(self.specs)} specs the app serves",
                                 hint="use spec=0 for the first file given to llmp serve") from None
            single = {**single, "file": filename, "text": text}
        lists = {"set": [v for v in data.getlist("set") if isinstance(v, str)]}
        return pages.merge_controls(from_params(single, lists, self.default), single), single

    def render(self, request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        return self.templates.TemplateResponse(request, name, context, status_code=status)

    def error(self, request: Request, err: LlmpError, view: View | None) -> HTMLResponse:
        """The diagnostic, as the CLI prints it, in the place the request would have filled."""
        fragment = request.headers.get("HX-Request") == "true"
        text = compute.message(err, view) if view is not None else err.render()
        return self.render(request, "error.html", 200 if fragment else 400, message=text, full=not fragment)


def create_app(specs: Sequence[str] = (), *, ahead: bool = True) -> Starlette:
    """The app serving ``specs`` (``.llmp`` paths; the first is shown first). A spec that cannot be
    read is an error now, before the server starts. ``ahead``: after each What-if answer, predict
    the changes one control step away in the background (:func:`llmp.serve.compute.warm`)."""
    page = Page(specs)
    app = Starlette(routes=_Endpoints(page, ahead).routes())
    app.state.page = page
    return app


class _Endpoints:
    """The app's endpoints, each answering from the view its request describes on ``page``; a
    library error comes back as the page's diagnostic (:meth:`guarded`)."""

    def __init__(self, page: Page, ahead: bool) -> None:
        self.page = page
        self.ahead = ahead

    def routes(self) -> list[Route | Mount]:
        guarded = self.guarded
        return [Route("/", guarded(self.index), methods=["GET", "POST"]),
                Route("/check", guarded(self.check), methods=["POST"]),
                Route("/predict", guarded(self.predict), methods=["POST"]),
                Route("/whatif", guarded(self.whatif), methods=["POST"]),
                Route("/search", guarded(self.search), methods=["POST"]),
                Route("/plan", guarded(self.plan), methods=["POST"]),
                Route("/trace", guarded(self.trace), methods=["GET", "POST"]),
                Route("/export/spec", guarded(self.export_spec), methods=["GET", "POST"]),
                Route("/export/plan.csv", guarded(self.export_plan_csv), methods=["GET", "POST"]),
                Route("/export/plan.png", guarded(self.export_plan_png), methods=["GET", "POST"]),
                Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")]

    def guarded(self, endpoint: Any) -> Any:
        page = self.page

        async def run(request: Request) -> Response:
            try:
                return await endpoint(request)
            except LlmpError as err:
                try:
                    view, _ = await page.view(request)
                except LlmpError:
                    view = None
                return page.error(request, err, view)
        return run

    async def index(self, request: Request) -> Response:
        view, fields = await self.page.view(request)
        layout = fields.get("layout", "")
        note = ""
        if fields.get("pick_node"):
            view, note = _with_node(view, fields["pick_node"])
        if layout:
            view, note = _with_layout(view, layout)
        return self.page.render(request, "page.html", **pages.page(view, self.page.specs, note))

    async def check(self, request: Request) -> Response:
        view, _ = await self.page.view(request)
        return self.page.render(request, "diagnostics.html", d=pages.diagnostics(view))

    async def predict(self, request: Request) -> Response:
        view, _ = await self.page.view(request)
        return self.page.render(request, "prediction.html", **pages.prediction(view))

    async def whatif(self, request: Request) -> Response:
        view, _ = await self.page.view(request)
        response = self.page.render(request, "whatif.html", **pages.whatif(view))
        nearby = pages.ahead(view) if self.ahead else []
        if nearby:  # predicted after the response is sent, giving way to any request
            response.background = BackgroundTask(compute.warm, view, nearby)
        return response

    async def search(self, request: Request) -> Response:
        view, _ = await self.page.view(request)
        return self.page.render(request, "search.html", **pages.search(view))

    async def plan(self, request: Request) -> Response:
        view, _ = await self.page.view(request)
        errors = pages.plan_field_errors(view)
        if errors:
            return self.page.render(request, "plan_errors.html", errors=errors)
        return self.page.render(request, "plan.html", **pages.plan(view))

    async def trace(self, request: Request) -> Response:
        view, _ = await self.page.view(request)
        name = download_name(view.filename).removesuffix(".llmp") + ".trace.json"
        return JSONResponse(compute.trace(view), headers={"Content-Disposition": f'attachment; filename="{name}"'})

    async def export_spec(self, request: Request) -> Response:
        view, _ = await self.page.view(request)
        return Response(pages.exported_text(view), media_type="text/plain; charset=utf-8",
                        headers={"Content-Disposition": f'attachment; filename="{download_name(view.filename)}"'})

    async def export_plan_csv(self, request: Request) -> Response:
        view, _ = await self.page.view(request)
        result = pages.run_plan(view)
        out = io.StringIO()
        writer = csv.writer(out)
        rows = pages.plan_rows(result)
        writer.writerow(rows[0].keys())
        writer.writerows(r.values() for r in rows)
        name = download_name(view.filename).removesuffix(".llmp") + ".plan.csv"
        return Response(out.getvalue(), media_type="text/csv",
                        headers={"Content-Disposition": f'attachment; filename="{name}"'})

    async def export_plan_png(self, request: Request) -> Response:
        view, _ = await self.page.view(request)
        result = pages.run_plan(view)
        with compute.LOCK:
            with tempfile.TemporaryDirectory(prefix="llmp-serve-") as tmp:
                out = Path(tmp) / "plan.png"
                plot(result, str(out))
                data = out.read_bytes()
        name = download_name(view.filename).removesuffix(".llmp") + ".plan.png"
        return Response(data, media_type="image/png", headers={"Content-Disposition": f'attachment; filename="{name}"'})


def _with_node(view: View, node: str) -> tuple[View, str]:
    """The view with catalog node ``node`` written into its spec's cluster block, and the note saying so."""
    if node not in catalog_ids()["node"]:
        raise InputError(f"unknown catalog node {node!r}", hint="pick one from the list")
    edited = write_sets(with_use(view.text, node, view.filename), [f"cluster.node={node}"], view.filename)
    view = View(text=edited.text, filename=view.filename, sets=view.sets, tab=Tab.EDITOR, plan=view.plan,
                search=view.search)
    return view, f"node {node} written into the cluster block"


def _with_layout(view: View, layout: str) -> tuple[View, str]:
    """The view with the layout a search point chose (``layout``: its overrides as JSON) written
    into its spec, what could not be written kept as overrides, and the note saying so."""
    try:
        chosen = json.loads(layout)
    except ValueError:
        raise InputError("the chosen layout is not a list of overrides", hint="click a point again") from None
    if not isinstance(chosen, list) or not all(isinstance(s, str) for s in chosen):
        raise InputError("the chosen layout is not a list of overrides", hint="click a point again")
    base = compute.check(View(text=view.text, filename=view.filename))
    edited = write_sets(view.text, pages.changed(chosen, base), view.filename)
    view = View(text=edited.text, filename=view.filename, sets=edited.left, tab=Tab.EDITOR, plan=view.plan,
                search=view.search)
    return view, "layout loaded from the search" + (f"; kept as overrides: {', '.join(edited.left)}"
                                                    if edited.left else "")
