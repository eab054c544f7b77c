// The episode table of view/index.html: rows from index-data.js (window.VIEW_DATA), filtered, sorted and drawn
// one page at a time (PAGE rows), so the table of a 2,000-episode run costs what 100 rows cost. The filter state
// lives in the URL's hash (#outcome=resolved&step=3), so a filtered view can be linked and reloaded.
"use strict";
(function () {
  const PAGE = 100;
  const data = window.VIEW_DATA || { columns: [], rows: [] };
  const col = Object.fromEntries(data.columns.map((c, i) => [c, i]));
  const rows = data.rows;
  // shown columns: [column, header, kind of filter]
  const SHOWN = [
    ["instance", "instance", "text"], ["repo", "repo", "select"], ["kind", "kind", "select"],
    ["step", "step", "select"], ["sample", "sample", "select"], ["exit", "exit", "select"],
    ["steps", "turns", ""], ["tokens", "tokens", ""], ["reward", "reward", "select"],
    ["outcome", "outcome", "select"], ["failure", "failure", "select"], ["suspicious", "suspicious", "select"],
  ].filter(([c]) => c in col && rows.some((r) => r[col[c]] !== null && r[col[c]] !== ""));
  const state = { sort: null, desc: false, page: 0, f: {} };

  function readHash() {
    const h = new URLSearchParams(location.hash.slice(1));
    state.f = {};
    for (const [k, v] of h) if (k in col) state.f[k] = v;
    state.sort = h.get("sort") || null;
    state.desc = h.get("desc") === "1";
    state.page = Math.max(0, parseInt(h.get("page") || "0", 10) || 0);
  }
  function writeHash() {
    const h = new URLSearchParams();
    for (const [k, v] of Object.entries(state.f)) if (v !== "") h.set(k, v);
    if (state.sort) h.set("sort", state.sort);
    if (state.desc) h.set("desc", "1");
    if (state.page) h.set("page", String(state.page));
    const s = h.toString();
    history.replaceState(null, "", s ? "#" + s : location.pathname);
  }
  const show = (v) => (v === null || v === undefined ? "" : String(v));

  function filtersUI() {
    const box = document.getElementById("filters");
    box.textContent = "";
    for (const [c, label, kind] of SHOWN) {
      if (!kind) continue;
      const wrap = document.createElement("label");
      wrap.textContent = label + " ";
      let el;
      if (kind === "text") {
        el = document.createElement("input");
        el.type = "search";
        el.placeholder = "contains…";
      } else {
        el = document.createElement("select");
        const values = [...new Set(rows.map((r) => show(r[col[c]])))].filter((v) => v !== "");
        values.sort((a, b) => (isNaN(a) || isNaN(b) ? a.localeCompare(b) : a - b));
        if (c === "suspicious") values.splice(0, values.length, "any");
        for (const v of ["", ...values]) {
          const o = document.createElement("option");
          o.value = v;
          o.textContent = v === "" ? "all" : v;
          el.appendChild(o);
        }
      }
      el.id = "filter-" + c;
      el.value = state.f[c] || "";
      el.addEventListener("input", () => { state.f[c] = el.value; state.page = 0; draw(); });
      wrap.appendChild(el);
      box.appendChild(wrap);
    }
  }

  function matches(r) {
    for (const [c, v] of Object.entries(state.f)) {
      if (v === "") continue;
      const cell = show(r[col[c]]);
      if (c === "instance") { if (!cell.toLowerCase().includes(v.toLowerCase())) return false; }
      else if (c === "suspicious") { if (cell === "") return false; }
      else if (cell !== v) return false;
    }
    return true;
  }

  function cmp(a, b) {
    const i = col[state.sort];
    const x = a[i], y = b[i];
    if (x === y) return 0;
    if (x === null || x === "") return 1;
    if (y === null || y === "") return -1;
    const r = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
    return state.desc ? -r : r;
  }

  function head() {
    const tr = document.createElement("tr");
    for (const [c, label] of SHOWN) {
      const th = document.createElement("th");
      th.textContent = label + (state.sort === c ? (state.desc ? " ▼" : " ▲") : "");
      th.dataset.col = c;
      th.addEventListener("click", () => {
        state.desc = state.sort === c ? !state.desc : false;
        state.sort = c;
        state.page = 0;
        draw();
      });
      tr.appendChild(th);
    }
    const thead = document.querySelector("#table thead");
    thead.textContent = "";
    thead.appendChild(tr);
  }

  function draw() {
    let shown = rows.filter(matches);
    if (state.sort && state.sort in col) shown = shown.slice().sort(cmp);
    const pages = Math.max(1, Math.ceil(shown.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    head();
    const body = document.createDocumentFragment();
    for (const r of shown.slice(state.page * PAGE, (state.page + 1) * PAGE)) {
      const tr = document.createElement("tr");
      tr.className = "o-" + r[col.outcome];
      for (const [c] of SHOWN) {
        const td = document.createElement("td");
        td.className = "c-" + c;
        if (c === "instance") {
          const a = document.createElement("a");
          a.href = "episodes/" + r[col.key] + ".html";
          a.textContent = r[col.instance];
          td.appendChild(a);
        } else if (c === "suspicious" && r[col.suspicious]) {
          td.textContent = r[col.suspicious];  // the grader's reasons (cut by the stylesheet; all in the tooltip)
          td.title = r[col.suspicious];
        } else td.textContent = show(r[col[c]]);
        tr.appendChild(td);
      }
      body.appendChild(tr);
    }
    const tbody = document.querySelector("#table tbody");
    tbody.textContent = "";
    tbody.appendChild(body);
    document.getElementById("shown").textContent = String(shown.length);
    pager(pages);
    writeHash();
  }

  function pager(pages) {
    const p = document.getElementById("pager");
    p.textContent = "";
    const btn = (label, to, id) => {
      const b = document.createElement("button");
      b.textContent = label;
      b.id = id;
      b.disabled = to < 0 || to >= pages || to === state.page;
      b.addEventListener("click", () => { state.page = to; draw(); });
      p.appendChild(b);
    };
    btn("« first", 0, "first");
    btn("‹ prev", state.page - 1, "prev");
    const s = document.createElement("span");
    s.id = "page";
    s.textContent = ` page ${state.page + 1} of ${pages} `;
    p.appendChild(s);
    btn("next ›", state.page + 1, "next");
    btn("last »", pages - 1, "last");
  }

  readHash();
  filtersUI();
  draw();
  window.addEventListener("hashchange", () => { readHash(); filtersUI(); draw(); });
  // when the first page of the table is on screen (read by the browser tests and bench/view_build.py)
  performance.mark("view-ready");
  document.documentElement.dataset.ready = String(Math.round(performance.now()));
})();
