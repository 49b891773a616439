// /traces/view: one self-contained page (inline CSS and JS, no external assets, no absolute
// URLs) with the traces document embedded, so it renders at once and also from a saved file.
// The Refresh button fetches ../traces (same origin) when the page was served over HTTP.
#include <skiff/metrics/exposition.hpp>

#include <string>

namespace skiff::metrics {

namespace {

constexpr std::string_view placeholder = "@@SKIFF_TRACES_JSON@@";

// The page. Span kinds come from span names (docs/observability.md): build, put (attribute
// kind = kfs | index), commit under a root "flush"; produce traces link to the flush.
constexpr std::string_view page = R"SKIFFHTML(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>skiff · flush timeline</title>
<style>
  :root { --label-w: 300px; --ink: #1d2330; --muted: #667085; --line: #e4e7ec; --bg: #fbfcfd; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 13px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink); background: var(--bg); }
  header { display: flex; flex-wrap: wrap; align-items: center; gap: 12px; padding: 12px 16px; border-bottom: 1px solid var(--line); background: #fff; position: sticky; top: 0; z-index: 5; }
  header h1 { font-size: 16px; margin: 0 8px 0 0; }
  #summary { color: var(--muted); }
  #status { color: var(--muted); font-size: 12px; }
  button { font: inherit; padding: 3px 10px; border: 1px solid #c9ced6; border-radius: 4px; background: #f5f6f8; cursor: pointer; }
  button:disabled { cursor: default; color: #98a2b3; }
  .legend { display: flex; flex-wrap: wrap; gap: 14px; padding: 8px 16px; border-bottom: 1px solid var(--line); background: #fff; }
  .legend-item { display: inline-flex; align-items: center; gap: 6px; color: var(--muted); }
  .swatch { display: inline-block; width: 14px; height: 10px; border-radius: 2px; }
  #rows { padding: 0 16px 24px; }
  .axis-row, .flush-row { display: flex; border-bottom: 1px solid var(--line); }
  .axis-row { position: sticky; top: 0; background: var(--bg); height: 24px; }
  .flush-label { flex: 0 0 var(--label-w); width: var(--label-w); padding: 8px 10px 8px 0; overflow: hidden; }
  .flush-title { font-weight: 600; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
  .flush-meta, .flush-share { color: var(--muted); font-size: 12px; }
  .flush-share b { color: var(--ink); font-weight: 600; }
  .flush-share .part { white-space: nowrap; }
  .flush-track, .axis-track { position: relative; flex: 1 1 auto; min-width: 200px; }
  .tick { position: absolute; top: 0; bottom: 0; border-left: 1px solid var(--line); }
  .tick-label { position: absolute; top: 4px; font-size: 11px; color: var(--muted); padding-left: 3px; white-space: nowrap; }
  .flush-band { position: absolute; background: rgba(70, 100, 200, 0.07); border-left: 2px solid rgba(70, 100, 200, 0.5); border-right: 2px solid rgba(70, 100, 200, 0.5); }
  .span-bar { position: absolute; height: 18px; border-radius: 3px; padding: 0 4px; font-size: 11px; line-height: 18px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; min-width: 2px; color: #111; box-shadow: inset 0 0 0 1px rgba(0,0,0,0.12); }
  .span-bar.span-produce { height: 8px; padding: 0; font-size: 0; border-radius: 2px; }
  .span-bar.span-error { box-shadow: inset 0 0 0 2px #d92d20; }
  .span-build { background: #8fb8e8; }
  .span-put-kfs { background: #f2b552; }
  .span-put-index { background: #c9a0e8; }
  .span-put { background: #f5cf8e; }
  .span-commit { background: #7cc47f; }
  .span-produce { background: #98a2b3; }
  .span-other { background: #d0d5dd; }
  .lane-caption { position: absolute; left: 2px; font-size: 10px; color: var(--muted); }
  .empty { padding: 40px 16px; color: var(--muted); font-size: 14px; }
</style>
</head>
<body>
<header>
  <h1>skiff · flush timeline</h1>
  <span id="summary"></span>
  <button id="refresh" type="button">Refresh</button>
  <label><input id="auto" type="checkbox"> auto-refresh (2 s)</label>
  <span id="status"></span>
</header>
<div class="legend" id="legend"></div>
<div id="rows"></div>
<script type="application/json" id="skiff-traces">@@SKIFF_TRACES_JSON@@</script>
<script>
(function () {
  'use strict';
  var KINDS = [
    ['build', 'segment build'], ['put-kfs', 'PUT .kfs'], ['put-index', 'PUT .index'],
    ['commit', 'commit'], ['produce', 'produce (linked)'], ['other', 'other span']
  ];
  var LANE_H = 22, PRODUCE_H = 11, MAX_PRODUCE_LANES = 8;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function attr(s, k) {
    return s.attributes && Object.prototype.hasOwnProperty.call(s.attributes, k) ? s.attributes[k] : undefined;
  }
  function dur(ns) {
    var ms = ns / 1e6;
    if (ms >= 1000) return (ms / 1000).toFixed(2) + ' s';
    if (ms >= 100) return ms.toFixed(0) + ' ms';
    if (ms >= 10) return ms.toFixed(1) + ' ms';
    if (ms >= 1) return ms.toFixed(2) + ' ms';
    return (ns / 1e3).toFixed(0) + ' \u00b5s';
  }
  function bytes(b) {
    if (typeof b !== 'number') return '';
    if (b >= 1048576) return (b / 1048576).toFixed(1) + ' MiB';
    if (b >= 1024) return (b / 1024).toFixed(1) + ' KiB';
    return b + ' B';
  }
  function kindOf(s) {
    var n = String(s.name).toLowerCase();
    if (n.indexOf('build') === 0) return 'build';
    if (n.indexOf('put') === 0) {
      var k = attr(s, 'kind'), key = String(attr(s, 'key') || '');
      if (k === undefined && /\.kfs$/.test(key)) k = 'kfs';
      if (k === undefined && /\.index$/.test(key)) k = 'index';
      return k === 'kfs' ? 'put-kfs' : k === 'index' ? 'put-index' : 'put';
    }
    if (n.indexOf('commit') === 0) return 'commit';
    if (n === 'produce') return 'produce';
    return 'other';
  }
  function labelOf(s, kind) {
    if (kind === 'put-kfs') return 'PUT .kfs';
    if (kind === 'put-index') return 'PUT .index';
    if (kind === 'put') return attr(s, 'kind') !== undefined ? 'PUT .' + attr(s, 'kind') : 'PUT';
    return s.name;
  }
  function isError(s) {
    var st = attr(s, 'status');
    if (typeof st === 'number') return st >= 400 || st < 0;
    if (typeof st === 'string') return st !== '' && st !== 'ok' && !/^2\d\d$/.test(st);
    return false;
  }
  function tooltip(s, origin) {
    var lines = [s.name + ' \u2014 ' + dur(s.duration_ns),
      'starts at +' + dur(Math.max(0, s.start_ns - origin)) + ' \u00b7 core ' + s.core];
    var a = s.attributes || {};
    Object.keys(a).forEach(function (k) { lines.push(k + ' = ' + a[k]); });
    (s.links || []).forEach(function (l) { lines.push('links to trace ' + l.trace_id); });
    return lines.join('\n');
  }
  function pct(x, windowNs) { return (100 * x / windowNs).toFixed(4) + '%'; }
  // Greedy interval packing: first lane whose last span ended before this one starts.
  function pack(spans, maxLanes) {
    var ends = [], out = [];
    spans.forEach(function (s) {
      var lane = -1;
      for (var i = 0; i < ends.length; i++) { if (ends[i] <= s.start_ns) { lane = i; break; } }
      if (lane < 0) {
        if (maxLanes && ends.length >= maxLanes) { out.push(-1); return; }
        lane = ends.length; ends.push(0);
      }
      ends[lane] = s.end_ns;
      out.push(lane);
    });
    return { lanes: out, count: ends.length };
  }
  function tickLabel(ns, step) {
    var units = [[1e9, 's'], [1e6, 'ms'], [1e3, '\u00b5s'], [1, 'ns']];
    for (var i = 0; i < units.length; i++) {
      if (step >= units[i][0] || i === units.length - 1) {
        return String(Math.round(ns / units[i][0] * 1000) / 1000) + ' ' + units[i][1];
      }
    }
    return String(ns);
  }
  function niceStep(windowNs) {
    var raw = windowNs / 8, p = Math.pow(10, Math.floor(Math.log10(raw)));
    var steps = [1, 2, 5, 10];
    for (var i = 0; i < steps.length; i++) { if (steps[i] * p >= raw) return steps[i] * p; }
    return 10 * p;
  }
  function bar(track, s, kind, origin, windowNs, top, text) {
    var b = el('div', 'span-bar span-' + kind + (isError(s) ? ' span-error' : ''));
    b.style.left = pct(s.start_ns - origin, windowNs);
    b.style.width = pct(Math.max(s.duration_ns, 0), windowNs);
    b.style.top = top + 'px';
    if (text) b.textContent = text;
    b.title = tooltip(s, origin);
    b.setAttribute('data-span-id', s.span_id);
    track.appendChild(b);
    return b;
  }

  function legend() {
    var box = document.getElementById('legend');
    box.textContent = '';
    KINDS.forEach(function (k) {
      var item = el('span', 'legend-item');
      item.appendChild(el('span', 'swatch span-' + k[0]));
      item.appendChild(document.createTextNode(k[1]));
      box.appendChild(item);
    });
    var band = el('span', 'legend-item');
    var sw = el('span', 'swatch flush-band');
    sw.style.position = 'static';
    band.appendChild(sw);
    band.appendChild(document.createTextNode('whole flush'));
    box.appendChild(band);
  }

  function render(doc) {
    var rootName = (doc.query && doc.query.root) || 'flush';
    var traces = doc.traces || [];
    var flushes = traces.filter(function (t) { return t.root === rootName; });
    var linked = {};
    traces.forEach(function (t) {
      if (t.root === rootName) return;
      t.spans.forEach(function (s) {
        (s.links || []).forEach(function (l) { (linked[l.trace_id] = linked[l.trace_id] || []).push(s); });
      });
    });
    var rows = flushes.map(function (f) {
      var produces = (linked[f.trace_id] || []).slice().sort(function (a, b) { return a.start_ns - b.start_ns; });
      var start = f.start_ns, end = f.end_ns;
      produces.forEach(function (p) { start = Math.min(start, p.start_ns); end = Math.max(end, p.end_ns); });
      return { flush: f, produces: produces, start: start, end: end };
    });
    var windowNs = 1;
    rows.forEach(function (r) { windowNs = Math.max(windowNs, r.end - r.start); });

    var container = document.getElementById('rows');
    container.textContent = '';
    var nProduces = rows.reduce(function (n, r) { return n + r.produces.length; }, 0);
    document.getElementById('summary').textContent =
      flushes.length + ' flush' + (flushes.length === 1 ? '' : 'es') + ' \u00b7 ' + nProduces + ' linked produce' +
      (nProduces === 1 ? '' : 's') + ' \u00b7 time axis: ' + dur(windowNs) + ' (same scale on every row)';
    if (!rows.length) {
      container.appendChild(el('div', 'empty', 'No ' + rootName + ' traces recorded yet.'));
      return;
    }

    var step = niceStep(windowNs);
    var axis = el('div', 'axis-row');
    axis.appendChild(el('div', 'flush-label', 'time since the first linked produce'));
    var axisTrack = el('div', 'axis-track');
    for (var t = 0; t <= windowNs; t += step) {
      var tick = el('div', 'tick');
      tick.style.left = pct(t, windowNs);
      tick.appendChild(el('span', 'tick-label', t === 0 ? '0' : tickLabel(t, step)));
      axisTrack.appendChild(tick);
    }
    axis.appendChild(axisTrack);
    container.appendChild(axis);

    rows.forEach(function (r) {
      var f = r.flush, rootSpan = null;
      f.spans.forEach(function (s) { if (!rootSpan && !s.parent_id) rootSpan = s; });
      rootSpan = rootSpan || f.spans[0];
      var children = f.spans.filter(function (s) { return s !== rootSpan; });

      var row = el('div', 'flush-row');
      row.setAttribute('data-trace-id', f.trace_id);
      var label = el('div', 'flush-label');
      var where = [];
      if (attr(rootSpan, 'topic') !== undefined) where.push(attr(rootSpan, 'topic') + (attr(rootSpan, 'partition') !== undefined ? '/' + attr(rootSpan, 'partition') : ''));
      else if (attr(rootSpan, 'partition') !== undefined) where.push('partition ' + attr(rootSpan, 'partition'));
      label.appendChild(el('div', 'flush-title', rootName + ' ' + (where.length ? where[0] + ' ' : '') + '\u00b7 ' + dur(f.duration_ns)));
      var meta = [];
      if (attr(rootSpan, 'bytes') !== undefined) meta.push(bytes(attr(rootSpan, 'bytes')));
      if (attr(rootSpan, 'segment') !== undefined) meta.push('segment ' + attr(rootSpan, 'segment'));
      meta.push('core ' + f.core);
      meta.push('trace ' + f.trace_id.slice(-8));
      label.appendChild(el('div', 'flush-meta', meta.join(' \u00b7 ')));

      // How much of the slowest linked produce each upload took.
      if (r.produces.length) {
        var slow = r.produces.reduce(function (a, b) { return b.duration_ns > a.duration_ns ? b : a; });
        var share = el('div', 'flush-share');
        share.appendChild(document.createTextNode(r.produces.length + ' produce' + (r.produces.length === 1 ? '' : 's') + ', slowest ' + dur(slow.duration_ns) + ': '));
        var parts = [];
        children.forEach(function (s) {
          var k = kindOf(s);
          if (k === 'produce' || k === 'other') return;
          parts.push([labelOf(s, k), Math.round(100 * s.duration_ns / Math.max(1, slow.duration_ns))]);
        });
        parts.forEach(function (p, i) {
          if (i) share.appendChild(document.createTextNode(' \u00b7 '));
          var part = el('span', 'part', p[0] + ' ');
          part.appendChild(el('b', null, p[1] + '%'));
          share.appendChild(part);
        });
        label.appendChild(share);
      }
      row.appendChild(label);

      var track = el('div', 'flush-track');
      for (var g = 0; g <= windowNs; g += step) {
        var line = el('div', 'tick');
        line.style.left = pct(g, windowNs);
        track.appendChild(line);
      }
      var top = 6;
      // Linked produces on top, packed into a few thin lanes.
      var pp = pack(r.produces, MAX_PRODUCE_LANES), hidden = 0;
      r.produces.forEach(function (p, i) {
        if (pp.lanes[i] < 0) { hidden++; return; }
        bar(track, p, 'produce', r.start, windowNs, top + pp.lanes[i] * PRODUCE_H, '');
      });
      if (pp.count) top += pp.count * PRODUCE_H + 6;
      if (hidden) {
        var more = el('div', 'lane-caption', '+' + hidden + ' more produces');
        more.style.top = (top - 6) + 'px';
        track.appendChild(more);
        top += 12;
      }
      var band = el('div', 'flush-band');
      band.style.left = pct(rootSpan.start_ns - r.start, windowNs);
      band.style.width = pct(Math.max(rootSpan.duration_ns, 0), windowNs);
      band.style.top = (top - 3) + 'px';
      band.title = tooltip(rootSpan, r.start);
      track.appendChild(band);
      var cp = pack(children, 0);
      children.forEach(function (s, i) {
        var k = kindOf(s), text = labelOf(s, k) + ' ' + dur(s.duration_ns);
        var retries = attr(s, 'retries');
        if (typeof retries === 'number' && retries > 0) text += ' \u21bb' + retries;
        bar(track, s, k, r.start, windowNs, top + cp.lanes[i] * LANE_H, text);
      });
      var height = top + Math.max(cp.count, 1) * LANE_H + 6;
      band.style.height = (height - top - 3) + 'px';
      track.style.height = height + 'px';
      row.appendChild(track);
      container.appendChild(row);
    });
  }

  function setStatus(text) { document.getElementById('status').textContent = text; }
  function stamp(doc) {
    if (typeof doc.epoch_unix_ns === 'number' && typeof doc.now_ns === 'number') {
      return 'data from ' + new Date((doc.epoch_unix_ns + doc.now_ns) / 1e6).toLocaleTimeString();
    }
    return '';
  }

  var embedded = document.getElementById('skiff-traces').textContent;
  var current = null;
  try { current = JSON.parse(embedded); } catch (e) { current = { traces: [] }; setStatus('embedded data is not valid JSON'); }
  legend();
  render(current);
  var served = location.protocol !== 'file:';
  setStatus(served ? stamp(current) : 'static snapshot \u00b7 ' + stamp(current));

  var refreshBtn = document.getElementById('refresh'), auto = document.getElementById('auto'), timer = null;
  function refresh() {
    var q = current && current.query ? current.query : { root: 'flush', limit: 30 };
    var url = '../traces?root=' + encodeURIComponent(q.root || 'flush') + '&linked=1&limit=' + (q.limit || 30);
    fetch(url, { cache: 'no-store' }).then(function (r) {
      if (!r.ok) throw new Error('HTTP ' + r.status);
      return r.json();
    }).then(function (doc) { current = doc; render(doc); setStatus(stamp(doc)); })
      .catch(function (e) { setStatus('refresh failed: ' + e.message); });
  }
  if (!served) {
    refreshBtn.disabled = true;
    auto.disabled = true;
  } else {
    refreshBtn.addEventListener('click', refresh);
    auto.addEventListener('change', function () {
      if (timer) { clearInterval(timer); timer = null; }
      if (auto.checked) timer = setInterval(refresh, 2000);
    });
  }
})();
</script>
</body>
</html>
)SKIFFHTML";

// JSON inside <script type="application/json">: '<', '>' and '&' only occur inside JSON
// strings, where \u escapes keep the meaning and make "</script>" impossible.
std::string escape_for_script(std::string_view json) {
    std::string out;
    out.reserve(json.size() + 64);
    for (char c : json) {
        switch (c) {
        case '<': out += "\\u003c"; break;
        case '>': out += "\\u003e"; break;
        case '&': out += "\\u0026"; break;
        default: out += c;
        }
    }
    return out;
}

} // namespace

std::string traces_view_html(std::string_view traces_json_document) {
    const std::size_t at = page.find(placeholder);
    std::string out;
    out.reserve(page.size() + traces_json_document.size() + 256);
    out.append(page.substr(0, at));
    out.append(escape_for_script(traces_json_document));
    out.append(page.substr(at + placeholder.size()));
    return out;
}

} // namespace skiff::metrics
