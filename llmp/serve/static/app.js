// llmp serve: tabs, the editor's located diagnostics, and clicks on layouts. Everything else is
// htmx: each tab posts the whole form (#view) and swaps in the fragment the server returns.
(function () {
  "use strict";
  const form = document.getElementById("view");
  const text = document.getElementById("text");
  const gutter = document.getElementById("gutter");

  function show(tab) {
    document.body.dataset.tab = tab;
    document.getElementById("tab-field").value = tab;
    for (const b of document.querySelectorAll(".tabs button")) {
      b.classList.toggle("active", b.dataset.tab === tab);
      b.setAttribute("aria-selected", b.dataset.tab === tab ? "true" : "false");
    }
    if (tab === "prediction") htmx.trigger("#prediction-out", "show-prediction");
    if (tab === "whatif") htmx.trigger(document.body, "show-whatif");
    if (tab === "export") refreshLink();
  }

  function refreshLink() {
    const data = new FormData(form);
    const params = new URLSearchParams();
    for (const [k, v] of data.entries()) {
      if (k === "layout" || k === "pick_node" || k === "pick_node_choice" || v === "") continue;
      params.append(k, v);
    }
    const a = document.getElementById("view-link");
    a.href = "/?" + params.toString();
    a.textContent = location.origin + "/?" + params.toString().slice(0, 80) + "…";
  }

  // Line numbers, with the diagnostic's line marked.
  function numberLines() {
    const n = text.value.split("\n").length;
    const diag = document.getElementById("check-error");
    const bad = diag && diag.dataset.line ? parseInt(diag.dataset.line, 10) : 0;
    const rows = [];
    for (let i = 1; i <= n; i++) rows.push(i === bad ? '<b class="bad">' + i + "</b>" : String(i));
    gutter.innerHTML = rows.join("<br>");
    gutter.scrollTop = text.scrollTop;
  }

  // Select the span a diagnostic points at (click the message).
  function selectSpan(d) {
    const line = parseInt(d.dataset.line, 10);
    if (!line) return;
    const col = parseInt(d.dataset.column || "1", 10);
    const endLine = parseInt(d.dataset.endLine || String(line), 10);
    const endCol = parseInt(d.dataset.endColumn || String(col + 1), 10);
    const lines = text.value.split("\n");
    const offset = (l, c) => lines.slice(0, l - 1).reduce((s, x) => s + x.length + 1, 0) + c - 1;
    text.focus();
    text.setSelectionRange(offset(line, col), offset(endLine, endCol));
  }

  for (const b of document.querySelectorAll(".tabs button")) b.addEventListener("click", () => show(b.dataset.tab));
  text.addEventListener("input", numberLines);
  text.addEventListener("scroll", () => { gutter.scrollTop = text.scrollTop; });
  document.body.addEventListener("htmx:afterSwap", (e) => {
    if (e.detail.target.id === "diagnostics") numberLines();
  });
  document.body.addEventListener("click", (e) => {
    const d = e.target.closest("#check-error");
    if (d) selectSpan(d);
    const layout = e.target.closest("[data-layout]");
    if (layout) {
      document.getElementById("layout-field").value = layout.dataset.layout;
      document.getElementById("tab-field").value = "editor";
      form.removeAttribute("hx-post");
      form.submit();
    }
  });
  document.body.addEventListener("keydown", (e) => {
    const layout = e.target.closest && e.target.closest("[data-layout]");
    if (layout && (e.key === "Enter" || e.key === " ")) { e.preventDefault(); layout.dispatchEvent(new MouseEvent("click", {bubbles: true})); }
  });

  // The catalog picker: nodes of the chosen GPU, then write the node into the spec.
  const gpu = document.getElementById("pick-gpu");
  const node = document.getElementById("pick-node");
  gpu.addEventListener("change", () => {
    let first = null;
    for (const o of node.options) {
      o.hidden = gpu.value !== "" && o.dataset.gpu !== gpu.value;
      if (!o.hidden && first === null) first = o;
    }
    if (first) node.value = first.value;
  });
  document.getElementById("use-node").addEventListener("click", () => {
    document.getElementById("pick-node-field").value = node.value;
    document.getElementById("tab-field").value = "editor";
    form.submit();
  });

  numberLines();
  show(document.body.dataset.tab || "editor");
})();
