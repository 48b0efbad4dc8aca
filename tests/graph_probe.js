// Run by tests/test_html_report.py in headless Chromium on a copy of a report (see measure() in
// _browser.py): it measures the graph section as a reader sees it, clicks the folds and the zoom,
// and returns what it found as one JSON value. The report itself runs no script.
const out = {viewport: [innerWidth, innerHeight]};
const sec = document.querySelector("section.graph");
const focus = sec.querySelector(".focus");
const shown = (el) => el.checkVisibility() && el.getBoundingClientRect().width > 0;
const stale = focus.querySelector("div.node.stale");
out.stale = {seq: stale.dataset.seq, top: stale.getBoundingClientRect().top, bottom: stale.getBoundingClientRect().bottom,
             saved: [...stale.querySelectorAll(".saved.stale")].map((e) => e.textContent)};
out.sectionBottom = sec.getBoundingClientRect().bottom + scrollY;
// the path, in order, with what is folded
out.path = [...focus.querySelector(":scope > ol.path").children].map((li) => {
  const run = li.querySelector(":scope > details.run");
  if (!run) return {seq: li.querySelector("div.node").dataset.seq};
  return {run: [...run.querySelectorAll("div.node")].map((n) => n.dataset.seq), summary: run.querySelector("summary").textContent};
});
out.flowsTo = [...focus.querySelectorAll(".flows-to div.node")].map((n) => n.dataset.seq);
// folding: a run opens on a click
const run = focus.querySelector("details.run");
const inner = [...run.querySelectorAll("div.node")];
out.runBefore = {open: run.open, shown: inner.filter(shown).length, count: inner.length};
run.querySelector("summary").click();
out.runAfter = {open: run.open, shown: inner.filter(shown).length};
// no HTML text cut: every box holds its content
const clipped = [];
sec.querySelectorAll("div.node").forEach((n) => {
  if (!shown(n)) return;
  const r = n.getBoundingClientRect();
  if (n.scrollWidth > n.clientWidth + 1 || n.scrollHeight > n.clientHeight + 1) clipped.push(n.dataset.seq);
  n.querySelectorAll("*").forEach((c) => {
    const cr = c.getBoundingClientRect();
    if (cr.width && (cr.right > r.right + 0.5 || cr.left < r.left - 0.5 || cr.bottom > r.bottom + 0.5)) clipped.push(n.dataset.seq);
  });
});
out.htmlClipped = clipped;
// the whole graph: folded at first, opens on a click
const full = sec.querySelector("details.full-graph");
const svg = full.querySelector("svg.autograd-graph");
out.fullBefore = {open: full.open, shown: shown(svg)};
full.querySelector("summary").click();
out.fullAfter = {open: full.open, shown: shown(svg), height: svg.getBoundingClientRect().height};
const boxes = {}, nodes = [], svgClipped = [];
svg.querySelectorAll("g.node").forEach((g) => {
  const b = g.querySelector("rect.box").getBBox();
  boxes[g.dataset.node] = b;
  const texts = [...g.querySelectorAll("text")].map((t) => {
    const tb = t.getBBox();
    if (tb.x < b.x || tb.x + tb.width > b.x + b.width || tb.y < b.y || tb.y + tb.height > b.y + b.height)
      svgClipped.push([g.dataset.seq, t.textContent, tb.width, b.width]);
    return [t.getAttribute("class"), t.textContent];
  });
  nodes.push({id: g.dataset.node, seq: g.dataset.seq, name: g.dataset.name, line: g.dataset.line,
              stale: g.classList.contains("stale"), texts});
});
out.nodes = nodes;
out.svgClipped = svgClipped;
const ids = Object.keys(boxes);
const overlaps = [];
ids.forEach((a, i) => ids.slice(i + 1).forEach((c) => {
  const p = boxes[a], q = boxes[c];
  if (p.x < q.x + q.width && q.x < p.x + p.width && p.y < q.y + q.height && q.y < p.y + p.height) overlaps.push([a, c]);
}));
out.overlaps = overlaps;
// edges: each goes down, and passes through no box but its two ends. The points are taken from
// each path's drawing commands (M, L and C, absolute), as the browser draws them: a cubic at 40
// steps, a line every 3 px (getPointAtLength would take minutes on ~200 long paths).
function points(d) {
  const tokens = d.match(/[MLC]|-?[\d.]+/g), pts = [];
  let cur = null, i = 0;
  const num = () => parseFloat(tokens[i++]);
  while (i < tokens.length) {
    const cmd = tokens[i++];
    if (cmd === "M") { cur = [num(), num()]; pts.push(cur); }
    else if (cmd === "L") {
      const end = [num(), num()], n = Math.max(1, Math.ceil(Math.hypot(end[0] - cur[0], end[1] - cur[1]) / 3));
      for (let k = 1; k <= n; k++) pts.push([cur[0] + (end[0] - cur[0]) * k / n, cur[1] + (end[1] - cur[1]) * k / n]);
      cur = end;
    } else if (cmd === "C") {
      const c1 = [num(), num()], c2 = [num(), num()], end = [num(), num()];
      for (let k = 1; k <= 40; k++) {
        const t = k / 40, u = 1 - t;
        pts.push([0, 1].map((j) => u * u * u * cur[j] + 3 * u * u * t * c1[j] + 3 * u * t * t * c2[j] + t * t * t * end[j]));
      }
      cur = end;
    } else throw new Error("unexpected path command " + cmd);
  }
  return pts;
}
const through = [], edges = [];
svg.querySelectorAll("path.edge").forEach((e) => {
  const a = e.dataset.from, c = e.dataset.to;
  edges.push([a, c]);
  const eb = e.getBBox();
  const near = ids.filter((k) => k !== a && k !== c && boxes[k].x < eb.x + eb.width && eb.x < boxes[k].x + boxes[k].width && boxes[k].y < eb.y + eb.height && eb.y < boxes[k].y + boxes[k].height);
  const hit = near.find((k) => points(e.getAttribute("d")).some(([x, y]) => {
    const b = boxes[k];
    return x > b.x + 1 && x < b.x + b.width - 1 && y > b.y + 1 && y < b.y + b.height - 1;
  }));
  if (hit !== undefined) through.push([a, c, hit]);
});
out.edges = edges;
out.through = through;
out.down = edges.filter(([a, c]) => !(boxes[c].y >= boxes[a].y + boxes[a].height)).length;
// zoom: 25% draws the same picture a quarter as wide
const w0 = svg.getBoundingClientRect().width;
document.querySelector("label[for$='-quarter']").click();
out.zoom = {attr: svg.width.baseVal.value, before: w0, quarter: svg.getBoundingClientRect().width};
return out;
