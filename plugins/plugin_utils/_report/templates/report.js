(function () {
  "use strict";
  // The page's one script: the hosts table (filters, search, pages of rows), links that carry a filter or a host
  // (#state=, #cause=, #where=, #finding=, #q=, #host=, #view=), and the detail of a host, drawn when opened from the
  // page's data (GPROBE, written just before this script by _report/page.py). Every text goes in as text
  // (textContent), never as markup.
  var body = document.body;
  window.addEventListener("error", function (e) { body.setAttribute("data-error", String(e.message)); });
  var D = window.GPROBE;
  var S = D.str, H = D.hosts, PAGE = 200;
  var byName = {};
  for (var i = 0; i < H.length; i++) { byName[H[i][0]] = i; }
  var sel = {state: document.getElementById("f-state"), cause: document.getElementById("f-group"),
             where: document.getElementById("f-where"), finding: document.getElementById("f-finding")};
  var search = document.getElementById("f-name"), count = document.getElementById("f-count"),
      tbody = document.querySelector("#hosts tbody"), more = document.getElementById("f-more"),
      detail = document.getElementById("detail");
  var limit = PAGE, matches = [];

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }
  function badge(state) { return el("span", "badge b-" + state, state); }
  function has(list, x) { return list.indexOf(x) >= 0; }
  function str(k) { return k < 0 ? "" : S[k]; }

  // a host row: [name, state, cause, statuses, [reason per layer], signature or cause, points to, [places],
  // [findings], detail]
  function match(h, f) {
    return (!f.state || D.states[h[1]] === f.state) && (f.cause === "" || String(h[2]) === f.cause)
      && (f.where === "" || has(h[7], +f.where)) && (f.finding === "" || has(h[8], +f.finding))
      && (!f.q || h[0].toLowerCase().indexOf(f.q) >= 0);
  }
  function filters() {
    return {state: sel.state.value, cause: sel.cause.value, where: sel.where ? sel.where.value : "",
            finding: sel.finding ? sel.finding.value : "", q: search.value.toLowerCase()};
  }
  function row(h) {
    var tr = el("tr");
    tr.setAttribute("data-state", D.states[h[1]]);
    tr.setAttribute("data-group", D.causes[h[2]].id);
    var td = el("td"), a = el("a", null, h[0]);
    a.href = "#host=" + encodeURIComponent(h[0]);
    td.appendChild(a); tr.appendChild(td);
    td = el("td"); td.appendChild(badge(D.states[h[1]])); tr.appendChild(td);
    for (var l = 0; l < D.layers.length; l++) {
      var st = D.statuses[h[3].charAt(l)];
      td = el("td", "s-" + st, st); td.title = str(h[4][l]); tr.appendChild(td);
    }
    td = el("td"); td.appendChild(el("code", null, str(h[5]))); tr.appendChild(td);
    tr.appendChild(el("td", null, str(h[6])));
    tr.appendChild(el("td", "where", h[7].filter(function (p) { return !D.places[p][3]; })
      .map(function (p) { return D.places[p][2]; }).join(", ")));
    return tr;
  }
  function apply() {
    var f = filters();
    matches = [];
    for (var i = 0; i < H.length; i++) { if (match(H[i], f)) { matches.push(H[i]); } }
    var frag = document.createDocumentFragment();
    for (var k = 0; k < matches.length && k < limit; k++) { frag.appendChild(row(matches[k])); }
    tbody.textContent = "";
    tbody.appendChild(frag);
    var n = Math.min(matches.length, limit);
    count.textContent = (matches.length === H.length ? "" : matches.length.toLocaleString("en-US") + " of ")
      + H.length.toLocaleString("en-US") + " hosts" + (n < matches.length ? "; the first " + n.toLocaleString("en-US") + " shown" : "");
    more.hidden = n >= matches.length;
    more.textContent = "show " + Math.min(PAGE, matches.length - n).toLocaleString("en-US") + " more";
  }
  function hash() {
    var out = {}, parts = window.location.hash.replace(/^#/, "").split("&");
    for (var p = 0; p < parts.length; p++) {
      var at = parts[p].indexOf("=");
      if (at > 0) { out[parts[p].slice(0, at)] = decodeURIComponent(parts[p].slice(at + 1)); }
    }
    return out;
  }
  function indexOf(list, key, value) {
    for (var i = 0; i < list.length; i++) { if (list[i][key] === value) { return String(i); } }
    return "";
  }
  function setHash() {
    var f = filters(), parts = [];
    if (f.state) { parts.push("state=" + encodeURIComponent(f.state)); }
    if (f.cause !== "") { parts.push("cause=" + encodeURIComponent(D.causes[+f.cause].id)); }
    if (f.where !== "") { parts.push("where=" + encodeURIComponent(D.places[+f.where][0] + ":" + D.places[+f.where][1])); }
    if (f.finding !== "") { parts.push("finding=" + encodeURIComponent(D.findings[+f.finding].id)); }
    if (search.value) { parts.push("q=" + encodeURIComponent(search.value)); }
    var h = hash();
    if (h.view) { parts.unshift("view=" + encodeURIComponent(h.view)); }
    history.replaceState(null, "", parts.length ? "#" + parts.join("&") : window.location.pathname + window.location.search);
  }
  function changed() { limit = PAGE; apply(); setHash(); }

  // ---- the detail of a host, from its compact form: the patch applied to its cause's shape, then the shape's tokens
  // (host name, GPU UUIDs) swapped for the host's in every string (the JSON report's reader does the same)
  function clone(x) { return JSON.parse(JSON.stringify(x)); }
  function patch(doc, ops) {
    for (var i = 0; i < ops.length; i++) {
      var parts = ops[i][0].split("/").slice(1).map(function (p) { return p.replace(/~1/g, "/").replace(/~0/g, "~"); });
      if (!parts.length) { doc = ops[i][1]; continue; }
      var parent = doc;
      for (var k = 0; k < parts.length - 1; k++) { parent = parent[Array.isArray(parent) ? +parts[k] : parts[k]]; }
      var last = Array.isArray(parent) ? +parts[parts.length - 1] : parts[parts.length - 1];
      if (ops[i].length > 1) { parent[last] = ops[i][1]; } else { delete parent[last]; }
    }
    return doc;
  }
  function plain(t) { return typeof t === "string" && t.length >= 6 && /^[\x20-\x7e]*$/.test(t) && !/["\\]/.test(t); }
  function unique(list) { return list.every(function (x, i) { return list.indexOf(x) === i; }); }
  function swap(doc, from, to) {
    var pairs = {}, keys = [];
    if (from.length !== to.length || !unique(from) || !unique(to)) { return doc; }
    for (var i = 0; i < from.length; i++) {
      if (from[i] !== to[i] && plain(from[i]) && plain(to[i])) { pairs[from[i]] = to[i]; keys.push(from[i]); }
    }
    if (!keys.length) { return doc; }
    keys.sort(function (a, b) { return b.length - a.length; });
    var re = new RegExp(keys.map(function (k) { return k.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"); }).join("|"), "g");
    function walk(v) {
      if (typeof v === "string") { return v.replace(re, function (m) { return pairs[m]; }); }
      if (Array.isArray(v)) { return v.map(walk); }
      if (v && typeof v === "object") {
        var out = {};
        for (var k in v) { if (Object.prototype.hasOwnProperty.call(v, k)) { out[walk(k)] = walk(v[k]); } }
        return out;
      }
      return v;
    }
    return walk(doc);
  }
  function restore(d) {
    if (d.doc) { return d.doc; }
    var shape = D.shapes[d.shape];
    return swap(patch(clone(shape.doc), d.patch), shape.tokens, d.tokens);
  }
  function table(head, rows, cls) {
    var t = el("table", cls), tr = el("tr");
    head.forEach(function (h) { tr.appendChild(el("th", null, h)); });
    t.appendChild(tr);
    rows.forEach(function (r) { t.appendChild(r); });
    return t;
  }
  function cells(values, statusAt) {
    var tr = el("tr");
    values.forEach(function (v, i) { tr.appendChild(el("td", i === statusAt ? "s-" + v : null, v)); });
    return tr;
  }
  function openHost(name) {
    var at = byName[name];
    detail.textContent = "";
    if (at === undefined) { detail.hidden = true; return; }
    var h = H[at], state = D.states[h[1]], cause = D.causes[h[2]];
    var head = el("h2", null, name + " ");
    head.appendChild(badge(state));
    detail.appendChild(head);
    var link = el("p"), a = el("a", null, cause.words);
    a.href = "#cause=" + encodeURIComponent(cause.id);
    link.appendChild(document.createTextNode("cause: "));
    link.appendChild(a);
    link.appendChild(document.createTextNode(" (" + cause.count.toLocaleString("en-US") + (cause.count === 1 ? " host)" : " hosts)")));
    if (h[9] < 0) {
      detail.appendChild(el("p", null, D.verified_words));
      detail.appendChild(link);
      detail.appendChild(table(["layer", "status", "reason"], D.layers.map(function (l, i) {
        return cells([l, D.statuses[h[3].charAt(i)], str(h[4][i])], 1);
      })));
    } else {
      var d = restore(D.detail[h[9]]);
      detail.appendChild(el("p", null, d.unverifiable || d.reason));
      detail.appendChild(link);
      if (d.because && d.because.length) {
        detail.appendChild(el("p", null, "because:"));
        var ul = el("ul");
        d.because.forEach(function (b) { ul.appendChild(el("li", null, b)); });
        detail.appendChild(ul);
      }
      if (d.gpus && d.gpus.length) {
        detail.appendChild(table(D.gpu_columns, d.gpus.map(function (g) {
          var tr = cells(g.slice(1), D.gpu_columns.indexOf("status"));
          if (g[0]) { tr.className = "mig"; }
          return tr;
        }), "gpus"));
      }
      if (d.health && d.health.length) {
        detail.appendChild(table(["GPU health", "passed", "findings", "not read (why)"], d.health.map(function (x) {
          return cells([x[0], String(x[1]), x[2].map(function (f) { return f[1] + " " + f[0] + ": " + f[2]; }).join("; "),
                        x[3].map(function (f) { return f[0]; }).join(", ")]);
        }), "health"));
      }
      // the failed layers open (the warnings too when nothing failed): the first red layer is the verdict
      var failed = (d.layers || []).some(function (l) { return l.status === "FAIL"; });
      (d.layers || []).forEach(function (l) {
        var det = el("details"), sum = el("summary", null, l.layer + " ");
        sum.appendChild(badge(l.status));
        sum.appendChild(document.createTextNode(" " + (l.reason || "")));
        det.appendChild(sum);
        if (l.status === "FAIL" || (l.status === "WARN" && !failed)) { det.open = true; }
        if (l.checks.length) {
          det.appendChild(table(["check", "status", "subject", "expected", "observed", "hint"], l.checks.map(function (c) {
            return cells(c, 1);
          })));
        }
        if (l.versions) { det.appendChild(el("p", null, "versions: " + l.versions)); }
        if (l.not_proven) { det.appendChild(el("p", null, "not proven by this result: " + l.not_proven)); }
        detail.appendChild(det);
      });
    }
    detail.hidden = false;
    detail.scrollIntoView();
  }
  function route() {
    var h = hash();
    sel.state.value = h.state || "";
    sel.cause.value = h.cause ? indexOf(D.causes, "id", h.cause) : (h.group ? indexOf(D.causes, "id", h.group) : "");
    if (sel.where) {
      var w = "";
      for (var p = 0; h.where && p < D.places.length; p++) {
        if (D.places[p][0] + ":" + D.places[p][1] === h.where || (D.places[p][0] === "group" && D.places[p][1] === h.where)) { w = String(p); }
      }
      sel.where.value = w;
    }
    if (sel.finding) { sel.finding.value = h.finding ? indexOf(D.findings, "id", h.finding) : ""; }
    search.value = h.q || "";
    limit = PAGE;
    apply();
    body.className = h.view ? "only-" + h.view : "";
    if (h.host) { openHost(h.host); } else {
      detail.hidden = true;
      if (h.state || h.cause || h.group || h.where || h.finding || h.q) { document.getElementById("hosts-section").scrollIntoView(); }
    }
  }
  [sel.state, sel.cause, sel.where, sel.finding].forEach(function (s) { if (s) { s.addEventListener("change", changed); } });
  search.addEventListener("input", changed);
  more.addEventListener("click", function () { limit += PAGE; apply(); });
  var tiles = document.querySelectorAll(".tile[data-state]");
  for (var t = 0; t < tiles.length; t++) {
    tiles[t].addEventListener("click", function () {
      sel.state.value = this.getAttribute("data-state"); sel.cause.value = ""; changed();
      document.getElementById("hosts-section").scrollIntoView();
    });
  }
  window.addEventListener("hashchange", route);
  route();
  body.setAttribute("data-ready", "1");
})();
