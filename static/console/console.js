/* pgconsole: draws the charts whose data a page passes with json_script, on page load and after
   every htmx swap. A canvas names its data: <canvas data-chart="id-of-json-script">. The data:
   {kind: "line"|"bar", unit, stacked, spark, x: [epoch ms], xEnd: [epoch ms] (optional),
    series: [{label, data, color}], markers: [{x: epoch ms, label}], yMax, yMin}. null in data is a gap,
    drawn as a gap. With xEnd, each value covers [x, xEnd] and is drawn flat across it. */
(function () {
  "use strict";
  var PALETTE = ["#2f5fb3", "#d9822b", "#3c9a5f", "#b3261e", "#7b2fb3", "#0f8b8d", "#8a6d3b", "#6b7280"];

  function zone() { return document.body.dataset.timeZone || undefined; }

  var SECOND = 1000, MINUTE = 60 * SECOND, HOUR = 60 * MINUTE, DAY = 24 * HOUR;
  // Tick steps a reader counts in: ticks fall on round times of their own clock.
  var STEPS = [10 * SECOND, 30 * SECOND, MINUTE, 2 * MINUTE, 5 * MINUTE, 10 * MINUTE, 15 * MINUTE, 30 * MINUTE,
               HOUR, 2 * HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR, DAY, 2 * DAY, 7 * DAY];

  // The time label of a tick: its step decides what it names (seconds, minutes, hours or days).
  function timeLabel(ms, spanMs, stepMs) {
    var opts = { timeZone: zone(), hour: "2-digit", minute: "2-digit", hourCycle: "h23" };
    if ((stepMs || spanMs) < MINUTE || spanMs < 15 * MINUTE) { opts.second = "2-digit"; }
    if (stepMs >= DAY) { opts = { timeZone: zone(), month: "short", day: "numeric" }; }
    else if (spanMs > 36 * HOUR) { opts.month = "short"; opts.day = "numeric"; }
    return new Intl.DateTimeFormat(undefined, opts).format(new Date(ms));
  }

  // How far the reader's clock is ahead of UTC at `ms`, in ms (what Intl shows there, read back).
  var partsFormat = null;
  function offsetMs(ms) {
    if (!partsFormat) {
      partsFormat = new Intl.DateTimeFormat("en-US", { timeZone: zone(), hourCycle: "h23", year: "numeric",
        month: "numeric", day: "numeric", hour: "numeric", minute: "numeric", second: "numeric" });
    }
    var p = {};
    partsFormat.formatToParts(new Date(ms)).forEach(function (x) { p[x.type] = Number(x.value); });
    return Date.UTC(p.year, p.month - 1, p.day, p.hour % 24, p.minute, p.second) - Math.floor(ms / SECOND) * SECOND;
  }

  // At most `most` ticks between min and max, at round times of the reader's clock (every 5 minutes, every
  // 3 hours, at midnight...), each moved by a change of offset (summer time) so that it stays round.
  function roundTicks(min, max, most) {
    var span = max - min, step = STEPS[STEPS.length - 1];
    for (var i = 0; i < STEPS.length; i++) { if (span / STEPS[i] <= most) { step = STEPS[i]; break; } }
    var offset = offsetMs(min), out = [];
    for (var t = Math.ceil((min + offset) / step) * step - offset; t <= max; t += step) {
      var at = step >= HOUR ? t - (offsetMs(t) - offset) : t;
      if (at >= min && at <= max) { out.push({ value: at }); }
    }
    return out;
  }

  // A y tick with as many decimals as its step needs, the same for every tick: labels never repeat
  // after rounding (0.0025 and 0.002 both read "0.002" with a fixed three decimals).
  function tickNumber(v, index, ticks) {
    var step = ticks && ticks.length > 1 ? Math.abs(ticks[1].value - ticks[0].value) : 0;
    if (!step) { return number(v); }
    var digits = Math.max(0, Math.ceil(-Math.log10(step) - 1e-9));
    while (digits < 8 && Math.abs(step * Math.pow(10, digits) - Math.round(step * Math.pow(10, digits))) > 1e-6) {
      digits++;
    }
    return v.toLocaleString(undefined, { minimumFractionDigits: digits, maximumFractionDigits: digits });
  }

  function fullTime(ms) {
    return new Intl.DateTimeFormat(undefined, { timeZone: zone(), dateStyle: "medium", timeStyle: "short" }).format(new Date(ms));
  }

  function number(v) {
    if (v === null || v === undefined) { return "no data"; }
    var a = Math.abs(v);
    var digits = a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : 3;
    return v.toLocaleString(undefined, { maximumFractionDigits: digits });
  }

  // Vertical lines where the server's configuration changed (pg_stat_statements.max, track, ...).
  var markersPlugin = {
    id: "pgconsoleMarkers",
    afterDatasetsDraw: function (chart, args, opts) {
      var markers = (opts && opts.markers) || [];
      if (!markers.length) { return; }
      var ctx = chart.ctx, x = chart.scales.x, area = chart.chartArea;
      ctx.save();
      ctx.strokeStyle = "#b3261e"; ctx.fillStyle = "#b3261e"; ctx.setLineDash([4, 3]); ctx.lineWidth = 1;
      ctx.font = "10px sans-serif";
      markers.forEach(function (m) {
        var px = x.getPixelForValue(m.x);
        if (px < area.left || px > area.right) { return; }
        ctx.beginPath(); ctx.moveTo(px, area.top); ctx.lineTo(px, area.bottom); ctx.stroke();
        ctx.fillText(m.label, Math.min(px + 3, area.right - 60), area.top + 10);
      });
      ctx.restore();
    }
  };

  // Values that each cover a span (spec.xEnd: where each one ends) are drawn flat across it: a snapshot
  // taken after an outage shows its average over the outage as a step, never a ramp between two points,
  // and where a span does not meet the next one (nothing was collected between them) the line breaks.
  function points(spec, values) {
    if (!spec.xEnd) { return spec.x.map(function (t, j) { return { x: t, y: values[j] }; }); }
    var out = [];
    spec.x.forEach(function (t, j) {
      if (j > 0 && t > spec.xEnd[j - 1]) { out.push({ x: (t + spec.xEnd[j - 1]) / 2, y: null }); }
      out.push({ x: t, y: values[j] }, { x: spec.xEnd[j], y: values[j] });
    });
    return out;
  }

  function config(spec) {
    var datasets = spec.series.map(function (s, i) {
      var color = s.color || PALETTE[i % PALETTE.length];
      return {
        label: s.label, data: points(spec, s.data),
        borderColor: color, backgroundColor: spec.stacked || spec.kind === "bar" ? color + "cc" : color + "33",
        fill: spec.stacked ? (i === 0 ? "origin" : "-1") : false, spanGaps: false,
        // A value between two gaps (or a range holding one bucket) has no line to draw: show it as a dot.
        pointRadius: spec.xEnd ? 0 : function (c) {
          var d = s.data, j = c.dataIndex;
          return d[j] !== null && (j === 0 || d[j - 1] === null) && (j === d.length - 1 || d[j + 1] === null) ? 2.5 : 0;
        },
        borderWidth: spec.spark ? 1 : 1.5, tension: 0
      };
    });
    var scales = {
      // bounds "data": the axis spans the range (or the data), not Chart.js's rounder numbers of milliseconds.
      x: { type: "linear", bounds: "data", min: spec.xMin, max: spec.xMax, display: !spec.spark,
           afterBuildTicks: function (axis) {
             if (axis.max > axis.min) { axis.ticks = roundTicks(axis.min, axis.max, 8); }
           },
           ticks: { autoSkip: false, maxRotation: 0, callback: function (v, i, ticks) {
             var step = ticks.length > 1 ? ticks[1].value - ticks[0].value : 0;
             return timeLabel(v, this.max - this.min, step);
           } } },
      // grace: a line flat at its maximum stays off the top edge.
      y: { stacked: !!spec.stacked, beginAtZero: true, min: spec.yMin, max: spec.yMax, display: !spec.spark,
           grace: spec.yMax === undefined ? "5%" : 0,
           title: { display: !!spec.unit, text: spec.unit }, ticks: { callback: tickNumber } }
    };
    return {
      type: spec.kind === "bar" ? "bar" : "line",
      data: { datasets: datasets },
      options: {
        animation: false, responsive: true, maintainAspectRatio: false, parsing: false, normalized: true,
        interaction: { mode: "index", intersect: false },
        scales: scales,
        plugins: {
          legend: { display: !spec.spark && spec.series.length > 1, position: "bottom" },
          tooltip: {
            enabled: !spec.spark,
            callbacks: {
              title: function (items) { return items.length ? fullTime(items[0].parsed.x) : ""; },
              label: function (item) { return item.dataset.label + ": " + number(item.parsed.y) + (spec.unit ? " " + spec.unit : ""); }
            }
          },
          pgconsoleMarkers: { markers: spec.markers || [] }
        }
      },
      plugins: [markersPlugin]
    };
  }

  function draw(canvas) {
    if (Chart.getChart(canvas)) { return; }
    var source = document.getElementById(canvas.dataset.chart);
    if (!source) { return; }
    var spec = JSON.parse(source.textContent);
    new Chart(canvas, config(spec));
    canvas.dataset.drawn = String(spec.series.reduce(function (n, s) { return n + s.data.filter(function (v) { return v !== null; }).length; }, 0));
  }

  htmx.onLoad(function (root) {
    var scope = root.querySelectorAll ? root : document;
    if (scope.matches && scope.matches("canvas[data-chart]")) { draw(scope); }
    scope.querySelectorAll("canvas[data-chart]").forEach(draw);
  });

  // A <select data-navigate> or a form's inputs marked data-autosubmit submit on change (no inline handlers).
  document.addEventListener("change", function (e) {
    var el = e.target;
    if (el.matches && el.matches("[data-autosubmit]") && el.form) { el.form.requestSubmit(); }
  });
  document.addEventListener("submit", function (e) {
    var el = e.target;
    if (el.matches && el.matches("form[data-confirm]") && !window.confirm(el.dataset.confirm)) { e.preventDefault(); }
  });

  // <button data-copy-target="id"> copies the text of the element with that id (the advisor's changes):
  // through the clipboard API where the page may use it, else by selecting the text for Ctrl+C.
  function copyFeedback(button, text) {
    if (!button.dataset.label) { button.dataset.label = button.textContent; }
    button.textContent = text;
    button.classList.toggle("copied", text === "Copied");
    clearTimeout(button.copyTimer);
    button.copyTimer = setTimeout(function () {
      button.textContent = button.dataset.label;
      button.classList.remove("copied");
    }, 2500);
  }

  function selectText(source, button) {
    var range = document.createRange();
    range.selectNodeContents(source);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    var copied = false;
    try { copied = document.execCommand("copy"); } catch (err) { copied = false; }
    copyFeedback(button, copied ? "Copied" : "Selected: press Ctrl+C");
  }

  document.addEventListener("click", function (e) {
    var button = e.target.closest ? e.target.closest("button[data-copy-target]") : null;
    if (!button) { return; }
    var source = document.getElementById(button.dataset.copyTarget);
    if (!source) { return; }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(source.textContent).then(
        function () { copyFeedback(button, "Copied"); },
        function () { selectText(source, button); }
      );
    } else {
      selectText(source, button);
    }
  });
})();
