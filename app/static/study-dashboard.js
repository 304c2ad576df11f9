// The study dashboard: refresh the figures and the worker table from the JSON report.
// Without JavaScript the page shows the figures as they were when it loaded.
(function () {
  "use strict";
  var panel = document.getElementById("study-dashboard");
  if (!panel || !window.fetch) return;
  var workers = document.getElementById("study-workers");
  var seconds = parseInt(panel.dataset.refresh, 10) || 15;

  function lookup(data, path) {
    return path.split(".").reduce(function (value, key) {
      return value === null || value === undefined ? value : value[key];
    }, data);
  }

  function show(value, format) {
    if (value === null || value === undefined) return "—";
    if (format === "percent") return Math.round(value * 100) + "%";
    if (format === "fixed2") return value.toFixed(2);
    if (typeof value === "number" && !Number.isInteger(value)) return value.toFixed(1);
    return String(value);
  }

  function cell(row, text) {
    var td = document.createElement("td");
    td.textContent = text;  // text only: worker ids come from outside
    row.appendChild(td);
  }

  function table(list) {
    var rows = document.createDocumentFragment();
    list.forEach(function (w) {
      var tr = document.createElement("tr");
      [w.worker_id, w.status, w.decision || "", w.rounds_done,
        w.checks_passed + "/" + w.checks_failed, w.points,
        show(w.median_round_seconds), show(w.median_gap_seconds), w.flags.join(", ")]
        .forEach(function (text) { cell(tr, text); });
      rows.appendChild(tr);
    });
    if (!list.length) {
      var empty = document.createElement("tr");
      cell(empty, "No one has joined yet.");
      empty.firstChild.colSpan = 9;
      rows.appendChild(empty);
    }
    workers.replaceChildren(rows);
  }

  function refresh() {
    fetch(panel.dataset.source, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) {
        if (!data) return;
        document.querySelectorAll("[data-field]").forEach(function (el) {
          el.textContent = show(lookup(data, el.dataset.field), el.dataset.format);
        });
        if (workers) table(data.workers);
        document.documentElement.dataset.dashboardRefreshed = String(Date.now());
      })
      .catch(function () { /* try again at the next tick */ });
  }
  setInterval(refresh, seconds * 1000);
})();
