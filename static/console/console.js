/* pgconsole: draws the charts whose data a page passes with json_script, on page load and after
   every htmx swap. A canvas names its data: <canvas data-chart="id-of-json-script">. The data:
   {kind: "line"|"bar", unit, stacked, spark, x: [epoch ms], series: [{label, data, color}],
    markers: [{x: epoch ms, label}], yMax, yMin}. null in data is a gap, drawn as a gap. */
(function () {
  "use strict";
  var PALETTE = ["#2f5fb3", "#d9822b", "#3c9a5f", "#b3261e", "#7b2fb3", "#0f8b8d", "#8a6d3b", "#6b7280"];

  function zone() { return document.body.dataset.timeZone || undefined; }

  function timeLabel(ms, spanMs) {
    var opts = { timeZone: zone(), hour: "2-digit", minute: "2-digit", hourCycle: "h23" };
    if (spanMs < 15 * 60 * 1000) { opts.second = "2-digit"; }  // minutes would repeat on a short range
    if (spanMs > 36 * 3600 * 1000) { opts = { timeZone: zone(), month: "short", day: "numeric", hour: "2-digit", hourCycle: "h23" }; }
    return new Intl.DateTimeFormat(undefined, opts).format(new Date(ms));
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

  function config(spec) {
    var span = spec.x.length > 1 ? spec.x[spec.x.length - 1] - spec.x[0] : 3600 * 1000;
    var datasets = spec.series.map(function (s, i) {
      var color = s.color || PALETTE[i % PALETTE.length];
      return {
        label: s.label, data: spec.x.map(function (t, j) { return { x: t, y: s.data[j] }; }),
        borderColor: color, backgroundColor: spec.stacked || spec.kind === "bar" ? color + "cc" : color + "33",
        fill: spec.stacked ? (i === 0 ? "origin" : "-1") : false, spanGaps: false,
        // A value between two gaps (or a range holding one bucket) has no line to draw: show it as a dot.
        pointRadius: function (c) {
          var d = s.data, j = c.dataIndex;
          return d[j] !== null && (j === 0 || d[j - 1] === null) && (j === d.length - 1 || d[j + 1] === null) ? 2.5 : 0;
        },
        borderWidth: spec.spark ? 1 : 1.5, tension: 0
      };
    });
    var scales = {
      x: { type: "linear", min: spec.xMin, max: spec.xMax, ticks: { callback: function (v) { return timeLabel(v, span); }, maxTicksLimit: 8 }, display: !spec.spark },
      // grace: a line flat at its maximum stays off the top edge.
      y: { stacked: !!spec.stacked, beginAtZero: true, min: spec.yMin, max: spec.yMax, display: !spec.spark,
           grace: spec.yMax === undefined ? "5%" : 0,
           title: { display: !!spec.unit, text: spec.unit }, ticks: { callback: number } }
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
