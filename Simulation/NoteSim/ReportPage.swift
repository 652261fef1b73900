import Foundation

/// The page every report is: a skeleton, its data as JSON, and the styles and script that draw it (inline, so the
/// file opens anywhere with no network; no library). `kind` picks the drawing: `timeline` (``TimelineReport``) or
/// `sweep` (``SweepReport``).
enum ReportPage {
    static func html(title: String, kind: String, data: String) -> String {
        // "<" is escaped inside the JSON (only its strings can hold one), so no text can end the script element.
        let safeData = data.replacingOccurrences(of: "<", with: "\\u003c")
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(escape(title))</title>
            <style>
            \(style)</style></head>
            <body data-kind="\(kind)"><div id="app"><noscript>This report draws itself with JavaScript: open it in a browser with scripts on.</noscript></div>
            <script type="application/json" id="data">\(safeData)</script>
            <script>
            \(script)</script>
            </body></html>

            """
    }

    /// Escapes text for HTML.
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.count)
        for c in text {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            default: out.append(c)
            }
        }
        return out
    }

    static let style = #"""
:root { --fg: #1f2430; --muted: #6b7280; --line: #e3e6ea; --panel: #fff; --push: #2563eb; --pull: #0f9488;
  --bad: #c81e1e; --trace: #fde68a; --follow: #f59e0b; }
* { box-sizing: border-box; }
html, body { margin: 0; }
body { font: 13px/1.4 "DejaVu Sans", "Helvetica Neue", Arial, sans-serif; color: var(--fg); background: #f3f4f6; }
code, .mono { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12px; }
h1 { font-size: 18px; margin: 0; }
h2 { font-size: 14px; margin: 0 0 6px; }
h3 { font-size: 12px; margin: 8px 0 4px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); }
button { font: inherit; cursor: pointer; border: 1px solid #cfd4da; background: #fff; border-radius: 4px; padding: 1px 7px; }
button:hover { background: #eef2f7; }
select { font: inherit; max-width: 100%; }
a { color: #1d4ed8; }
.top { display: flex; flex-wrap: wrap; gap: 6px 14px; align-items: center; padding: 10px 18px; background: var(--panel);
  border-bottom: 1px solid var(--line); }
.top .shape { color: var(--muted); }
.top code { background: #f3f4f6; padding: 1px 5px; border-radius: 3px; user-select: all; overflow-wrap: anywhere; }
.badge { font-weight: bold; color: #fff; border-radius: 4px; padding: 2px 8px; letter-spacing: .03em; }
.badge.pass { background: #15803d; } .badge.fail { background: var(--bad); }
.wrap { padding: 10px 18px; display: flex; flex-direction: column; gap: 10px; }
.card { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px; min-width: 0; }
.violation { border: 2px solid var(--bad); }
.violation h2 { color: var(--bad); font-size: 16px; }
.violation .meaning { color: var(--muted); margin: 2px 0 6px; }
.violation .detail { background: #fef2f2; border-left: 3px solid var(--bad); padding: 4px 8px; overflow-wrap: anywhere; }
.chips { display: flex; flex-wrap: wrap; gap: 4px; margin: 4px 0; }
.chip { display: inline-block; border: 1px solid #cfd4da; border-radius: 10px; padding: 0 8px; background: #fff; cursor: pointer;
  white-space: nowrap; }
.chip.trace { background: var(--trace); border-color: #d6b43a; }
.trace-steps { max-height: 76px; overflow-y: auto; }
.chip.note { border-color: var(--follow); }
.chip.on { background: var(--follow); color: #fff; border-color: var(--follow); }
table.side { width: 100%; border-collapse: collapse; table-layout: fixed; margin-top: 6px; }
table.side th, table.side td { border: 1px solid var(--line); padding: 3px 5px; vertical-align: top; text-align: left; overflow-wrap: anywhere; }
table.side th { background: #f8fafc; font-weight: normal; }
table.side td.differs { background: #fff7ed; border-color: #fdba74; }
.tok { font-family: "DejaVu Sans Mono", Menlo, monospace; font-size: 11px; }
.tok b.odd { background: #fed7aa; font-weight: bold; }
.tok b.add { color: #15803d; }
.tok s { color: #b91c1c; }
.tag { display: inline-block; font-size: 10px; border-radius: 3px; padding: 0 4px; margin-left: 3px; background: #e5e7eb; color: #374151; }
.tag.del { background: #fee2e2; color: #991b1b; } .tag.aside { background: #ede9fe; color: #5b21b6; }
.tag.pend { background: #dbeafe; color: #1e40af; } .tag.gone { background: #e5e7eb; }
.summary { display: grid; grid-template-columns: repeat(4, minmax(0, 1fr)) minmax(0, 1.6fr); gap: 10px; }
.summary table { width: 100%; border-collapse: collapse; }
.summary td { padding: 1px 0; vertical-align: top; }
.summary td.v { text-align: right; font-weight: bold; padding-left: 6px; white-space: nowrap; }
.summary td.zero { color: #a0a7b1; font-weight: normal; }
.charts { display: flex; flex-direction: column; gap: 4px; }
.chart { display: block; cursor: pointer; }
.chart-title { display: flex; justify-content: space-between; color: var(--muted); font-size: 11px; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 14px; align-items: center; font-size: 12px; }
.legend span.item { display: inline-flex; align-items: center; gap: 4px; white-space: nowrap; }
.legend svg { display: block; }
.main { display: grid; grid-template-columns: minmax(0, 1fr) 380px; gap: 10px; align-items: start; }
.lanehead { display: flex; font-weight: bold; font-size: 12px; border-bottom: 1px solid var(--line); background: #f8fafc;
  border-radius: 6px 6px 0 0; overflow: hidden; }
.lanehead div { padding: 4px 6px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; border-left: 1px solid var(--line); }
.lanehead div:first-child { border-left: 0; color: var(--muted); font-weight: normal; }
.lanehead .watching { display: block; font-weight: normal; font-size: 10px; color: var(--pull); }
#scroller { height: calc(100vh - 120px); min-height: 420px; overflow-y: scroll; overflow-x: hidden; background: #fff;
  border: 1px solid var(--line); border-top: 0; border-radius: 0 0 6px 6px; position: relative; }
#tl { display: block; }
#tl text { font-family: "DejaVu Sans", Arial, sans-serif; }
#tl .dim { opacity: .35; }
#overview { display: block; width: 100%; cursor: pointer; }
aside.side { position: sticky; top: 8px; max-height: calc(100vh - 16px); overflow-y: auto; display: flex; flex-direction: column; gap: 10px; }
.stephead { display: flex; align-items: center; gap: 6px; }
.stephead h2 { margin: 0; flex: 1; }
.what { margin: 4px 0; }
ul.plain { list-style: none; margin: 0; padding: 0; }
ul.plain li { padding: 2px 0; border-top: 1px solid #f0f1f3; overflow-wrap: anywhere; }
ul.plain li:first-child { border-top: 0; }
.lane-name { color: var(--muted); white-space: nowrap; }
.hist { width: 100%; border-collapse: collapse; table-layout: fixed; }
.hist td { border-top: 1px solid #f0f1f3; padding: 2px 3px; vertical-align: top; overflow-wrap: anywhere; }
.hist tr { cursor: pointer; }
.hist tr:hover { background: #f8fafc; }
.hist tr.trace td:first-child { background: var(--trace); }
.hist tr.sel { outline: 2px solid #1f2430; }
.muted { color: var(--muted); }
.notehead { font-weight: bold; font-size: 14px; margin-top: 8px; }
.error { background: #fee2e2; color: #991b1b; padding: 8px 12px; font-weight: bold; }
/* Sweep index */
table.seeds { width: 100%; border-collapse: collapse; }
table.seeds th, table.seeds td { text-align: left; padding: 3px 6px; border-bottom: 1px solid var(--line); vertical-align: top; }
table.seeds th { background: #f8fafc; position: sticky; top: 0; }
table.seeds td.num { text-align: right; white-space: nowrap; }
table.seeds tr.fail td { background: #fef2f2; }
table.seeds code { user-select: all; overflow-wrap: anywhere; }
.bar { display: inline-block; height: 8px; background: #94a3b8; border-radius: 2px; vertical-align: middle; margin-right: 6px; }
tr.fail .bar { background: var(--bad); }
.stats { display: flex; flex-wrap: wrap; gap: 8px 28px; }
.stats div b { font-size: 18px; display: block; }
"""#

    static let script = #"""
"use strict";
(function () {
  const app = document.getElementById("app");
  window.addEventListener("error", function (e) {
    document.body.setAttribute("data-error", String(e.message));
    const box = document.createElement("div");
    box.className = "error";
    box.textContent = "The report's script failed: " + e.message;
    document.body.insertBefore(box, document.body.firstChild);
  });
  const D = JSON.parse(document.getElementById("data").textContent);
  const ACCOUNT = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#e15759", "#76b7b2", "#c9a227", "#9c755f"];
  const DEVICE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
  const accountColor = (k) => (k < 0 ? "#9ca3af" : ACCOUNT[k % ACCOUNT.length]);
  const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
  const plural = (n, word) => n + " " + word + (n === 1 ? "" : "s");
  function el(tag, attrs, html) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (html !== undefined) e.innerHTML = html;
    return e;
  }
  function seconds(s) {
    if (s < 60) return s.toFixed(s < 10 ? 2 : 1) + " s";
    const m = Math.floor(s / 60);
    return m + " min " + Math.round(s - 60 * m) + " s";
  }

  if (document.body.dataset.kind === "sweep") sweep(); else timeline();

  // ───────────────────────────── The timeline of one run ─────────────────────────────
  function timeline() {
    const last = D.lastStep, devices = D.devices, V = D.violation;
    const short = (s, n) => (s.length > n ? s.slice(0, n - 1) + "…" : s);
    const LEGEND = [
      ["create", "created a note"], ["edit", "edited a note"], ["delete", "deleted a note"], ["signIn", "signed in"],
      ["signOut", "signed out"], ["conflict", "conflict copy"], ["merge", "merged"], ["fault", "fault injected"],
      ["error", "operation failed"], ["clockJump", "clock jump"], ["collide", "forced ID collision"], ["restart", "server restart"],
      ["revoke", "session revoked"], ["deleteAccount", "account deleted"], ["watch", "watch iteration"], ["violation", "violation"],
    ];
    const T = D.touches, NT = T.length / 7;
    const touch = (i) => ({ i: i, s: T[7 * i], lane: T[7 * i + 1], note: T[7 * i + 2], kinds: T[7 * i + 3], text: T[7 * i + 4], state: T[7 * i + 5], account: T[7 * i + 6] });
    const byStep = [], byNote = [];
    for (let i = 0; i < NT; i++) {
      (byStep[T[7 * i]] = byStep[T[7 * i]] || []).push(i);
      (byNote[T[7 * i + 2]] = byNote[T[7 * i + 2]] || []).push(i);
    }
    const X = D.exchanges, exchanges = [], exByStep = [];
    for (let i = 0; i < X.length; i += 7) {
      const e = { s: X[i], d: X[i + 1], pushReq: X[i + 2], pushed: X[i + 3], pullReq: X[i + 4], pulled: X[i + 5], account: X[i + 6] };
      exchanges.push(e);
      (exByStep[e.s] = exByStep[e.s] || []).push(e);
    }
    const evByStep = [];
    for (const e of D.events) if (e.s <= last) (evByStep[e.s] = evByStep[e.s] || []).push(e);
    // Per device: [{from, account, generation}], from step on.
    const spans = [];
    for (let d = 0; d < devices; d++) spans.push([]);
    for (let i = 0; i < D.accountChanges.length; i += 4) {
      const d = D.accountChanges[i];
      if (d < devices) spans[d].push({ from: D.accountChanges[i + 1], account: D.accountChanges[i + 2], generation: D.accountChanges[i + 3] });
    }
    const trace = new Set(V && V.trace ? V.trace : []);
    const accountName = (k, g) => (k < 0 ? "signed out" : D.accounts[k] + (g > 0 ? " #" + (g + 1) : ""));
    const laneName = (l) => (l < 0 ? "server" : "device " + l);
    function kindNames(bits) {
      const out = [];
      for (let b = 0; b < D.kinds.length; b++) if (bits & (1 << b)) out.push(D.kinds[b]);
      return out;
    }
    const noteLabel = (n) => (D.notes[n] ? D.notes[n].l : "note " + n);
    // A note's state on a lane at a step: its last touch there at or before the step.
    // On the server, in `account` when given (after an account deletion one note can be in two accounts).
    function stateAt(lane, note, step, account) {
      let found = null;
      for (const i of byNote[note] || []) {
        if (T[7 * i] > step) break;
        if (T[7 * i + 1] === lane && (lane >= 0 || account === undefined || account < 0 || T[7 * i + 6] === account)) found = touch(i);
      }
      return found;
    }
    function accountAt(d, step) {
      let a = { account: -1, generation: 0 };
      for (const sp of spans[d]) if (sp.from <= step) a = sp;
      return a;
    }
    const tokens = (text) => text.split("\n").filter((t) => t.length > 0);
    function tokenHTML(text, previous, odd) {
      const now = tokens(text);
      const before = previous === null || previous === undefined ? null : new Set(tokens(previous));
      const kept = new Set(now);
      let html = now.map((t) => {
        if (odd && odd.has(t)) return "<b class=odd>" + esc(t) + "</b>";
        if (before && !before.has(t)) return "<b class=add>" + esc(t) + "</b>";
        return esc(t);
      }).join(" ");
      if (before) for (const t of before) if (!kept.has(t)) html += " <s>" + esc(t) + "</s>";
      return html || "<span class=muted>(empty)</span>";
    }
    function stateTags(t) {
      if (!t) return "";
      let s = "";
      if (t.state & 16) s += "<span class='tag gone'>gone</span>";
      else if (t.state & 1) s += "<span class='tag del'>deleted</span>";
      if (t.state & 2) s += "<span class='tag aside'>set aside</span>";
      if (t.state & 4) s += "<span class='tag pend'>pending</span>";
      if (t.state & 8) s += "<span class=tag>conflict copy</span>";
      return s;
    }

    // State: the selected step, the followed notes, the followed account.
    const state = { step: V ? V.step : 0, notes: new Set(V ? V.notes : []), account: -1 };
    const hash = new URLSearchParams(location.hash.slice(1));
    if (hash.has("step")) state.step = Math.max(0, Math.min(last, Number(hash.get("step")) || 0));
    if (hash.has("note")) {
      const n = D.notes.findIndex((x) => x.l === hash.get("note"));
      if (n >= 0) state.notes = new Set([n]);
    }
    if (hash.has("account")) state.account = Number(hash.get("account"));

    // ── Page skeleton
    app.innerHTML = "";
    const top = el("div", { class: "top" });
    top.innerHTML = "<h1>" + esc(D.title) + "</h1>" +
      (D.passed ? "<span class='badge pass'>PASSED</span>" : "<span class='badge fail'>FAILED</span>") +
      "<span class=shape>" + esc(D.shape) + "</span><span class=muted>reproduce:</span><code>" + esc(D.command) + "</code>";
    app.appendChild(top);
    const wrap = el("div", { class: "wrap" });
    app.appendChild(wrap);
    if (V) wrap.appendChild(violationCard());
    const summary = summaryCards();
    if (!V) wrap.appendChild(summary);
    wrap.appendChild(legend());
    const over = el("div", { class: "card", style: "padding:6px 10px" });
    over.innerHTML = "<div class=chart-title><span>The whole run: one row per lane, time running right. Click to jump.</span><span>" +
      "steps 0–" + last + "</span></div>";
    const overview = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    overview.id = "overview";
    over.appendChild(overview);
    wrap.appendChild(over);
    const main = el("div", { class: "main" });
    const left = el("div", { id: "timeline" });
    const head = el("div", { class: "lanehead" });
    const scroller = el("div", { id: "scroller", tabindex: "0" });
    const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    svg.id = "tl";
    scroller.appendChild(svg);
    left.appendChild(head);
    left.appendChild(scroller);
    const side = el("aside", { class: "side" });
    main.appendChild(left);
    main.appendChild(side);
    wrap.appendChild(main);
    if (V) wrap.appendChild(summary);  // a failing run: the violation and the timeline first
    const stepCard = el("div", { class: "card", id: "step" });
    const followCard = el("div", { class: "card", id: "follow" });
    side.appendChild(stepCard);
    side.appendChild(followCard);

    // ── Rows: one per step, more when several devices exchanged requests in it.
    const RH = 18;
    const rows = new Int32Array(last + 1).fill(1);
    for (const e of exchanges) if (e.s <= last) rows[e.s] = Math.max(rows[e.s], (exByStep[e.s] || []).length);
    const rowY = new Float64Array(last + 2);
    for (let s = 0, y = 0; s <= last; s++) { rowY[s] = y; y += rows[s] * RH; rowY[s + 1] = y; }
    // Room after the last step, so that even the last steps can be shown with the steps before them (a violation at
    // the end).
    let height = rowY[last + 1] + 8;
    // How much of the timeline the window shows as the page opens (its top may be lower than the window's bottom
    // minus its height).
    const visibleHeight = () => Math.max(6 * RH, Math.min(scroller.clientHeight, window.innerHeight - scroller.getBoundingClientRect().top - 8));
    function stepAtY(y) {
      let lo = 0, hi = last;
      while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (rowY[mid] <= y) lo = mid; else hi = mid - 1; }
      return lo;
    }
    let L = null;
    function layout() {
      const W = scroller.clientWidth;
      const stepW = 44;
      const serverW = Math.round(Math.max(84, Math.min(140, W * 0.1)));
      const laneW = Math.max(40, Math.min(220, Math.floor((W - stepW - serverW) / devices)));
      L = { W: W, stepW: stepW, serverW: serverW, laneW: laneW, server: stepW + serverW / 2,
        x: (d) => stepW + serverW + d * laneW, cx: (d) => (d < 0 ? stepW + serverW / 2 : stepW + serverW + d * laneW + laneW / 2) };
      let h = "<div style='width:" + stepW + "px'>step</div><div style='width:" + serverW + "px'>server</div>";
      for (let d = 0; d < devices; d++) {
        h += "<div style='width:" + laneW + "px' title='device " + d + "'>device " + d +
          (d < (D.watchers || 0) ? " <span class=watching>watching</span>" : "<span class=watching>&nbsp;</span>") + "</div>";
      }
      head.innerHTML = h;
    }

    // ── Glyphs
    function glyph(kind, x, y, title) {
      const t = "<title>" + esc(title) + "</title>";
      switch (kind) {
        case "create": return "<g><circle cx=" + x + " cy=" + y + " r=5.5 fill='#16a34a'/><path d='M" + (x - 3) + " " + y + "h6M" + x + " " + (y - 3) + "v6' stroke='#fff' stroke-width=1.6 />" + t + "</g>";
        case "edit": return "<g><rect x=" + (x - 4.5) + " y=" + (y - 4.5) + " width=9 height=9 rx=2 fill='#3b82f6'/>" + t + "</g>";
        case "delete": return "<g><circle cx=" + x + " cy=" + y + " r=5.5 fill='#4b5563'/><path d='M" + (x - 2.5) + " " + (y - 2.5) + "l5 5M" + (x + 2.5) + " " + (y - 2.5) + "l-5 5' stroke='#fff' stroke-width=1.5 />" + t + "</g>";
        case "signIn": return "<g><path d='M" + (x - 4) + " " + (y - 5.5) + "l8 5.5l-8 5.5z' fill='#111827'/>" + t + "</g>";
        case "signOut": return "<g><rect x=" + (x - 4.5) + " y=" + (y - 4.5) + " width=9 height=9 fill='#fff' stroke='#111827' stroke-width=2 />" + t + "</g>";
        case "clockJump": return "<g><path d='M" + x + " " + (y - 6) + "l6 6l-6 6l-6 -6z' fill='#7c3aed'/>" + t + "</g>";
        case "collide": return "<g><circle cx=" + (x - 2) + " cy=" + y + " r=4.5 fill='#ea580c' opacity=.8 /><circle cx=" + (x + 2) + " cy=" + y + " r=4.5 fill='#ea580c' opacity=.8 />" + t + "</g>";
        case "restart": return "<g><circle cx=" + x + " cy=" + y + " r=6 fill='#374151'/><text x=" + x + " y=" + (y + 3.5) + " font-size=9 fill='#fff' text-anchor=middle font-weight=bold>R</text>" + t + "</g>";
        case "fault": return "<g><path d='M" + (x + 1) + " " + (y - 7) + "l-5 8h4l-2 6l6 -9h-4z' fill='#dc2626'/>" + t + "</g>";
        case "conflict": return "<g><path d='M" + x + " " + (y - 6) + "l6 11h-12z' fill='#f59e0b'/><text x=" + x + " y=" + (y + 4) + " font-size=8 text-anchor=middle font-weight=bold>!</text>" + t + "</g>";
        case "merge": return "<g><circle cx=" + x + " cy=" + y + " r=5.5 fill='#0d9488'/><text x=" + x + " y=" + (y + 3) + " font-size=8 fill='#fff' text-anchor=middle font-weight=bold>M</text>" + t + "</g>";
        case "error": return "<g><rect x=" + (x - 5) + " y=" + (y - 5) + " width=10 height=10 fill='#ef4444'/><text x=" + x + " y=" + (y + 3.5) + " font-size=9 fill='#fff' text-anchor=middle font-weight=bold>!</text>" + t + "</g>";
        case "violation": return "<g><circle cx=" + x + " cy=" + y + " r=7 fill='#c81e1e'/><path d='M" + (x - 3) + " " + (y - 3) + "l6 6M" + (x + 3) + " " + (y - 3) + "l-6 6' stroke='#fff' stroke-width=2 />" + t + "</g>";
        case "revoke": return "<g><circle cx=" + x + " cy=" + y + " r=5 fill='#fff' stroke='#111827' stroke-width=1.8 /><path d='M" + (x - 3.5) + " " + (y + 3.5) + "l7 -7' stroke='#111827' stroke-width=1.8 />" + t + "</g>";
        case "deleteAccount": return "<g><rect x=" + (x - 5) + " y=" + (y - 5) + " width=10 height=10 fill='#111827'/><path d='M" + (x - 2.5) + " " + (y - 2.5) + "l5 5M" + (x + 2.5) + " " + (y - 2.5) + "l-5 5' stroke='#fff' stroke-width=1.5 />" + t + "</g>";
        case "watch": return "<g><ellipse cx=" + x + " cy=" + y + " rx=6 ry=4 fill='#fff' stroke='#0f9488' stroke-width=1.6 /><circle cx=" + x + " cy=" + y + " r=1.8 fill='#0f9488'/>" + t + "</g>";
        case "sync": return "<g><circle cx=" + x + " cy=" + y + " r=4 fill='#fff' stroke='#6b7280' stroke-width=1.5 />" + t + "</g>";
        default: return "<g><circle cx=" + x + " cy=" + y + " r=3 fill='#6b7280'/>" + t + "</g>";
      }
    }
    function legend() {
      const box = el("div", { class: "card legend", id: "legend" });
      let h = "<b>Legend</b>";
      const icon = (inner, w) => "<svg width=" + (w || 16) + " height=16 viewBox='0 0 " + (w || 16) + " 16'>" + inner + "</svg>";
      for (const [k, name] of LEGEND) h += "<span class=item data-kind='" + k + "'>" + icon(glyph(k, 8, 8, name)) + esc(name) + "</span>";
      h += "<span class=item>" + icon("<path d='M2 6H30' stroke='var(--push)' stroke-width=2 marker-end='url(#lg-push)'/><path d='M30 11H2' stroke='var(--pull)' stroke-width=2 marker-end='url(#lg-pull)'/>" + markers("lg"), 34) + "sync: push ↑ to the server, pull ↓ to the device (changes)</span>";
      for (let k = 0; k < D.accounts.length && k < 8; k++) {
        h += "<span class=item>" + icon("<rect x=1 y=2 width=14 height=12 rx=2 fill='" + accountColor(k) + "' fill-opacity=.25 stroke='" + accountColor(k) + "'/>") + "signed in to " + esc(D.accounts[k]) + "</span>";
      }
      h += "<span class=item>" + icon("<path d='M8 1V15' stroke='#cbd5e1' stroke-dasharray='2 2' stroke-width=2 />") + "signed out</span>";
      h += "<span class=item>" + icon("<circle cx=8 cy=8 r=6 fill='none' stroke='var(--follow)' stroke-width=2.5 />") + "touched the followed note</span>";
      if (V && V.trace) h += "<span class=item>" + icon("<rect x=0 y=3 width=16 height=10 fill='var(--trace)'/>") + "step of the shortened trace</span>";
      box.innerHTML = h;
      return box;
    }
    function markers(prefix) {
      return "<defs><marker id='" + prefix + "-push' viewBox='0 0 8 8' refX=7 refY=4 markerWidth=7 markerHeight=7 orient=auto><path d='M0 0L8 4L0 8z' fill='#2563eb'/></marker>" +
        "<marker id='" + prefix + "-pull' viewBox='0 0 8 8' refX=7 refY=4 markerWidth=7 markerHeight=7 orient=auto><path d='M0 0L8 4L0 8z' fill='#0f9488'/></marker></defs>";
    }

    // ── The swimlanes
    function draw() {
      layout();
      height = rowY[last + 1] + Math.max(8, scroller.clientHeight - 0.6 * visibleHeight());
      const W = L.W, p = [markers("tl")];
      const following = state.notes.size > 0 || state.account >= 0;
      // Row backgrounds: trace steps, the failing step, ten-step rules.
      for (let s = 0; s <= last; s++) {
        const y = rowY[s], h = rowY[s + 1] - y;
        if (V && s === V.step) p.push("<rect x=0 y=" + y + " width=" + W + " height=" + h + " fill='#fee2e2'/>");
        else if (trace.has(s)) p.push("<rect x=0 y=" + y + " width=" + W + " height=" + h + " fill='var(--trace)' fill-opacity=.55 />");
        if (s % 10 === 0) p.push("<path d='M0 " + y + "H" + W + "' stroke='#eef0f3'/>");
        const bold = trace.has(s) || (V && s === V.step);
        p.push("<text x=" + (L.stepW - 6) + " y=" + (y + 13) + " font-size=10 text-anchor=end fill='" + (bold ? "#111827" : "#9ca3af") + "'" + (bold ? " font-weight=bold" : "") + ">" + (s === D.quiescence ? "end" : s) + "</text>");
      }
      // Lane separators.
      p.push("<path d='M" + L.stepW + " 0V" + height + "' stroke='#e5e7eb'/>");
      for (let d = 0; d <= devices; d++) p.push("<path d='M" + L.x(d) + " 0V" + height + "' stroke='#e5e7eb'/>");
      // Account bands.
      const g = [];
      for (let d = 0; d < devices; d++) {
        const list = spans[d];
        for (let i = 0; i < list.length; i++) {
          const sp = list[i], end = i + 1 < list.length ? list[i + 1].from : last + 1;
          const y0 = sp.from === 0 && sp.account < 0 ? 0 : rowY[Math.min(sp.from, last)] + RH / 2;
          const y1 = end > last ? rowY[last + 1] : rowY[end] + RH / 2;
          if (y1 <= y0) continue;
          const x = L.x(d), cx = L.cx(d);
          if (sp.account < 0) {
            g.push("<path d='M" + cx + " " + y0 + "V" + y1 + "' stroke='#cbd5e1' stroke-width=2 stroke-dasharray='3 3'/>");
            continue;
          }
          const c = accountColor(sp.account), dim = state.account >= 0 && state.account !== sp.account;
          const strong = state.account === sp.account;
          let labels = "";
          for (let from = sp.from, first = true; from < end && from <= last; from += 40, first = false) {
            if (!first && end - from < 8) break;
            labels += "<text x=" + (x + L.laneW - 7) + " y=" + (Math.max(y0, rowY[from]) + 12) + " font-size=10 font-weight=bold text-anchor=end fill='" + c + "' stroke='#fff' stroke-width=2.5 paint-order=stroke>" + esc(accountName(sp.account, sp.generation)) + "</text>";
          }
          g.push("<g" + (dim ? " class=dim" : "") + "><rect x=" + (x + 3) + " y=" + y0 + " width=" + (L.laneW - 6) + " height=" + (y1 - y0) + " rx=4 fill='" + c + "' fill-opacity=" + (strong ? .32 : .16) + " stroke='" + c + "' stroke-width=" + (strong ? 2.5 : 1) + " />" + labels +
            "<title>device " + d + " signed in to " + esc(accountName(sp.account, sp.generation)) + " from step " + sp.from + (end <= last ? " to step " + end : "") + "</title></g>");
        }
      }
      p.push(g.join(""));
      // Server restarts: a rule across every lane.
      for (let s = 0; s <= last; s++) for (const e of evByStep[s] || []) {
        if (e.k === "restart") p.push("<path d='M" + L.stepW + " " + (rowY[s] + RH / 2) + "H" + W + "' stroke='#374151' stroke-width=1 stroke-dasharray='6 3' opacity=.6 />");
      }
      // Sync arrows, one row per device that exchanged requests in the step.
      const base = [], labelWidth = {};
      for (let s = 0; s <= last; s++) {
        const list = exByStep[s] || [];
        list.forEach((e, j) => {
          const y = rowY[s] + j * RH + RH / 2, dx = L.cx(e.d), sx = L.stepW + L.serverW - 3;
          const dimmed = following && !(state.account >= 0 && e.account === state.account) && !(V && s === V.step);
          let a = "<g" + (dimmed ? " class=dim" : "") + "><title>step " + s + ": device " + e.d + " pushed " + plural(e.pushed, "change") + " in " + plural(e.pushReq, "request") + ", pulled " + plural(e.pulled, "record") + " in " + plural(e.pullReq, "page") + "</title>";
          if (e.pushReq > 0) a += "<path d='M" + (dx - 4) + " " + (y - 3) + "H" + sx + "' stroke='#2563eb' stroke-width=1.6 stroke-opacity=.8 marker-end='url(#tl-push)' />";
          if (e.pulled > 0) a += "<path d='M" + sx + " " + (y + 3) + "H" + (dx - 4) + "' stroke='#0f9488' stroke-width=1.6 stroke-opacity=.8 marker-end='url(#tl-pull)' />";
          if (e.pushReq === 0 && e.pulled === 0) a += "<path d='M" + (dx - 4) + " " + y + "H" + sx + "' stroke='#94a3b8' stroke-width=1 stroke-dasharray='2 3' />";
          const label = (e.pushReq > 0 ? "↑" + e.pushed : "") + (e.pulled > 0 ? " ↓" + e.pulled : "");
          // The counts right of the arrowheads; the step's glyphs for this device follow them.
          if (label) a += "<text x=" + (dx + 3) + " y=" + (y + 3.5) + " font-size=10 fill='#1f2937' stroke='#fff' stroke-width=3 paint-order=stroke>" + label.trim() + "</text>";
          labelWidth[s + ":" + e.d] = label ? label.trim().length * 6 + 6 : 0;
          a += "</g>";
          base.push(a);
        });
      }
      // Events: glyphs right of the lane's centre (the server's: in its lane).
      for (let s = 0; s <= last; s++) {
        const slots = {};
        for (const e of evByStep[s] || []) {
          if (e.k === "sync" && (e.l < 0 || (exByStep[s] || []).some((x) => x.d === e.l))) continue;
          if (e.k === "watch" && e.l < 0) continue;
          const lane = e.l;
          if (lane >= devices) continue;
          const n = slots[lane] = (slots[lane] || 0) + 1;
          const j = Math.max(0, (exByStep[s] || []).findIndex((x) => x.d === lane));
          const x = (lane < 0 ? L.stepW + 10 : L.cx(lane) + 5 + (labelWidth[s + ":" + lane] || 0)) + (n - 1) * 13, y = rowY[s] + j * RH + RH / 2;
          if (lane >= 0 && x > L.x(lane) + L.laneW - 4) continue;
          base.push("<g" + (following && !(V && s === V.step) ? " class=dim" : "") + ">" + glyph(e.k, x, y, "step " + s + ", " + laneName(lane) + ": " + e.k + " " + e.d) + "</g>");
        }
        // The server lane: what the checks found changed there.
        const changed = { stored: 0, changed: 0, deleted: 0 };
        for (const i of byStep[s] || []) if (T[7 * i + 1] < 0) {
          const k = T[7 * i + 3];
          if (k & (1 << 2)) changed.deleted++; else if (k & (1 << 17)) changed.stored++; else changed.changed++;
        }
        const txt = (changed.stored ? "+" + changed.stored + " " : "") + (changed.changed ? "~" + changed.changed + " " : "") + (changed.deleted ? "−" + changed.deleted : "");
        if (txt) base.push("<text x=" + (L.stepW + L.serverW / 2 + 6) + " y=" + (rowY[s] + 13) + " font-size=10 text-anchor=middle fill='#4b5563'" + (following && !(V && s === V.step) ? " class=dim" : "") + "><title>server notes at step " + s + ": " + changed.stored + " new, " + changed.changed + " changed, " + changed.deleted + " deleted</title>" + txt.trim() + "</text>");
      }
      p.push(base.join(""));
      // The followed notes: a ring wherever they were touched.
      const rings = [];
      for (const n of state.notes) for (const i of byNote[n] || []) {
        const s = T[7 * i], lane = T[7 * i + 1];
        if (s > last || lane >= devices) continue;
        const j = lane < 0 ? 0 : Math.max(0, (exByStep[s] || []).findIndex((x) => x.d === lane));
        const cx = lane < 0 ? L.cx(-1) : L.cx(lane), cy = rowY[s] + j * RH + RH / 2;
        rings.push("<circle class=ring data-step=" + s + " cx=" + cx + " cy=" + cy + " r=7.5 fill='var(--follow)' fill-opacity=.25 stroke='var(--follow)' stroke-width=2.5><title>step " + s + ", " + laneName(lane) + ": " + esc(noteLabel(n)) + " " + esc(kindNames(T[7 * i + 3]).join(", ")) + "</title></circle>");
      }
      p.push(rings.join(""));
      p.push("<text x=" + (W / 2) + " y=" + (rowY[last + 1] + 22) + " font-size=11 text-anchor=middle fill='#9ca3af'>" + (V ? "the run stopped at its violation" : "end of the run") + "</text>");
      p.push("<rect id=cursor x=1 y=0 width=" + (W - 2) + " height=" + RH + " fill='none' stroke='#111827' stroke-width=1.5 rx=2 />");
      svg.setAttribute("width", W);
      svg.setAttribute("height", height);
      svg.setAttribute("viewBox", "0 0 " + W + " " + height);
      svg.innerHTML = p.join("");
      placeCursor();
      drawOverview();
    }
    function placeCursor() {
      const c = svg.querySelector("#cursor");
      if (!c) return;
      c.setAttribute("y", rowY[state.step] + 0.5);
      c.setAttribute("height", rowY[state.step + 1] - rowY[state.step] - 1);
      c.setAttribute("data-step", state.step);
      c.setAttribute("aria-current", "step");
    }
    svg.addEventListener("click", (ev) => {
      const r = svg.getBoundingClientRect();
      select(stepAtY(ev.clientY - r.top), false);
    });

    // ── Overview: the whole run across the page's width.
    function drawOverview() {
      const W = Math.max(200, over.clientWidth - 22), left = 64, rowH = 9, gap = 2;
      const H = 14 + (devices + 1) * (rowH + gap) + 4;
      const x = (s) => left + (s / (last + 1)) * (W - left - 4);
      const wS = Math.max(1, (W - left - 4) / (last + 1));
      const yRow = (lane) => 12 + (lane + 1) * (rowH + gap);
      const p = [];
      p.push("<text x=0 y=" + (yRow(-1) + 8) + " font-size=9 fill='#6b7280'>server</text>");
      for (let d = 0; d < devices; d++) p.push("<text x=0 y=" + (yRow(d) + 8) + " font-size=9 fill='#6b7280'>device " + d + "</text>");
      for (let d = 0; d < devices; d++) {
        const list = spans[d];
        for (let i = 0; i < list.length; i++) {
          const sp = list[i], end = i + 1 < list.length ? list[i + 1].from : last + 1;
          if (sp.account < 0 || end <= sp.from) continue;
          p.push("<rect x=" + x(sp.from) + " y=" + yRow(d) + " width=" + Math.max(1, x(end) - x(sp.from)) + " height=" + rowH + " fill='" + accountColor(sp.account) + "' fill-opacity=.45 />");
        }
      }
      for (const e of exchanges) if (e.s <= last) p.push("<rect x=" + x(e.s) + " y=" + (yRow(e.d) + 2) + " width=" + Math.max(1, wS * 0.8) + " height=" + (rowH - 4) + " fill='#1f2937' opacity=.55 />");
      for (let s = 0; s <= last; s++) {
        for (const e of evByStep[s] || []) {
          if (e.k === "fault" || e.k === "error") p.push("<rect x=" + x(s) + " y=" + yRow(e.l) + " width=" + Math.max(1.5, wS) + " height=3 fill='#dc2626'/>");
          else if (e.k === "restart") p.push("<rect x=" + x(s) + " y=" + yRow(-1) + " width=" + Math.max(1.5, wS) + " height=" + (H - yRow(-1) - 4) + " fill='#374151' opacity=.5 />");
          else if (e.k === "clockJump") p.push("<rect x=" + x(s) + " y=" + (yRow(e.l) + rowH - 3) + " width=" + Math.max(1.5, wS) + " height=3 fill='#7c3aed'/>");
          else if (e.k === "collide") p.push("<rect x=" + x(s) + " y=" + (yRow(e.l) + rowH - 3) + " width=" + Math.max(1.5, wS) + " height=3 fill='#ea580c'/>");
        }
        const server = (byStep[s] || []).filter((i) => T[7 * i + 1] < 0).length;
        if (server) p.push("<rect x=" + x(s) + " y=" + (yRow(-1) + rowH - Math.min(rowH, 2 + server)) + " width=" + Math.max(1, wS * 0.8) + " height=" + Math.min(rowH, 2 + server) + " fill='#64748b'/>");
      }
      for (const s of trace) p.push("<circle cx=" + (x(s) + wS / 2) + " cy=6 r=2.5 fill='#d6a400'/>");
      for (const n of state.notes) for (const i of byNote[n] || []) {
        const s = T[7 * i], lane = T[7 * i + 1];
        if (s <= last && lane < devices) p.push("<circle cx=" + (x(s) + wS / 2) + " cy=" + (yRow(lane) + rowH / 2) + " r=2.5 fill='var(--follow)' stroke='#fff' stroke-width=.8 />");
      }
      if (V) p.push("<rect x=" + x(V.step) + " y=0 width=" + Math.max(2, wS) + " height=" + H + " fill='#c81e1e'/>");
      const top = stepAtY(scroller.scrollTop), bottom = stepAtY(scroller.scrollTop + scroller.clientHeight);
      p.push("<rect id=window x=" + x(top) + " y=1 width=" + Math.max(3, x(bottom + 1) - x(top)) + " height=" + (H - 2) + " fill='none' stroke='#111827' stroke-width=1.5 rx=2 />");
      p.push("<rect x=" + x(state.step) + " y=0 width=" + Math.max(1.5, wS) + " height=" + H + " fill='#111827' opacity=.7 />");
      overview.setAttribute("width", W);
      overview.setAttribute("height", H);
      overview.setAttribute("viewBox", "0 0 " + W + " " + H);
      overview.innerHTML = p.join("");
      overview.onclick = (ev) => {
        const r = overview.getBoundingClientRect();
        const s = Math.max(0, Math.min(last, Math.floor(((ev.clientX - r.left - left) / (W - left - 4)) * (last + 1))));
        select(s, true);
      };
    }
    let scrollPending = false;
    scroller.addEventListener("scroll", () => {
      if (scrollPending) return;
      scrollPending = true;
      requestAnimationFrame(() => {
        scrollPending = false;
        const w = overview.querySelector("#window");
        if (!w) return;
        const W = Number(overview.getAttribute("width")), left = 64, x = (s) => left + (s / (last + 1)) * (W - left - 4);
        const top = stepAtY(scroller.scrollTop), bottom = stepAtY(scroller.scrollTop + scroller.clientHeight);
        w.setAttribute("x", x(top));
        w.setAttribute("width", Math.max(3, x(bottom + 1) - x(top)));
      });
    });

    // ── The violation, first.
    function violationCard() {
      const card = el("div", { class: "card violation", id: "violation" });
      let h = "<h2>Violation at step " + V.step + ": " + esc(V.invariant) + "</h2><div class=meaning>" + esc(V.meaning) + "</div>" +
        "<div class='detail mono'>" + esc(V.detail) + "</div>" +
        "<div class=what>The failing step: <a href='#' data-step=" + V.step + ">" + esc(D.steps[V.step] || "") + "</a></div>";
      if (V.trace) {
        h += "<h3>The shortened trace: " + plural(V.trace.length, "step") + " of " + (Math.min(V.step, D.steps.length - 1) + 1) + " still fail the same way (yellow in the timeline; hover for the step)</h3><div class='chips trace-steps'>";
        for (const s of V.trace) h += "<span class='chip trace' data-step=" + s + " title='" + esc(D.steps[s] || "") + "'>" + (V.trace.length <= 12 ? s + ": " + esc(short(D.steps[s] || "", 40)) : s) + "</span>";
        h += "</div>";
      }
      h += "<h3>Notes involved" + (V.notesFound > V.notes.length ? " (the first " + V.notes.length + " of " + V.notesFound + ")" : "") + ", followed in the timeline</h3><div class=chips id=involved></div><div id=sidebyside></div>";
      card.innerHTML = h;
      return card;
    }
    function drawViolationNotes() {
      if (!V) return;
      const box = document.getElementById("involved");
      box.innerHTML = V.notes.map((n) => "<span class='chip note" + (state.notes.has(n) ? " on" : "") + "' data-note=" + n + ">" + esc(noteLabel(n)) + "</span>").join("") ||
        "<span class=muted>none found in the message</span>";
      // Side by side: each involved note's text on every lane that holds it at the failing step.
      const lanes = [];
      for (const l of V.lanes) if (!lanes.includes(l)) lanes.push(l);
      for (let d = 0; d < devices && lanes.length < 9; d++) {
        if (!lanes.includes(d) && V.notes.some((n) => stateAt(d, n, V.step))) lanes.push(d);
      }
      if (!V.notes.length) { document.getElementById("sidebyside").innerHTML = ""; return; }
      let h = "<h3>What each lane holds at step " + V.step + "</h3><table class=side><tr><th style='width:110px'>note</th>";
      for (const l of lanes) {
        const a = l < 0 ? null : accountAt(l, V.step);
        h += "<th>" + laneName(l) + (a ? " <span class=muted>(" + esc(accountName(a.account, a.generation)) + ")</span>" : V.account >= 0 ? " <span class=muted>(" + esc(D.accounts[V.account] || "") + ")</span>" : "") + "</th>";
      }
      h += "</tr>";
      for (const n of V.notes) {
        const cells = lanes.map((l) => stateAt(l, n, V.step, V.account));
        const live = cells.filter((c) => c && !(c.state & 17));
        const all = new Map();
        for (const c of live) for (const t of new Set(tokens(D.texts[c.text]))) all.set(t, (all.get(t) || 0) + 1);
        const odd = new Set([...all].filter(([, k]) => k < live.length).map(([t]) => t));
        const server = cells[lanes.indexOf(-1)];
        h += "<tr><td><span class='chip note' data-note=" + n + ">" + esc(noteLabel(n)) + "</span></td>";
        cells.forEach((c, i) => {
          if (!c) { h += "<td class=muted>—</td>"; return; }
          const differs = lanes[i] >= 0 && server && (c.text !== server.text || (c.state & 17) !== (server.state & 17));
          h += "<td" + (differs ? " class=differs" : "") + "><span class=tok>" + (c.state & 17 ? "" : tokenHTML(D.texts[c.text], null, odd)) + "</span>" + stateTags(c) +
            (lanes[i] < 0 && c.account >= 0 && V.account < 0 ? "<span class=tag>" + esc(D.accounts[c.account] || "") + "</span>" : "") + "</td>";
        });
        h += "</tr>";
      }
      h += "</table><div class=muted style='margin-top:4px'>Highlighted lines are not on every lane that holds the note; a shaded cell differs from the server.</div>";
      document.getElementById("sidebyside").innerHTML = h;
    }

    // ── Summary: grouped counters and small charts.
    function summaryCards() {
      const box = el("div", { class: "summary", id: "summary" });
      for (const g of D.summary) {
        const c = el("div", { class: "card" });
        c.innerHTML = "<h2>" + esc(g.name) + "</h2><table>" + g.rows.map((r) => "<tr><td>" + esc(r[0]) + "</td><td class='v" + (r[1] === "0" ? " zero" : "") + "'>" + esc(r[1]) + "</td></tr>").join("") + "</table>";
        box.appendChild(c);
      }
      const charts = el("div", { class: "card charts" });
      charts.innerHTML = "<h2>Over time</h2>";
      const series = [
        ["Notes on the server", [D.series.serverNotes], ["#4e79a7"]],
        ["Pending changes per device", D.series.pending, DEVICE],
        ["Conflict copies so far", [D.series.conflicts], ["#f59e0b"]],
        ["Faults injected so far", [D.series.faults], ["#dc2626"]],
      ];
      for (const [name, lines, colors] of series) {
        const max = Math.max(1, ...lines.map((l) => Math.max(0, ...l)));
        const t = el("div", { class: "chart-title" }, "<span>" + esc(name) + "</span><span>max " + max + "</span>");
        const s = document.createElementNS("http://www.w3.org/2000/svg", "svg");
        s.setAttribute("class", "chart");
        s.dataset.name = name;
        s.__lines = lines; s.__colors = colors; s.__max = max;
        charts.appendChild(t);
        charts.appendChild(s);
      }
      box.appendChild(charts);
      return box;
    }
    function drawCharts() {
      for (const s of document.querySelectorAll("svg.chart")) {
        const W = Math.max(100, s.parentNode.clientWidth - 24), H = 54, lines = s.__lines, max = s.__max;
        const x = (i) => (i / Math.max(1, last)) * (W - 2) + 1, y = (v) => H - 2 - (v / max) * (H - 6);
        let h = "<rect x=0 y=0 width=" + W + " height=" + H + " fill='#f8fafc'/>";
        if (V) h += "<rect x=" + (x(V.step) - 1) + " y=0 width=2 height=" + H + " fill='#c81e1e'/>";
        lines.forEach((l, k) => {
          if (!l.length) return;
          let d = "M" + x(0) + " " + y(l[0]);
          const stride = Math.max(1, Math.floor(l.length / W));
          for (let i = stride; i < l.length && i <= last; i += stride) d += "L" + x(i).toFixed(1) + " " + y(l[i]).toFixed(1);
          h += "<path d='" + d + "' fill='none' stroke='" + s.__colors[k % s.__colors.length] + "' stroke-width=1.4 />";
        });
        h += "<rect x=" + (x(state.step) - 0.75) + " y=0 width=1.5 height=" + H + " fill='#111827' opacity=.45 />";
        const v = lines.map((l) => l[Math.min(state.step, l.length - 1)]).filter((v) => v !== undefined);
        h += "<title>" + esc(s.dataset.name) + " at step " + state.step + ": " + v.join(", ") + "</title>";
        s.setAttribute("viewBox", "0 0 " + W + " " + H);
        s.setAttribute("width", W);
        s.setAttribute("height", H);
        s.innerHTML = h;
        s.onclick = (ev) => {
          const r = s.getBoundingClientRect();
          select(Math.max(0, Math.min(last, Math.round(((ev.clientX - r.left) / r.width) * last))), true);
        };
      }
    }

    // ── The side panel: the selected step, and what is followed.
    function drawStep() {
      const s = state.step;
      let h = "<div class=stephead><button data-go=-1 title='previous step (k)'>◀</button><h2>" + (s === D.quiescence ? "The end (after step " + (s - 1) + ")" : "Step " + s) +
        "</h2><button data-go=1 title='next step (j)'>▶</button></div><div class=what>" + esc(D.steps[s] || "") + "</div>";
      if (trace.has(s)) h += "<div><span class='chip trace'>in the shortened trace</span></div>";
      const evs = evByStep[s] || [];
      if (evs.length) {
        h += "<h3>What happened</h3><ul class=plain>";
        for (const e of evs) h += "<li><span class=lane-name>" + laneName(e.l) + "</span> · <b>" + esc(e.k) + "</b> " + esc(e.d) + "</li>";
        h += "</ul>";
      }
      const ex = exByStep[s] || [];
      if (ex.length) {
        h += "<h3>Requests</h3><ul class=plain>";
        for (const e of ex) h += "<li>device " + e.d + ": pushed " + plural(e.pushed, "change") + " in " + plural(e.pushReq, "request") + ", pulled " + plural(e.pulled, "record") + " in " + plural(e.pullReq, "page") + "</li>";
        h += "</ul>";
      }
      const ts = (byStep[s] || []).map(touch);
      if (ts.length) {
        h += "<h3>Notes touched (" + ts.length + ")</h3><ul class=plain>";
        for (const t of ts.slice(0, 60)) {
          h += "<li><span class=lane-name>" + laneName(t.lane) + "</span> <span class='chip note" + (state.notes.has(t.note) ? " on" : "") + "' data-note=" + t.note + ">" + esc(noteLabel(t.note)) + "</span> " +
            esc(kindNames(t.kinds).join(", ")) + stateTags(t) + "<div class=tok>" + (t.state & 17 ? "" : tokenHTML(D.texts[t.text])) + "</div></li>";
        }
        if (ts.length > 60) h += "<li class=muted>and " + (ts.length - 60) + " more</li>";
        h += "</ul>";
      }
      stepCard.innerHTML = h;
    }
    function drawFollow() {
      const counts = D.notes.map((_, n) => (byNote[n] || []).length);
      const order = D.notes.map((_, n) => n).sort((a, b) => counts[b] - counts[a] || a - b);
      let h = "<h2>Follow</h2><label>a note <select id=pick-note><option value=-1>—</option>" +
        order.map((n) => "<option value=" + n + (state.notes.size === 1 && state.notes.has(n) ? " selected" : "") + ">" + esc(noteLabel(n)) + " (" + counts[n] + ")</option>").join("") +
        "</select></label> <label>an account <select id=pick-account><option value=-1>—</option>" +
        D.accounts.map((a, k) => "<option value=" + k + (state.account === k ? " selected" : "") + ">" + esc(a) + "</option>").join("") + "</select></label>";
      if (state.notes.size || state.account >= 0) h += " <button id=unfollow>clear</button>";
      if (state.notes.size) {
        for (const n of state.notes) {
          const info = D.notes[n];
          h += "<div class=notehead>" + esc(noteLabel(n)) + "</div><div class=muted>client ID <span class=mono>" + esc(info.c) + "</span>" + (info.o >= 0 ? ", created on device " + info.o : "") +
            (info.f >= 0 ? ", a conflict copy of <span class='chip note' data-note=" + info.f + ">" + esc(noteLabel(info.f)) + "</span>" : "") + "</div>";
          h += "<table class=hist><colgroup><col style='width:34px'><col style='width:64px'><col style='width:104px'><col></colgroup>";
          const previous = {};
          for (const i of byNote[n] || []) {
            const t = touch(i);
            if (t.s > last) continue;
            const text = D.texts[t.text];
            h += "<tr data-step=" + t.s + " class='" + (trace.has(t.s) ? "trace " : "") + (t.s === state.step ? "sel" : "") + "'><td>" + t.s + "</td><td class=lane-name>" + laneName(t.lane) +
              (t.account >= 0 ? "<br><span style='color:" + accountColor(t.account) + "'>" + esc(D.accounts[t.account] || "") + "</span>" : "") + "</td><td>" + esc(kindNames(t.kinds).join(", ")) + stateTags(t) +
              "</td><td class=tok>" + (t.state & 17 ? "" : tokenHTML(text, previous[t.lane])) + "</td></tr>";
            previous[t.lane] = t.state & 17 ? "" : text;
          }
          h += "</table>";
        }
      } else if (state.account >= 0) {
        const k = state.account;
        h += "<div class=notehead>" + esc(D.accounts[k]) + "</div><ul class=plain>";
        const spells = [];
        for (let d = 0; d < devices; d++) for (let i = 0; i < spans[d].length; i++) {
          const sp = spans[d][i];
          if (sp.account === k) spells.push({ d: d, from: sp.from, end: i + 1 < spans[d].length ? spans[d][i + 1].from : null, generation: sp.generation });
        }
        spells.sort((a, b) => a.from - b.from || a.d - b.d);
        for (const sp of spells) {
          h += "<li><a href='#' data-step=" + sp.from + ">step " + sp.from + "</a>: device " + sp.d + " signs in to " + esc(accountName(k, sp.generation)) + (sp.end !== null ? ", until step " + sp.end : ", to the end") + "</li>";
        }
        if (!spells.length) h += "<li class=muted>no device signed in to it</li>";
        h += "</ul>";
        const onServer = [];
        for (let n = 0; n < D.notes.length; n++) {
          const t = stateAt(-1, n, state.step, k);
          if (t && !(t.state & 17)) onServer.push(n);
        }
        h += "<h3>On the server at step " + state.step + ": " + plural(onServer.length, "note") + "</h3><div class=chips>" +
          onServer.slice(0, 80).map((n) => "<span class='chip note' data-note=" + n + ">" + esc(noteLabel(n)) + "</span>").join("") + "</div>";
      } else {
        h += "<p class=muted>Choose a note (or click one anywhere) to ring every point that touched it, on every lane, with its text at each; choose an account to see its devices' bands and its notes.</p>";
      }
      followCard.innerHTML = h;
      document.getElementById("pick-note").onchange = (e) => follow(Number(e.target.value));
      document.getElementById("pick-account").onchange = (e) => { state.account = Number(e.target.value); state.notes = new Set(); refresh(); };
      const u = document.getElementById("unfollow");
      if (u) u.onclick = () => { state.notes = new Set(); state.account = -1; refresh(); };
    }
    function follow(n) {
      state.notes = n >= 0 ? new Set([n]) : new Set();
      state.account = -1;
      refresh();
    }
    function refresh() {
      remember();
      draw();
      drawViolationNotes();
      drawStep();
      drawFollow();
      drawCharts();
    }
    // The address keeps what is shown, so a link (or a reload) opens on it.
    function remember() {
      const parts = ["step=" + state.step];
      if (state.notes.size === 1) parts.push("note=" + encodeURIComponent(noteLabel([...state.notes][0])));
      if (state.account >= 0) parts.push("account=" + state.account);
      try { history.replaceState(null, "", "#" + parts.join("&")); } catch (e) { /* a browser that refuses it for files */ }
    }
    function select(s, scroll) {
      state.step = Math.max(0, Math.min(last, s));
      remember();
      placeCursor();
      drawStep();
      drawCharts();
      drawOverview();
      if (state.notes.size || state.account >= 0) drawFollow();
      if (scroll) scrollTo(state.step);
    }
    function scrollTo(s) {
      const y = rowY[s];
      if (y < scroller.scrollTop + 20 || y > scroller.scrollTop + scroller.clientHeight - 40) scroller.scrollTop = Math.max(0, y - 8 * RH);
    }
    document.addEventListener("click", (ev) => {
      const t = ev.target.closest("[data-step],[data-note],[data-go]");
      if (!t || t.closest("svg#tl")) return;
      if (t.dataset.go) { select(state.step + Number(t.dataset.go), true); return; }
      if (t.dataset.note !== undefined) { ev.preventDefault(); follow(Number(t.dataset.note)); return; }
      if (t.dataset.step !== undefined) { ev.preventDefault(); select(Number(t.dataset.step), true); }
    });
    document.addEventListener("keydown", (ev) => {
      if (ev.target.tagName === "SELECT" || ev.target.tagName === "INPUT") return;
      if (ev.key === "j" || ev.key === "ArrowDown") { select(state.step + 1, true); ev.preventDefault(); }
      if (ev.key === "k" || ev.key === "ArrowUp") { select(state.step - 1, true); ev.preventDefault(); }
    });
    let resizeTimer = 0;
    window.addEventListener("resize", () => { clearTimeout(resizeTimer); resizeTimer = setTimeout(refresh, 100); });

    refresh();
    // The selected step (a failing run's failing step) opens in view, below the steps that led to it.
    scroller.scrollTop = Math.max(0, rowY[state.step] - Math.max(8 * RH, 0.6 * visibleHeight()));
    drawOverview();
    if (V) {
      document.body.setAttribute("data-focused-step", state.step);
      scroller.focus({ preventScroll: true });
    }
  }

  // ───────────────────────────── The index of a sweep ─────────────────────────────
  function sweep() {
    const rows = D.seeds.slice().sort((a, b) => (a.passed === b.passed ? a.seed - b.seed : a.passed ? 1 : -1));
    const failed = rows.filter((r) => !r.passed);
    const maxSeconds = Math.max(0.001, ...rows.map((r) => r.seconds));
    let h = "<div class=top><h1>" + esc(D.title) + "</h1>" + (failed.length ? "<span class='badge fail'>" + plural(failed.length, "seed") + " FAILED</span>" : "<span class='badge pass'>PASSED</span>") +
      "<span class=shape>" + esc(D.shape) + "</span></div><div class=wrap>";
    h += "<div class='card stats'><div><b>" + rows.length + "</b>seeds run</div><div><b>" + failed.length + "</b>with a violation</div><div><b>" + seconds(D.seconds) + "</b>sweep time</div>" +
      "<div><b>" + seconds(rows.reduce((a, r) => a + r.seconds, 0) / Math.max(1, rows.length)) + "</b>per seed (mean)</div>" +
      D.totals.map((t) => "<div><b>" + esc(t[1]) + "</b>" + esc(t[0]) + "</div>").join("") + "</div>";
    if (D.note) h += "<div class='card muted'>" + esc(D.note) + "</div>";
    // Duration per seed, failing seeds in red: slow seeds stand out.
    h += "<div class=card><div class=chart-title><span>Duration per seed (seed order; red: a violation). Click a bar to find its row.</span><span>max " + seconds(maxSeconds) + "</span></div><svg id=durations class=chart></svg></div>";
    h += "<div class=card><table class=seeds id=seeds><tr><th>seed</th><th>outcome</th><th>duration</th><th>syncs</th><th>faults</th><th>conflict copies</th><th>notes</th><th>timeline</th></tr></table>" +
      "<div id=more></div><p class=muted>A passing seed's timeline is written on demand: <code>" + esc(D.command) + "</code> with the seed in place of {seed}.</p></div></div>";
    app.innerHTML = h;
    const table = document.getElementById("seeds");
    function row(r) {
      return "<tr id=seed-" + r.seed + " class=" + (r.passed ? "pass" : "fail") + "><td class=num>" + r.seed + "</td><td>" +
        (r.passed ? "no violation" : "<b>" + esc(r.invariant) + "</b> at step " + r.step + "<div class=muted>" + esc(r.detail) + "</div>") + "</td>" +
        "<td class=num><span class=bar style='width:" + Math.max(1, Math.round((r.seconds / maxSeconds) * 80)) + "px'></span>" + seconds(r.seconds) + "</td>" +
        "<td class=num>" + r.syncs + "</td><td class=num>" + r.faults + "</td><td class=num>" + r.conflicts + "</td><td class=num>" + r.notes + "</td><td>" +
        (r.link ? "<a href='" + esc(r.link) + "'>open the timeline</a>" : "<code>" + esc(D.command.replace(/\{seed\}/g, r.seed)) + "</code>") + "</td></tr>";
    }
    // Long sweeps: the failing seeds and the first 500 others, the rest on request.
    const shown = 500 + failed.length;
    table.insertAdjacentHTML("beforeend", rows.slice(0, shown).map(row).join(""));
    if (rows.length > shown) {
      const more = document.getElementById("more");
      more.innerHTML = "<button>show the other " + (rows.length - shown) + " seeds</button>";
      more.firstChild.onclick = () => { table.insertAdjacentHTML("beforeend", rows.slice(shown).map(row).join("")); more.innerHTML = ""; };
    }
    const s = document.getElementById("durations"), W = Math.max(200, s.parentNode.clientWidth - 24), H = 54;
    const ordered = D.seeds.slice().sort((a, b) => a.seed - b.seed), w = W / Math.max(1, ordered.length);
    let p = "<rect width=" + W + " height=" + H + " fill='#f8fafc'/>";
    ordered.forEach((r, i) => {
      const bh = Math.max(1, (r.seconds / maxSeconds) * (H - 4));
      p += "<rect data-seed=" + r.seed + " x=" + (i * w).toFixed(2) + " y=" + (H - bh) + " width=" + Math.max(0.8, w - (w > 3 ? 1 : 0)) + " height=" + bh + " fill='" + (r.passed ? "#94a3b8" : "#c81e1e") + "'><title>seed " + r.seed + ": " + seconds(r.seconds) + (r.passed ? "" : ", " + esc(r.invariant)) + "</title></rect>";
    });
    s.setAttribute("viewBox", "0 0 " + W + " " + H);
    s.setAttribute("width", W);
    s.setAttribute("height", H);
    s.innerHTML = p;
    s.onclick = (ev) => {
      const seed = ev.target.getAttribute("data-seed");
      const found = seed && document.getElementById("seed-" + seed);
      if (found) found.scrollIntoView({ block: "center" });
    };
  }
})();
"""#
}
