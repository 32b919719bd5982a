/* preflab web UI: small vanilla JS, no build step. Every change goes through the REST API
   with the session's CSRF token (meta[name=csrf-token]). */
"use strict";

(function () {
  const $ = (sel, root) => (root || document).querySelector(sel);
  const $$ = (sel, root) => Array.from((root || document).querySelectorAll(sel));
  const csrf = () => ($('meta[name="csrf-token"]') || {}).content || "";

  async function api(method, url, body, raw) {
    const headers = { "X-CSRF-Token": csrf() };
    let payload;
    if (raw !== undefined) {
      payload = raw;
      headers["Content-Type"] = "application/octet-stream";
    } else if (body !== undefined) {
      payload = JSON.stringify(body);
      headers["Content-Type"] = "application/json";
    }
    const resp = await fetch(url, { method, headers, body: payload, credentials: "same-origin" });
    let data = null;
    try { data = await resp.json(); } catch (e) { data = null; }
    return { ok: resp.ok, status: resp.status, data };
  }

  function problemText(data) {
    if (!data) return "request failed";
    const parts = [typeof data.detail === "string" ? data.detail : JSON.stringify(data.detail)];
    (data.errors || []).forEach((e) => parts.push((e.loc || []).filter((x) => x !== "body").join(".") + ": " + e.msg));
    return parts.join(" · ");
  }

  function toast(msg) {
    const t = $("#toast");
    if (!t) return;
    t.textContent = msg;
    t.hidden = false;
    clearTimeout(toast._t);
    toast._t = setTimeout(() => { t.hidden = true; }, 4000);
  }

  function showError(el, msg) {
    if (!el) { toast(msg); return; }
    el.textContent = msg;
    el.hidden = !msg;
  }

  const typing = (el) => el && (el.tagName === "TEXTAREA" || el.tagName === "SELECT" ||
    (el.tagName === "INPUT" && !["radio", "checkbox", "button", "submit"].includes(el.type)) || el.isContentEditable);

  function uuid() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
    return "id-" + Date.now().toString(36) + Math.random().toString(36).slice(2);
  }

  /* ---------------------------------------------------------------- common: login, logout, help */

  /* Where to go after login: a path on this site, else "/" -- the server's rule (auth.safe_redirect_path):
     one "/", then printable ASCII and no backslash, since browsers read "/" + backslash + "x" and
     "/<TAB>/x" as "//x", another site. */
  function sameSitePath(target) {
    if (typeof target !== "string" || target[0] !== "/" || target[1] === "/") return "/";
    if (!/^[\x21-\x7e]*$/.test(target) || target.indexOf("\\") !== -1) return "/";
    return target;
  }

  function initCommon() {
    $$('[data-action="logout"]').forEach((b) => b.addEventListener("click", async () => {
      await api("POST", "/api/v1/auth/logout");
      location.href = "/login";
    }));

    const login = $("#login-form");
    if (login) login.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const r = await api("POST", "/api/v1/auth/login", { username: login.username.value, password: login.password.value });
      if (r.ok) location.href = sameSitePath(login.dataset.next);
      else showError($("#login-error"), problemText(r.data));
    });

    const invite = $("#invite-form");
    if (invite) invite.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const body = { username: invite.username.value, password: invite.password.value };
      const r = await api("POST", "/api/v1/invites/" + encodeURIComponent(invite.dataset.token) + "/accept", body);
      if (!r.ok) { showError($("#invite-error"), problemText(r.data)); return; }
      const l = await api("POST", "/api/v1/auth/login", body);
      location.href = l.ok ? "/" : "/login";
    });

    const claim = $("#claim-form");
    if (claim) claim.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const r = await api("POST", "/api/v1/me/credentials", { domain: claim.domain.value, evidence: claim.evidence.value });
      if (r.ok) location.reload(); else toast(problemText(r.data));
    });

    const help = $("#help");
    const openHelp = () => { if (help && !help.open) { help.showModal(); } };
    $$('[data-action="help"]').forEach((b) => b.addEventListener("click", openHelp));
    $$('[data-action="close-help"]').forEach((b) => b.addEventListener("click", () => help.close()));
    document.addEventListener("keydown", (ev) => {
      if (ev.defaultPrevented || ev.ctrlKey || ev.metaKey || ev.altKey || typing(ev.target)) return;
      if (ev.key === "?" || ev.key === "g") { if (help) { ev.preventDefault(); openHelp(); } }
    });
  }

  /* ---------------------------------------------------------------- telemetry (summary only) */

  // Counts and timings only; never the characters typed.
  function Telemetry() {
    const t = { intervals: [], lastKey: 0, typed: 0, deleted: 0, pasted: 0, untrusted: 0, pastes: 0, focusLosses: 0,
                activeMs: 0, lastActive: performance.now(), focused: document.hasFocus() };
    const IDLE_MS = 60000;
    const tick = () => {
      const now = performance.now();
      if (t.focused && !document.hidden) t.activeMs += Math.min(now - t.lastActive, IDLE_MS);
      t.lastActive = now;
    };
    ["keydown", "pointerdown", "scroll", "pointermove"].forEach((e) =>
      document.addEventListener(e, tick, { passive: true, capture: true }));
    window.addEventListener("blur", () => { tick(); t.focused = false; t.focusLosses += 1; });
    window.addEventListener("focus", () => { t.focused = true; t.lastActive = performance.now(); });
    document.addEventListener("visibilitychange", () => { tick(); });

    t.watch = (el) => {
      if (!el) return;
      el.addEventListener("keydown", (ev) => {
        if (ev.key.length !== 1 && ev.key !== "Backspace" && ev.key !== "Delete" && ev.key !== "Enter") return;
        const now = performance.now();
        if (t.lastKey && now - t.lastKey < 5000) t.intervals.push(now - t.lastKey);
        t.lastKey = now;
      });
      el.addEventListener("beforeinput", (ev) => {
        const type = ev.inputType || "";
        if (type === "insertFromPaste" || type === "insertFromDrop") return; // counted by paste
        if (type.startsWith("insert")) t.typed += (ev.data || "\n").length;
        else if (type.startsWith("delete")) {
          const sel = el.selectionEnd - el.selectionStart;
          t.deleted += sel > 0 ? sel : 1;
        }
      });
      el.addEventListener("paste", (ev) => {
        const text = (ev.clipboardData && ev.clipboardData.getData("text")) || "";
        t.pasted += text.length;
        t.pastes += 1;
        // a quote of the task itself (the prompt, an answer) is a trusted paste; anything not on
        // the page came from outside (issue 28: only an untrusted paste of the answer's size is
        // strong evidence). Only the count leaves the browser.
        const main = document.querySelector("main") || document.body;
        const onPage = text.trim() !== "" && (main.innerText || "").includes(text.trim());
        if (!onPage) t.untrusted += text.length;
      });
    };
    t.summary = () => {
      tick();
      const out = { pasted_chars: t.pasted, paste_count: t.pastes, typed_chars: t.typed,
                    active_ms: Math.round(t.activeMs), focus_losses: t.focusLosses,
                    untrusted_paste_chars: t.untrusted };
      if (t.intervals.length >= 2) {
        const n = t.intervals.length;
        const mean = t.intervals.reduce((a, b) => a + b, 0) / n;
        const sd = Math.sqrt(t.intervals.reduce((a, b) => a + (b - mean) * (b - mean), 0) / (n - 1));
        if (mean > 0) out.iki_cv = Math.round((sd / mean) * 10000) / 10000;
      }
      if (t.typed > 0) out.revision_ratio = Math.round((t.deleted / t.typed) * 10000) / 10000;
      return out;
    };
    return t;
  }

  /* ---------------------------------------------------------------- kind widgets */

  const widgets = {
    pairwise: {
      init(root, initial) {
        const radios = $$('input[name="pairwise"]', root);
        if (initial && initial.winner) {
          const r = radios.find((x) => x.dataset.winner === initial.winner && +x.dataset.strength === initial.strength);
          if (r) r.checked = true;
        }
        return (ev) => {
          if (/^[1-7]$/.test(ev.key)) {
            const r = radios[+ev.key - 1];
            r.checked = true;
            r.focus();
            return true;
          }
          return false;
        };
      },
      read(root, task) {
        const r = $('input[name="pairwise"]:checked', root);
        if (!r) return { error: "choose a point on the scale (keys 1–7)" };
        return { body: { kind: "pairwise", shown_order: task.shown_order, winner: r.dataset.winner,
                         strength: +r.dataset.strength } };
      },
    },

    ranking: {
      init(root, initial) {
        const list = $("#ranking", root);
        const live = $("#ranking-live", root);
        const items = () => $$(".rank-item", list);
        const refresh = () => {
          let rank = 0;
          items().forEach((li, i) => {
            if (i === 0) li.dataset.tied = "0";
            if (li.dataset.tied !== "1") rank += 1;
            $(".rank-pos", li).textContent = "#" + rank;
            $(".tie-mark", li).hidden = li.dataset.tied !== "1";
            li.classList.toggle("tied", li.dataset.tied === "1");
          });
        };
        const announce = (li, what) => {
          const pos = items().indexOf(li) + 1;
          live.textContent = li.getAttribute("aria-label") + " " + what + ", now at position " + pos;
        };
        const move = (li, dir) => {
          if (dir < 0 && li.previousElementSibling) list.insertBefore(li, li.previousElementSibling);
          else if (dir > 0 && li.nextElementSibling) list.insertBefore(li.nextElementSibling, li);
          li.dataset.tied = "0";
          refresh();
          li.focus();
          announce(li, "moved");
        };
        if (initial && initial.order) {
          initial.order.forEach((group) => group.forEach((cid, j) => {
            const li = items().find((x) => x.dataset.candidate === cid);
            if (li) { list.appendChild(li); li.dataset.tied = j > 0 ? "1" : "0"; }
          }));
        }
        list.addEventListener("keydown", (ev) => {
          const li = ev.target.closest(".rank-item");
          if (!li || ev.target !== li) return;
          if (ev.altKey && ev.key === "ArrowUp") { ev.preventDefault(); move(li, -1); }
          else if (ev.altKey && ev.key === "ArrowDown") { ev.preventDefault(); move(li, 1); }
          else if (!ev.altKey && ev.key === "ArrowUp" && li.previousElementSibling) { ev.preventDefault(); li.previousElementSibling.focus(); }
          else if (!ev.altKey && ev.key === "ArrowDown" && li.nextElementSibling) { ev.preventDefault(); li.nextElementSibling.focus(); }
          else if (ev.key === "t" && li.previousElementSibling) { ev.preventDefault(); li.dataset.tied = "1"; refresh(); announce(li, "tied with the answer above"); }
          else if (ev.key === "u") { ev.preventDefault(); li.dataset.tied = "0"; refresh(); announce(li, "untied"); }
          else return;
          ev.stopPropagation();
        });
        list.addEventListener("click", (ev) => {
          const b = ev.target.closest("button[data-move]");
          if (!b) return;
          const li = b.closest(".rank-item");
          if (b.dataset.move === "up") move(li, -1);
          else if (b.dataset.move === "down") move(li, 1);
          else if (li.previousElementSibling) { li.dataset.tied = li.dataset.tied === "1" ? "0" : "1"; refresh(); }
        });
        let dragged = null;
        list.addEventListener("dragstart", (ev) => {
          dragged = ev.target.closest(".rank-item");
          if (!dragged) return;
          dragged.classList.add("dragging");
          ev.dataTransfer.effectAllowed = "move";
          ev.dataTransfer.setData("text/plain", dragged.dataset.candidate);
        });
        list.addEventListener("dragend", () => { if (dragged) dragged.classList.remove("dragging"); dragged = null; refresh(); });
        list.addEventListener("dragover", (ev) => {
          if (!dragged) return;
          ev.preventDefault();
          const over = ev.target.closest(".rank-item");
          if (!over || over === dragged) return;
          const box = over.getBoundingClientRect();
          const after = ev.clientY > box.top + box.height / 2;
          list.insertBefore(dragged, after ? over.nextElementSibling : over);
          dragged.dataset.tied = "0";
        });
        list.addEventListener("drop", (ev) => { ev.preventDefault(); refresh(); });
        refresh();
        list.dataset.touched = "0";
        return null;
      },
      read(root) {
        const order = [];
        $$(".rank-item", root).forEach((li, i) => {
          if (i > 0 && li.dataset.tied === "1") order[order.length - 1].push(li.dataset.candidate);
          else order.push([li.dataset.candidate]);
        });
        return { body: { kind: "ranking", order } };
      },
    },

    rubric: {
      init(root, initial) {
        // a stored answer (revise, edit): its score per dimension
        Object.entries((initial && initial.scores) || {}).forEach(([dim, v]) => {
          const tr = $('tr[data-dimension="' + CSS.escape(dim) + '"]', root);
          if (!tr) return;
          const num = $('input[type="number"]', tr);
          if (num) { num.value = v; return; }
          const r = $$("input", tr).find((x) => +x.value === +v);
          if (r) r.checked = true;
        });
        return null;
      },
      read(root) {
        const scores = {};
        const missing = [];
        $$("tr[data-dimension]", root).forEach((tr) => {
          const dim = tr.dataset.dimension;
          const num = $('input[type="number"]', tr);
          if (num) {
            if (num.value === "") missing.push(dim); else scores[dim] = +num.value;
          } else {
            const r = $("input:checked", tr);
            if (!r) missing.push(dim); else scores[dim] = +r.value;
          }
        });
        if (missing.length) return { error: "score every dimension: " + missing.join(", ") + " missing" };
        const vetoes = $$('input[name="veto"]:checked', root).map((c) => c.value);
        const cand = $(".answer[data-candidate]", root).dataset.candidate;
        return { body: { kind: "rubric", candidate_id: cand, scores, vetoes_failed: vetoes } };
      },
    },

    unary: {
      init(root, initial) {
        if (initial && typeof initial.label === "boolean") {
          $('input[name="thumb"][value="' + (initial.label ? "up" : "down") + '"]', root).checked = true;
        }
        return (ev) => {
          const v = ev.key === "+" || ev.key === "=" ? "up" : ev.key === "-" ? "down" : null;
          if (!v) return false;
          const r = $('input[name="thumb"][value="' + v + '"]', root);
          r.checked = true;
          r.focus();
          return true;
        };
      },
      read(root) {
        const r = $('input[name="thumb"]:checked', root);
        if (!r) return { error: "thumbs up or down (keys + and −)" };
        return { body: { kind: "unary", candidate_id: $(".answer[data-candidate]", root).dataset.candidate,
                         label: r.value === "up" } };
      },
    },

    steps: {
      init(root, initial) {
        const steps = $$(".step", root);
        const set = (li, v) => { const r = $('input[value="' + v + '"]', li); r.checked = true; update(); };
        const update = () => {
          const err = steps.findIndex((li) => { const r = $("input:checked", li); return r && r.value === "-1"; });
          steps.forEach((li, i) => {
            const after = err >= 0 && i > err;
            li.classList.toggle("after-error", after);
            $$("input", li).forEach((x) => { x.disabled = after; if (after) x.checked = false; });
          });
        };
        const firstError = (li) => {
          const idx = steps.indexOf(li);
          steps.forEach((s, i) => {
            if (i < idx && !$("input:checked", s)) $('input[value="1"]', s).checked = true;
          });
          $$("input", li).forEach((x) => { x.disabled = false; });
          set(li, "-1");
        };
        root.addEventListener("change", update);
        root.addEventListener("click", (ev) => {
          const b = ev.target.closest('[data-action="first-error"]');
          if (b) firstError(b.closest(".step"));
        });
        root.addEventListener("keydown", (ev) => {
          const li = ev.target.closest(".step");
          if (!li || ev.ctrlKey || ev.metaKey || ev.altKey) return;
          const i = steps.indexOf(li);
          if (ev.key === "j" || ev.key === "ArrowDown") { if (steps[i + 1]) steps[i + 1].focus(); }
          else if (ev.key === "k" || ev.key === "ArrowUp") { if (steps[i - 1]) steps[i - 1].focus(); }
          else if (ev.key === "+" || ev.key === "=" || ev.key === "1") { if (!li.classList.contains("after-error")) { set(li, "1"); if (steps[i + 1]) steps[i + 1].focus(); } }
          else if (ev.key === "0") { if (!li.classList.contains("after-error")) { set(li, "0"); if (steps[i + 1]) steps[i + 1].focus(); } }
          else if (ev.key === "-") { set(li, "-1"); }
          else if (ev.key === "e") { firstError(li); }
          else return;
          ev.preventDefault();
          ev.stopPropagation();
        });
        // a stored answer (revise, edit): its verdicts, step by step
        if (initial && Array.isArray(initial.verdicts)) {
          initial.verdicts.forEach((v, i) => { if (steps[i]) set(steps[i], String(v)); });
        }
        return null;
      },
      read(root) {
        const steps = $$(".step", root);
        const texts = steps.map((li) => li.dataset.text);
        const verdicts = [];
        for (const li of steps) {
          const r = $("input:checked", li);
          if (!r) break;
          verdicts.push(+r.value);
          if (r.value === "-1") break;
        }
        if (verdicts.length === 0 || (verdicts[verdicts.length - 1] !== -1 && verdicts.length < steps.length)) {
          return { error: "label every step up to the first error" };
        }
        return { body: { kind: "steps", candidate_id: $("#steps", root).dataset.candidate, steps: texts, verdicts } };
      },
    },

    demonstration: {
      init(root, initial, telemetry) {
        const ed = $("#demo-text", root);
        if (initial && initial.text) ed.value = initial.text;
        telemetry.watch(ed);
        // Preview through the server's own sanitising renderer (the HTML every page shows).
        const preview = $("#demo-preview", root);
        let timer = null, asked = 0;
        const render = async () => {
          const mine = ++asked;
          const r = await api("POST", "/api/v1/markdown/preview", { text: ed.value });
          if (r.ok && mine === asked) preview.innerHTML = r.data.html;
        };
        if (preview) {
          ed.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(render, 250); });
          if (ed.value) render();
        }
        return null;
      },
      read(root) {
        const text = $("#demo-text", root).value;
        if (!text.trim()) return { error: "write the expert answer" };
        return { body: { kind: "demonstration", text } };
      },
    },
  };

  /* ---------------------------------------------------------------- the label page */

  /* What the rater called an answer on screen: A/B side by side, else its shown number. */
  function shownName(task, candidateId) {
    const i = task.shown_order.indexOf(candidateId);
    if (i < 0) return candidateId;
    return task.shown_order.length === 2 ? (i === 0 ? "A" : "B") : String(i + 1);
  }

  function describeExpected(expected, task) {
    if (!expected) return "";
    if (expected.kind === "pairwise") {
      if (expected.winner === "tie") return "Tie.";
      const chosen = expected.winner === "a" ? expected.shown_order[0] : expected.shown_order[1];
      const shown = shownName(task, chosen);
      const side = task.shown_order.indexOf(chosen) === 0 ? "the first one you saw" : "the second one you saw";
      const words = { 1: "slightly better", 2: "better", 3: "much better" }[expected.strength] || "better";
      return "Answer " + shown + " " + words + " (" + side + ").";
    }
    if (expected.kind === "unary") return expected.label ? "Thumbs up." : "Thumbs down.";
    if (expected.kind === "ranking") {
      return "Ranking: " + expected.order.map((g) => g.map((c) => "answer " + (task.shown_order.indexOf(c) + 1)).join(" = ")).join(" > ");
    }
    if (expected.kind === "steps") return "Step verdicts: " + expected.verdicts.join(", ");
    if (expected.kind === "rubric") return "Scores: " + Object.entries(expected.scores).map(([k, v]) => k + " " + v).join(", ");
    return JSON.stringify(expected);
  }

  /* The label page's address, keeping the kind the rater chose (?kind=) from item to item. */
  function labelUrl(project, chosenKind, extra) {
    const q = new URLSearchParams();
    if (chosenKind) q.set("kind", chosenKind);
    if (extra) q.set(extra, "1");
    const qs = q.toString();
    return "/p/" + project + "/label" + (qs ? "?" + qs : "");
  }

  function initNoKind() {
    const box = $("#no-kind");
    if (!box) return;
    const project = box.dataset.project;
    const release = async () => {
      const r = await api("POST", "/api/v1/projects/" + project + "/assignments/" + box.dataset.assignment + "/release");
      // back to the project, not straight to the next task: the same item could come again
      if (r.ok) location.replace("/p/" + project);
      else toast(problemText(r.data));
    };
    const btn = $('[data-action="release"]', box);
    btn.addEventListener("click", release);
    btn.focus();
  }

  function initLabel() {
    const app = $("#label-app");
    if (!app) { initNoKind(); return initNoTask(); }
    const task = JSON.parse($("#task-data").textContent);
    const kind = app.dataset.kind;
    const root = $(".widget", app);
    const telemetry = Telemetry();
    const rationale = $("#rationale");
    telemetry.watch(rationale);
    const count = $("#rationale-count");
    const minChars = +app.dataset.minRationale || 0;
    const updateCount = () => { count.textContent = rationale.value.length + (minChars ? " / " + minChars : ""); };
    rationale.addEventListener("input", updateCount);
    updateCount();
    const w = widgets[kind] || (window.preflabWidgets || {})[kind];  // criteria.js and the like
    const onKey = w.init(root, task.initial, telemetry);
    const idem = uuid();
    let busy = false, done = false;
    const mode = app.dataset.mode;
    const project = app.dataset.project;
    const err = $("#submit-error");

    async function nextTask() {
      const r = await api("POST", "/api/v1/projects/" + project + "/assignments/next");
      const chosen = app.dataset.chosenKind;
      if (r.ok && r.data.task) location.replace(labelUrl(project, chosen));
      else if (r.ok && r.data.reason === "not_qualified") location.replace("/p/" + project + "/qualification");
      else location.replace(labelUrl(project, chosen, "done"));
    }

    async function submit() {
      if (busy || done) return;
      const got = w.read(root, task);
      if (got.error) { showError(err, got.error); return; }
      const text = rationale.value;
      if (minChars && text.trim().length < minChars) {
        showError(err, "the rationale needs at least " + minChars + " characters");
        rationale.focus();
        return;
      }
      const body = Object.assign({}, got.body, text.trim() ? { rationale: text } : {});
      if (window.preflabSpans) {  // critique spans (static/spans.js), on the label page when the project takes them
        const spans = window.preflabSpans.list();
        if (spans.length) body.spans = spans;
      }
      busy = true;
      let r;
      if (mode === "revise" || mode === "edit") {  // a new revision of a stored judgment
        r = await api("POST", "/api/v1/projects/" + project + "/judgments/" + app.dataset.judgmentId + "/" + mode,
          { judgment: body, telemetry: telemetry.summary(), idempotency_key: idem });
      } else {
        r = await api("POST", "/api/v1/projects/" + project + "/judgments",
          { assignment_id: app.dataset.assignment, judgment: body, telemetry: telemetry.summary(), idempotency_key: idem });
      }
      busy = false;
      if (!r.ok) { showError(err, problemText(r.data)); return; }
      done = true;
      showError(err, "");
      if (mode === "revise" || mode === "edit") { location.href = "/p/" + project; return; }
      if (r.data.gold) {
        const fb = $("#feedback");
        const g = r.data.gold;
        $("#feedback-title").textContent = g.correct ? "Correct" : "Not what we expected";
        fb.classList.toggle("correct", !!g.correct);
        fb.classList.toggle("wrong", !g.correct);
        const body = $("#feedback-body");
        body.textContent = "";
        const p1 = document.createElement("p");
        p1.textContent = "Expected: " + describeExpected(g.expected, task);
        body.appendChild(p1);
        if (g.explanation) {
          const p2 = document.createElement("p");
          p2.textContent = "Why: " + g.explanation;
          body.appendChild(p2);
          // The author numbered the answers in the item's own order; the rater saw them shuffled.
          const order = g.item_order || [];
          if (order.length > 1) {
            const legend = document.createElement("p");
            legend.className = "muted order-legend";
            legend.textContent = "In this explanation, response 1, 2 … count in the item's own order: " +
              order.map((c, i) => "response " + (i + 1) + " is the answer you saw as " + shownName(task, c)).join("; ") + ".";
            body.appendChild(legend);
          }
        }
        if (g.expected && g.expected.kind === "pairwise" && g.expected.winner !== "tie") {
          const chosen = g.expected.winner === "a" ? g.expected.shown_order[0] : g.expected.shown_order[1];
          const el = $('.answer[data-candidate="' + CSS.escape(chosen) + '"]', app);
          if (el) el.classList.add("expected-answer");
        }
        const q = r.data.qualification || {};
        const p3 = document.createElement("p");
        p3.className = "muted";
        p3.textContent = "Qualification: " + q.correct + " of " + q.answered + " correct so far.";
        body.appendChild(p3);
        fb.hidden = false;
        fb.dataset.status = q.status || "qualifying";
        fb.focus();
        return;
      }
      await nextTask();
    }

    const skipDialog = $("#skip-dialog");
    const openSkip = () => { if (skipDialog && !skipDialog.open) skipDialog.showModal(); };
    if (skipDialog) {
      $('[data-action="skip"]', app).addEventListener("click", openSkip);
      $('[data-action="close-skip"]', skipDialog).addEventListener("click", () => skipDialog.close());
      $("#skip-form").addEventListener("submit", async (ev) => {
        ev.preventDefault();
        const f = ev.target;
        const reason = ($('input[name="reason"]:checked', f) || {}).value;
        const r = await api("POST", "/api/v1/projects/" + project + "/assignments/" + encodeURIComponent(app.dataset.assignment) + "/skip",
          { reason, note: f.note.value });
        if (!r.ok) { showError($(".error", f), problemText(r.data)); return; }
        done = true;
        skipDialog.close();
        toast(r.data.flag ? "Flagged for the reviewers; here is another item" : "Skipped");
        await nextTask();
      });
    }
    $('[data-action="submit"]', app).addEventListener("click", submit);
    $('[data-action="next"]', app).addEventListener("click", () => {
      const st = $("#feedback").dataset.status;
      if (st === "qualified" || st === "failed") location.href = "/p/" + project + "/qualification";
      else nextTask();
    });
    document.addEventListener("keydown", (ev) => {
      if ((ev.ctrlKey || ev.metaKey) && ev.key === "Enter") { ev.preventDefault(); submit(); return; }
      const fb = $("#feedback");
      if (!fb.hidden && ev.key === "Enter") { ev.preventDefault(); $('[data-action="next"]', app).click(); return; }
      if (ev.ctrlKey || ev.metaKey || ev.altKey || typing(ev.target) || ($("#help") || {}).open) return;
      if (ev.key === "r") { ev.preventDefault(); rationale.focus(); return; }
      if (ev.key === "s" && skipDialog && !done) { ev.preventDefault(); openSkip(); return; }
      if (onKey && onKey(ev)) ev.preventDefault();
    });
  }

  function initNoTask() {
    const box = $("#no-task");
    if (!box) return;
    const project = box.dataset.project;
    const msg = $("#no-task-message");
    const get = async () => {
      const r = await api("POST", "/api/v1/projects/" + project + "/assignments/next");
      if (r.ok && r.data.task) { location.replace(labelUrl(project, box.dataset.chosenKind)); return; }
      if (r.ok && r.data.reason === "not_qualified") { location.replace("/p/" + project + "/qualification"); return; }
      const text = r.ok ? (r.data.detail || "No task right now.") : problemText(r.data);
      msg.textContent = "";
      const at = text.indexOf("Account page");  // the server's words: a link, built as nodes
      if (at < 0) { msg.textContent = text; return; }
      const a = document.createElement("a");
      a.href = "/account";
      a.textContent = "Account page";
      msg.append(text.slice(0, at), a, text.slice(at + "Account page".length));
    };
    $('[data-action="get-task"]', box).addEventListener("click", get);
    if (!/[?&]done=1/.test(location.search) && /[?&]auto=1/.test(location.search)) get();
  }

  /* ---------------------------------------------------------------- reviewer pages */

  function initReview() {
    const queue = $("section#telemetry[data-project]");
    if (queue) bindTelemetryReview(queue.dataset.project, queue);
    const page = $("#review-item");
    if (!page) return;
    const project = page.dataset.project;
    const item = page.dataset.item;
    const root = $(".widget", page);
    const task = JSON.parse($("#task-data").textContent);
    const w = root ? widgets[root.dataset.widget] : null;
    if (w) {
      const onKey = w.init(root, null, Telemetry());
      document.addEventListener("keydown", (ev) => {
        if (ev.ctrlKey || ev.metaKey || ev.altKey || typing(ev.target) || ($("#help") || {}).open) return;
        if (onKey && onKey(ev)) ev.preventDefault();
      });
    }
    const nextUrl = page.dataset.next ? "/p/" + project + "/review/item/" + encodeURIComponent(page.dataset.next) : null;
    document.addEventListener("keydown", (ev) => {
      if ((ev.ctrlKey || ev.metaKey) && ev.key === "Enter" && adj) { ev.preventDefault(); adj.click(); return; }
      if (ev.ctrlKey || ev.metaKey || ev.altKey || typing(ev.target)) return;
      if (ev.key === "n" && nextUrl) { ev.preventDefault(); location.href = nextUrl; }
      else if (ev.key === "q") { ev.preventDefault(); location.href = "/p/" + project + "/review"; }
    });
    const idem = uuid();
    const adj = $('[data-action="adjudicate"]', page);
    if (adj) adj.addEventListener("click", async () => {
      const got = w.read(root, task);
      const err = $("#adjudicate-error");
      if (got.error) { showError(err, got.error); return; }
      const note = $("#adjudicate-note").value;
      if (!note.trim()) { showError(err, "write a note explaining the final label"); $("#adjudicate-note").focus(); return; }
      const r = await api("POST", "/api/v1/projects/" + project + "/items/" + encodeURIComponent(item) + "/adjudicate",
        { judgment: got.body, note, idempotency_key: idem });
      if (!r.ok) { showError(err, problemText(r.data)); return; }
      toast("Final label recorded");
      if (nextUrl) location.href = nextUrl; else location.reload();
    });
    $$("form.send-back", page).forEach((f) => f.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const r = await api("POST", "/api/v1/projects/" + project + "/judgments/" + f.dataset.judgment + "/send-back",
        { note: f.note.value });
      if (r.ok) { toast("Sent back to the rater"); location.reload(); } else showError($(".error", f), problemText(r.data));
    }));
    bindTelemetryReview(project, page);
    $$("form.demo-review", page).forEach((f) => f.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const decision = ev.submitter ? ev.submitter.value : "accepted";
      if (decision === "rejected" && !f.note.value.trim()) { showError($(".error", f), "write a note saying why you reject it"); f.note.focus(); return; }
      const r = await api("POST", "/api/v1/projects/" + project + "/demonstrations/" + f.dataset.judgment + "/review",
        { decision, note: f.note.value });
      if (r.ok) { toast("Demonstration " + decision); location.reload(); } else showError($(".error", f), problemText(r.data));
    }));
  }

  // keep / exclude a label its telemetry flagged (issue 28): the item page and the review page
  function bindTelemetryReview(project, root) {
    $$("form.telemetry-review", root).forEach((f) => f.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const decision = ev.submitter ? ev.submitter.value : "keep";
      const note = f.decision_note;
      if (decision === "exclude" && !note.value.trim()) { showError($(".error", f), "write a note saying why you exclude it"); note.focus(); return; }
      const r = await api("POST", "/api/v1/projects/" + project + "/judgments/" + f.dataset.judgment + "/telemetry-review",
        { decision, note: note.value });
      if (r.ok) { toast(decision === "keep" ? "Label kept" : "Label excluded"); location.reload(); } else showError($(".error", f), problemText(r.data));
    }));
  }

  /* ---------------------------------------------------------------- admin pages */

  function formJSON(form) {
    const out = {};
    $$("[name]", form).forEach((el) => {
      if (el.type === "checkbox") { if (el.dataset.list) { (out[el.name] = out[el.name] || []); if (el.checked) out[el.name].push(el.value); } else out[el.name] = el.checked; }
      else if (el.type === "radio") { if (el.checked) out[el.name] = el.value; }
      else if (el.value !== "" || el.dataset.keepEmpty) out[el.name] = el.dataset.type === "number" ? +el.value : el.dataset.type === "json" ? JSON.parse(el.value) : el.dataset.type === "list" ? el.value.split(",").map((x) => x.trim()).filter(Boolean) : el.value;
    });
    // "policy.overlap_k" -> {policy: {overlap_k: ...}} (the settings form sends only its fields; the server merges)
    Object.keys(out).filter((k) => k.includes(".")).forEach((k) => {
      const [head, tail] = [k.slice(0, k.indexOf(".")), k.slice(k.indexOf(".") + 1)];
      out[head] = Object.assign(out[head] || {}, { [tail]: out[k] });
      delete out[k];
    });
    return out;
  }

  function initAdmin() {
    // <form data-api="METHOD url" data-result="#sel" data-reload>
    $$("form[data-api]").forEach((form) => form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const [method, url] = form.dataset.api.split(" ");
      let body;
      try { body = formJSON(form); } catch (e) { showError($(".error", form), "invalid JSON: " + e.message); return; }
      const target = url.replace(/\{(\w+)\}/g, (_, k) => encodeURIComponent(body[k] || ""));
      if (form.dataset.drop) form.dataset.drop.split(",").forEach((k) => delete body[k]);
      const r = await api(method, target, body);
      const res = form.dataset.result ? $(form.dataset.result) : null;
      if (!r.ok) { showError($(".error", form), problemText(r.data)); return; }
      showError($(".error", form), "");
      if (res) {
        res.hidden = false;
        res.textContent = form.dataset.show ? form.dataset.show.split(",").map((k) => k + ": " + (r.data[k] === undefined ? "" : (k === "path" ? location.origin + r.data[k].replace("/api/v1/invites/", "/invite/").replace(/\/accept$/, "") : r.data[k]))).join("\n") : JSON.stringify(r.data, null, 2);
      }
      if (form.dataset.done) {  // <form data-done="#sel">: the form gives way to a message
        form.hidden = true;
        $(form.dataset.done).hidden = false;
        return;
      }
      if (form.dataset.row) addRow($(form.dataset.row), form.dataset.rowCells.split(","), r.data);
      if (form.dataset.reload !== undefined) location.reload();
      else toast("Saved");
    }));

    // <form data-row="#table tbody" data-row-cells="username,is_admin">: the new record joins
    // the table at once (a reload would lose a one-time password shown in the result)
    function addRow(tbody, cells, data) {
      if (!tbody) return;
      const tr = document.createElement("tr");
      cells.forEach((k) => {
        const td = document.createElement("td");
        const v = data[k];
        td.textContent = v === true ? "yes" : (v === false || v === undefined || v === null ? "" : String(v));
        tr.appendChild(td);
      });
      tbody.appendChild(tr);
    }

    $$("button[data-post]").forEach((b) => b.addEventListener("click", async () => {
      const [method, url] = b.dataset.post.split(" ");
      const body = b.dataset.body ? JSON.parse(b.dataset.body) : (b.dataset.note ? { note: prompt(b.dataset.note) || "" } : undefined);
      const r = await api(method, url, body);
      if (r.ok) location.reload(); else toast(problemText(r.data));
    }));

    // file uploads: <form data-upload="url?filename=" data-result="#sel">
    $$("form[data-upload]").forEach((form) => form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const file = $('input[type="file"]', form).files[0];
      const out = $(form.dataset.result);
      if (!file) { showError($(".error", form), "choose a file"); return; }
      const r = await api("POST", form.dataset.upload + encodeURIComponent(file.name), undefined, await file.arrayBuffer());
      renderUpload(out, r, form.dataset.reload !== undefined);
    }));

    // the export form: static/export-jobs.js (an export runs as a background job)
  }

  function renderUpload(out, r, reload) {
    out.hidden = false;
    out.textContent = "";
    const d = r.data || {};
    const h = document.createElement("h3");
    if (r.ok && d.ok !== false) {
      h.textContent = "Imported";
      out.className = "card upload-result ok";
      out.appendChild(h);
      const p = document.createElement("p");
      p.textContent = d.id ? ("Rubric " + d.id + " version " + d.version) :
        ("Items added: " + d.items_added + " · already there: " + d.items_existing + " · added to the task pool: " + d.pooled +
         (d.already_imported ? " · this file was imported before" : ""));
      out.appendChild(p);
      (d.notes || []).forEach((line) => {  // e.g. how many labelers were classified as AI, and why
        const n = document.createElement("p");
        n.className = "import-note";
        n.textContent = line;
        out.appendChild(n);
      });
      if (reload && !(d.notes || []).length) setTimeout(() => location.reload(), 600);
      return;
    }
    out.className = "card upload-result fail";
    h.textContent = d.problems ? ("Nothing was imported: " + d.total + " problem" + (d.total === 1 ? "" : "s")) : "Upload refused";
    out.appendChild(h);
    if (d.problems) {
      const ol = document.createElement("ol");
      ol.className = "problems";
      d.problems.forEach((p) => {
        const li = document.createElement("li");
        const loc = document.createElement("code");
        loc.textContent = p.file + (p.line ? ":" + p.line : "");
        li.appendChild(loc);
        li.appendChild(document.createTextNode(" " + p.field + ": " + p.reason));
        ol.appendChild(li);
      });
      out.appendChild(ol);
    } else {
      const p = document.createElement("p");
      p.textContent = problemText(d);
      out.appendChild(p);
    }
  }

  // shared with the page scripts loaded after this one (static/export-jobs.js)
  window.preflab = { api, problemText, toast };

  document.addEventListener("DOMContentLoaded", () => {
    const auto = $("[autofocus]");
    if (auto && document.activeElement !== auto) auto.focus();
    initCommon();
    initLabel();
    initReview();
    initAdmin();
  });
})();
