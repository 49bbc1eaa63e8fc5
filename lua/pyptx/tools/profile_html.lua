--- The one-page HTML report of luaptx profile --html: per kernel, the
-- summary, the Lua source annotated line by line (heat by a chosen
-- counter, every counter on hover) and the occupancy and roofline charts.
-- Self-contained: the data is embedded as JSON, the page's script draws
-- the heat and the SVG charts; nothing is fetched.
local tune = require "pyptx.tools.tune"
local gpus = require "pyptx.tools.gpus"

local M = {}

--- HTML-escape text.
local function esc(s)
  return (tostring(s):gsub("[&<>\"]", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;" }))
end

--- The source files a kernel's counted lines come from, each with all its lines.
local function files_of(k)
  local files, order = {}, {}
  for _, l in ipairs(k.lines) do
    if l.file ~= "" and not files[l.file] then
      files[l.file] = {}
      order[#order + 1] = l.file
      local f = io.open(l.file, "rb")
      if f then
        for s in f:lines() do files[l.file][#files[l.file] + 1] = s end
        f:close()
      end
    end
  end
  return files, order
end

--- The annotated source of one kernel: a table row per line, counted lines carrying data-k/data-l.
local function source_html(k, ki)
  local files, order = files_of(k)
  local counted = {}
  for li, l in ipairs(k.lines) do counted[l.file .. ":" .. l.line] = li end
  local out = {}
  for _, path in ipairs(order) do
    out[#out + 1] = ('<h3 class="file">%s</h3><table class="src">'):format(esc(path))
    for n, text in ipairs(files[path]) do
      local li = counted[path .. ":" .. n]
      local attrs = li and (' class="hot" data-k="%d" data-l="%d"'):format(ki - 1, li - 1) or ""
      out[#out + 1] = ('<tr%s><td class="n">%d</td><td class="m"></td><td><pre>%s</pre></td></tr>'):format(attrs, n, esc(text))
    end
    out[#out + 1] = "</table>"
  end
  return table.concat(out, "\n")
end

--- The data the page's script reads: counters per line and per kernel, occupancy, roofline, GPU peaks.
local function data_of(rep)
  local d = { kernels = {}, gpus = gpus.GPUS }
  for _, k in ipairs(rep.kernels) do
    local lines = {}
    for _, l in ipairs(k.lines) do lines[#lines + 1] = { file = l.file, line = l.line, c = l.c, d = l.d } end
    local r = k.roofline
    d.kernels[#d.kernels + 1] = {
      name = k.name, gpu = k.gpu, counters = k.counters, derived = k.derived, lines = lines,
      occupancy = k.occupancy, roofline = { seconds = r.seconds, bound = r.bound, bytes = r.bytes, flops = r.flops,
                                            tensor_s = r.tensor_s, fp32_s = r.fp32_s, memory_s = r.memory_s },
    }
  end
  return d
end

local STYLE = [[
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em} h2{border-bottom:2px solid #ccc;margin-top:2em} h3.file{font:600 13px monospace;color:#555}
table.src{border-collapse:collapse;font:12px monospace;width:100%}
table.src td{padding:0 .5em;vertical-align:top} table.src pre{margin:0;white-space:pre}
td.n{color:#999;text-align:right;width:3em} td.m{width:9em;color:#333;white-space:nowrap}
tr.hot:hover{outline:1px solid #06c}
#tip{position:fixed;display:none;background:#fff;border:1px solid #888;padding:.5em;font:12px monospace;
  box-shadow:2px 2px 6px #0003;z-index:9;white-space:pre}
.summary td{padding:.1em .8em} .charts{display:flex;gap:2em;flex-wrap:wrap}
]]

local SCRIPT = [[
(function(){
const D = JSON.parse(document.getElementById('data').textContent);
const sel = document.getElementById('heat');
const tip = document.getElementById('tip');
const metric = {
  warps: l => l.c.warps, lanes: l => l.c.lanes,
  sectors: l => l.c.gld_sectors + l.c.gst_sectors,
  conflicts: l => l.c.shared_wavefronts - l.c.shared_ideal,
  divergence: l => 32 * l.c.warps - l.c.lanes,
  shared: l => l.c.shared_wavefronts, flops: l => l.c.flops + l.c.fp32_flops,
  waits: l => l.c.bar_waits + l.c.mbar_fails,
};
function fmt(x){
  return x >= 1e9 ? (x/1e9).toFixed(2)+'G' : x >= 1e6 ? (x/1e6).toFixed(2)+'M'
    : x >= 1e4 ? (x/1e3).toFixed(1)+'k' : String(Math.round(x*100)/100);
}
function heat(){
  const f = metric[sel.value];
  D.kernels.forEach((k, ki) => {
    const max = Math.max(1, ...k.lines.map(f));
    document.querySelectorAll('tr.hot[data-k="'+ki+'"]').forEach(tr => {
      const v = f(k.lines[+tr.dataset.l]);
      tr.style.background = v > 0 ? 'rgba(230,60,20,' + (0.08 + 0.7 * v / max).toFixed(3) + ')' : '';
      tr.querySelector('td.m').textContent = sel.value + ' ' + fmt(v);
      tr.dataset.v = v;
    });
  });
}
document.querySelectorAll('tr.hot').forEach(tr => {
  tr.addEventListener('mousemove', e => {
    const l = D.kernels[+tr.dataset.k].lines[+tr.dataset.l];
    let s = l.file.split('/').pop() + ':' + l.line + '\n';
    for (const [n, v] of Object.entries(l.c)) if (v) s += n.padEnd(20) + fmt(v) + '\n';
    for (const [n, v] of Object.entries(l.d)) s += n.padEnd(20) + fmt(v) + '\n';
    tip.textContent = s; tip.style.display = 'block';
    tip.style.left = (e.clientX + 16) + 'px'; tip.style.top = Math.min(e.clientY + 8, innerHeight - tip.offsetHeight - 4) + 'px';
  });
  tr.addEventListener('mouseleave', () => { tip.style.display = 'none'; });
});
const NS = 'http://www.w3.org/2000/svg';
function el(p, n, a, t){
  const e = document.createElementNS(NS, n);
  for (const k in a) e.setAttribute(k, a[k]);
  if (t !== undefined) e.textContent = t;
  p.appendChild(e); return e;
}
function occupancy(k, host){
  const o = k.occupancy; if (!o) { host.textContent = 'occupancy: unknown (no ptxas report)'; return; }
  const svg = el(host, 'svg', {width: 360, height: 150, class: 'occ'});
  el(svg, 'text', {x: 0, y: 14, 'font-size': 13}, 'CTAs per SM each resource allows (' + k.gpu + ')');
  const names = ['warps', 'registers', 'smem', 'ctas'], max = Math.max(...names.map(n => o.limits[n]));
  names.forEach((n, i) => {
    const v = o.limits[n], w = 220 * v / max, y = 28 + i * 28;
    el(svg, 'text', {x: 0, y: y + 14, 'font-size': 12}, n);
    el(svg, 'rect', {x: 80, y: y, width: Math.max(w, 1), height: 18, fill: o.limiter.split('+').includes(n) ? '#d33' : '#69c', class: 'bar', 'data-name': n});
    el(svg, 'text', {x: 84 + w, y: y + 14, 'font-size': 12}, String(v) + (o.limiter.split('+').includes(n) ? ' (limit)' : ''));
  });
}
function roofline(k, host){
  const g = D.gpus.find(x => x.name === k.gpu), r = k.roofline;
  const svg = el(host, 'svg', {width: 640, height: 260, class: 'roof'});
  el(svg, 'text', {x: 0, y: 14, 'font-size': 13}, 'roofline on ' + g.full + ' (TFLOP/s vs FLOP/B)');
  const X = i => 40 + 360 * (Math.log10(i) + 2) / 6, Y = p => 240 - 210 * (Math.log10(p) + 1) / 5;
  const peak = r.flops && k.counters.flops > 0 ? g.bf16 : g.fp32, ridge = peak * 1e3 / g.bw;
  el(svg, 'polyline', {points: [X(0.01) + ',' + Y(Math.max(0.1, g.bw * 0.01 / 1e3)), X(ridge) + ',' + Y(peak), X(1e4) + ',' + Y(peak)].join(' '),
    fill: 'none', stroke: '#333', 'stroke-width': 2, class: 'roof-line'});
  el(svg, 'line', {x1: 40, y1: 240, x2: 400, y2: 240, stroke: '#999'});
  el(svg, 'line', {x1: 40, y1: 30, x2: 40, y2: 240, stroke: '#999'});
  if (r.bytes > 0 && r.seconds > 0) {
    const ai = r.flops / r.bytes, perf = r.flops / r.seconds / 1e12;
    const cx = X(Math.min(Math.max(ai, 0.011), 9999)), cy = Y(Math.max(perf, 0.11));
    el(svg, 'circle', {cx: cx, cy: cy, r: 5, fill: '#d33', class: 'point'});
    el(svg, 'text', {x: cx + 8, y: cy - 6, 'font-size': 12}, k.name + ': ' + ai.toFixed(2) + ' FLOP/B, ' + r.bound + '-bound');
  }
}
D.kernels.forEach((k, ki) => {
  occupancy(k, document.getElementById('occ' + ki));
  roofline(k, document.getElementById('roof' + ki));
});
sel.addEventListener('change', heat);
heat();
document.getElementById('status').textContent = 'rendered ' + D.kernels.length + ' kernel(s), ' +
  document.querySelectorAll('tr.hot').length + ' annotated line(s)';
})();
]]

--- A kernel's summary table.
local function summary_html(k)
  local c, d = k.counters, k.derived
  local rows = {
    { "warp-instructions", c.warps }, { "SIMT efficiency", ("%.1f%%"):format(100 * (d.simt or 1)) },
    { "divergent branches", c.div_branches },
    { "global load sectors/request", ("%.2f"):format(d.ld_sectors_per_req or 0) },
    { "global store sectors/request", ("%.2f"):format(d.st_sectors_per_req or 0) },
    { "shared wavefronts (ideal)", ("%d (%d)"):format(c.shared_wavefronts, c.shared_ideal) },
    { "worst bank conflict", ("%d-way"):format(c.shared_max_ways) },
    { "TMA / bulk bytes", ("%d / %d"):format(c.tma_bytes, c.bulk_bytes) },
    { "barrier waits / mbarrier waits", ("%d / %d"):format(c.bar_waits, c.mbar_fails) },
    { "tensor-core FLOP", c.flops }, { "f32 FLOP", c.fp32_flops },
    { "roofline bound", ("%.3g us, %s-bound on %s"):format(k.roofline.seconds * 1e6, k.roofline.bound, k.gpu) },
  }
  if k.resources then
    rows[#rows + 1] = { "registers / static smem / spills", ("%d / %d / %d"):format(k.resources.registers, k.resources.smem, k.resources.spills) }
  end
  if k.occupancy then
    rows[#rows + 1] = { "occupancy", ("%.0f%% (%d CTAs/SM, limited by %s)"):format(100 * k.occupancy.occupancy, k.occupancy.ctas, k.occupancy.limiter) }
  end
  local out = { '<table class="summary">' }
  for _, r in ipairs(rows) do out[#out + 1] = ("<tr><td>%s</td><td>%s</td></tr>"):format(esc(r[1]), esc(r[2])) end
  out[#out + 1] = "</table>"
  return table.concat(out, "\n")
end

--- The page for a report of pyptx.tools.profile (script: the profiled file's name).
function M.page(rep, script)
  local body = {}
  for ki, k in ipairs(rep.kernels) do
    body[#body + 1] = ('<section class="kernel" id="k%d"><h2>%s</h2>'):format(ki - 1, esc(k.name))
    body[#body + 1] = summary_html(k)
    body[#body + 1] = ('<div class="charts"><div id="occ%d"></div><div id="roof%d"></div></div>'):format(ki - 1, ki - 1)
    body[#body + 1] = source_html(k, ki) .. "</section>"
  end
  -- no `<` (nor `>`, `&`) in the script element: a path holding "<!--<script>"
  -- or "</script>" must not end or change it; JSON reads \u003c back as `<`
  local json = tune.encode_json(data_of(rep)):gsub("[<>&]", { ["<"] = "\\u003c", [">"] = "\\u003e", ["&"] = "\\u0026" })
  return table.concat {
    '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>luaptx profile: ', esc(script), '</title><style>', STYLE,
    '</style></head><body><h1>luaptx profile: ', esc(script), '</h1>',
    '<p>heat by <select id="heat"><option value="warps">warp-instructions</option><option value="sectors">global sectors</option>',
    '<option value="conflicts">bank-conflict wavefronts</option><option value="divergence">idle lanes</option>',
    '<option value="shared">shared wavefronts</option><option value="flops">FLOPs</option><option value="waits">waits</option>',
    '</select> <span id="status">not rendered (the page needs JavaScript)</span></p>',
    table.concat(body, "\n"), '<div id="tip"></div><script type="application/json" id="data">', json,
    '</script><script>', SCRIPT, '</script></body></html>\n',
  }
end

return M
