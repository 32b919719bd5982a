/* Critique spans on the label page (docs/critiques.md). Each answer's text is rendered by the
   server with every text run in <span data-o="N">, N the run's offset in the answer's raw text
   in code points; a selection maps back to [start, end) by counting code points inside the run
   (JavaScript strings are UTF-16: an emoji is two units but one code point). A selection edge
   outside any run (a list marker, an entity the server could not place) moves inward to the
   nearest run, so an offset is never guessed. app.js sends list() as the judgment's spans. */
(() => {
  "use strict";
  const panel = document.getElementById("spans");
  if (!panel) return;
  const sources = Array.from(document.querySelectorAll(".span-source"));
  const category = document.getElementById("span-category");
  const note = document.getElementById("span-note");
  const status = document.getElementById("span-selection");
  const list = document.getElementById("span-list");
  const spans = [];
  let pending = null;

  const cpLen = (s) => Array.from(s).length;  // code points, not UTF-16 units
  const runsOf = (src) => Array.from(src.querySelectorAll("[data-o]"));
  const runEnd = (r) => +r.dataset.o + cpLen(r.textContent);

  /* The raw offset of a selection edge (node, offset) in the answer src: inside a run exact;
     otherwise the start of the next run (a start) or the end of the previous one (an end). */
  function edge(src, node, offset, isStart) {
    let prevEnd = null;
    for (const r of runsOf(src)) {
      const range = document.createRange();
      range.selectNodeContents(r);
      const where = range.comparePoint(node, offset);
      if (where === 0) {
        const at = node.nodeType === Node.TEXT_NODE && r.contains(node)
          ? +r.dataset.o + cpLen(node.data.slice(0, offset))
          : (offset === 0 ? +r.dataset.o : runEnd(r));
        // a caret between two runs: a start belongs to the next run, an end to the previous one
        if (isStart && at === runEnd(r)) { prevEnd = at; continue; }
        if (!isStart && at === +r.dataset.o && prevEnd !== null) return prevEnd;
        return at;
      }
      if (where < 0) return isStart ? +r.dataset.o : prevEnd;
      prevEnd = runEnd(r);
    }
    return isStart ? null : prevEnd;
  }

  function readSelection() {
    const sel = window.getSelection();
    if (!sel || sel.rangeCount === 0 || sel.isCollapsed) return null;
    const range = sel.getRangeAt(0);
    const src = sources.find((s) => s.contains(range.commonAncestorContainer));
    if (!src) return null;
    const start = edge(src, range.startContainer, range.startOffset, true);
    const end = edge(src, range.endContainer, range.endOffset, false);
    if (start === null || end === null || end <= start) return null;
    return { candidate_id: src.dataset.spanCandidate, start, end, quote: sel.toString() };
  }

  document.addEventListener("selectionchange", () => {
    const got = readSelection();
    if (got) {
      pending = got;
      status.textContent = "Selected in answer " + answerName(got.candidate_id) + ": “" + got.quote + "” (press m or Mark selection)";
    }
  });

  function answerName(cid) {
    const art = document.querySelector('.answer[data-candidate="' + CSS.escape(cid) + '"]');
    const h = art && art.querySelector("h3");
    return h ? h.textContent.replace(/^Answer\s*/, "") || cid : cid;
  }

  function highlight() {
    for (const src of sources) {
      const mine = spans.filter((s) => s.candidate_id === src.dataset.spanCandidate);
      for (const r of runsOf(src)) {
        const lo = +r.dataset.o, hi = runEnd(r);
        r.classList.toggle("spanned", mine.some((s) => s.start < hi && lo < s.end));
      }
    }
  }

  function render() {
    list.textContent = "";
    spans.forEach((s, i) => {
      const li = document.createElement("li");
      li.dataset.start = s.start;
      li.dataset.end = s.end;
      li.dataset.candidate = s.candidate_id;
      const what = document.createElement("span");
      what.textContent = "Answer " + answerName(s.candidate_id) + " · " + s.category +
        (s.quote ? " · “" + s.quote + "”" : " · characters " + s.start + "–" + s.end) + (s.note ? " · " + s.note : "");
      const rm = document.createElement("button");
      rm.type = "button";
      rm.textContent = "Remove";
      rm.setAttribute("aria-label", "Remove span " + (i + 1) + " (" + s.category + ")");
      rm.addEventListener("click", () => {
        spans.splice(i, 1);
        render();
        status.textContent = "Span removed.";
        (list.querySelector("button") || category).focus();
      });
      li.append(what, " ", rm);
      list.appendChild(li);
    });
    highlight();
  }

  function mark() {
    const got = readSelection() || pending;
    if (!got) { status.textContent = "Select a stretch of an answer first."; return; }
    const span = { candidate_id: got.candidate_id, start: got.start, end: got.end,
                   category: category.value, note: note.value.trim(), quote: got.quote };
    if (spans.some((s) => s.candidate_id === span.candidate_id && s.start === span.start && s.end === span.end &&
                          s.category === span.category && s.note === span.note)) {
      status.textContent = "That span is already marked.";
      return;
    }
    spans.push(span);
    pending = null;
    note.value = "";
    const sel = window.getSelection();
    if (sel) sel.removeAllRanges();
    render();
    status.textContent = "Marked " + span.category + " on answer " + answerName(span.candidate_id) + ".";
  }

  panel.querySelector('[data-action="mark-span"]').addEventListener("click", mark);
  note.addEventListener("keydown", (ev) => { if (ev.key === "Enter") { ev.preventDefault(); mark(); } });

  /* Keyboard selection inside an answer's text: Shift+arrows extend, arrows move the caret
     (Ctrl: by word), Home/End to the line's ends; m marks the selection. */
  const DIRS = { ArrowRight: "forward", ArrowLeft: "backward", ArrowDown: "forward", ArrowUp: "backward" };
  for (const src of sources) {
    src.addEventListener("keydown", (ev) => {
      const dir = DIRS[ev.key];
      if (!dir || ev.altKey || ev.metaKey) return;
      const sel = window.getSelection();
      if (!sel) return;
      ev.preventDefault();
      ev.stopPropagation();
      if (sel.rangeCount === 0 || !src.contains(sel.anchorNode)) {
        const first = runsOf(src)[0];
        if (!first || !first.firstChild) return;
        sel.collapse(first.firstChild, 0);
      }
      const unit = ev.key === "ArrowUp" || ev.key === "ArrowDown" ? "line" : ev.ctrlKey ? "word" : "character";
      sel.modify(ev.shiftKey ? "extend" : "move", dir, unit);
    });
  }
  /* A ranking's answers are draggable: over an answer's text the pointer selects text instead
     (the answer is dragged by its bar). */
  for (const src of sources) {
    const drag = src.closest('[draggable="true"]');
    if (!drag) continue;
    src.addEventListener("pointerenter", () => { drag.draggable = false; });
    src.addEventListener("pointerleave", () => { drag.draggable = true; });
  }
  document.addEventListener("keydown", (ev) => {
    if (ev.key !== "m" || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const t = ev.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
    ev.preventDefault();
    mark();
  });

  const data = document.getElementById("task-data");
  const initial = data ? (JSON.parse(data.textContent).initial || {}) : {};
  for (const s of initial.spans || []) {
    spans.push({ candidate_id: s.candidate_id, start: s.start, end: s.end, category: s.category, note: s.note || "" });
  }
  render();

  window.preflabSpans = {
    list: () => spans.map((s) => ({ candidate_id: s.candidate_id, start: s.start, end: s.end,
                                    category: s.category, note: s.note })),
  };
})();
