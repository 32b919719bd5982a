/* The export page: the form starts an export job (POST .../export-jobs), the table follows every
   unfinished job (GET .../export-jobs/{id} each second): status, a progress bar, a cancel button,
   the files once done, the error in words. Loaded after app.js (window.preflab: api, problemText). */
"use strict";

(function () {
  const FINAL = ["done", "failed", "cancelled"];
  const POLL_MS = 1000;
  const $ = (sel, root) => (root || document).querySelector(sel);
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  };
  let current = null;  // the job this page started: its end is shown in #export-result

  function optionsOf(form) {
    const num = (input) => (input.value === "" ? null : +input.value);  // empty: the server's default
    const body = {
      format: form.format.value, aggregation: form.aggregation.value, min_raters: +form.min_raters.value,
      length_unit: form.length_unit.value, include_ai: form.include_ai.checked,
      include_gold: form.include_gold.checked, include_rater_ids: form.include_rater_ids.checked,
      provenance_columns: form.provenance_columns.checked,
      // the gate is on unless unticked (null turns it off; the server's default is on)
      length_gate: form.gate_on.checked ? [+form.gate_min.value, +form.gate_max.value] : null,
      file_format: form.file_format.value,
      conversational: form.conversational.value === "" ? null : form.conversational.value === "true",
      include_flagged: form.include_flagged.checked, force: form.force.checked,
      min_alpha: num(form.min_alpha), drop_disagreement: num(form.drop_disagreement),
      require_reference: form.require_reference.checked,
      data_source: form.data_source.value.trim() || null,
      kto_conflicts: form.kto_conflicts.value || null,
      split: form.split.value.trim() || "train",
    };
    if (body.force) body.force_reason = form.force_reason.value.trim();
    return body;
  }

  function filesList(job) {
    const ul = el("ul", "export-files");
    (job.files || []).forEach((f) => {
      const li = el("li");
      const a = el("a", "", f.name);
      a.href = f.url;
      a.setAttribute("download", "");
      li.appendChild(a);
      if (f.sha256) li.appendChild(el("code", "", " sha256 " + f.sha256.slice(0, 16) + "…"));
      ul.appendChild(li);
    });
    return ul;
  }

  function phaseText(job) {
    return job.phase + (job.total ? " " + (job.status === "done" ? job.total : job.done) + "/" + job.total : "");
  }

  function renderRow(job) {
    const table = $("#export-jobs tbody");
    let tr = $("#job-" + job.id);
    if (!tr) {
      tr = el("tr");
      tr.id = "job-" + job.id;
      table.insertBefore(tr, table.firstChild);
      const empty = $("#export-jobs .jobs-empty");
      if (empty) empty.hidden = true;
    }
    tr.dataset.job = job.id;
    tr.dataset.status = job.status;
    tr.textContent = "";
    tr.appendChild(el("td", "", String(job.id)));
    const fmt = el("td", "", job.options.format);
    if (job.options.force) fmt.appendChild(el("span", "job-forced", " forced: " + (job.options.force_reason || "")));
    tr.appendChild(fmt);
    tr.appendChild(el("td", "", (job.created_at || "").slice(0, 19) + (job.requested_by ? " by " + job.requested_by : "")));
    const status = el("td");
    status.appendChild(el("span", "job-status", job.status + (job.cancel_requested && !FINAL.includes(job.status) ? " (cancelling)" : "")));
    if (job.error) status.appendChild(el("p", "error job-error", job.error));
    tr.appendChild(status);
    const progress = el("td");
    const bar = el("progress", "job-progress");
    bar.max = job.total || 1;
    bar.value = job.status === "done" ? bar.max : job.done;
    bar.setAttribute("aria-label", "progress of export job " + job.id);
    progress.appendChild(bar);
    progress.appendChild(el("span", "job-phase muted", " " + phaseText(job)));
    tr.appendChild(progress);
    const files = el("td");
    files.appendChild(filesList(job));
    tr.appendChild(files);
    const actions = el("td");
    if (!FINAL.includes(job.status)) actions.appendChild(cancelButton(job.id));
    tr.appendChild(actions);
  }

  function cancelButton(id) {
    const b = el("button", "job-cancel", "Cancel");
    b.type = "button";
    b.dataset.job = id;
    b.setAttribute("aria-label", "Cancel job " + id);
    return b;
  }

  async function renderResult(job) {
    const out = $("#export-result");
    out.hidden = false;
    out.classList.toggle("error", job.status === "failed" || job.status === "cancelled");
    out.textContent = "";
    if (!FINAL.includes(job.status)) {
      out.appendChild(el("h3", "", "Export job " + job.id + ": " + job.status));
      const bar = el("progress");
      bar.max = job.total || 1;
      bar.value = job.done;
      bar.setAttribute("aria-label", "progress of export job " + job.id);
      out.appendChild(bar);
      out.appendChild(el("p", "muted", phaseText(job)));
      return;
    }
    if (job.status === "failed") { out.textContent = "Export failed: " + (job.error || "see the server's log"); return; }
    if (job.status === "cancelled") { out.textContent = "Export job " + job.id + " was cancelled; nothing was written."; return; }
    out.appendChild(el("h3", "", "Export job " + job.id + ": manifest"));
    (job.warnings || []).forEach((w) => {  // a 0-row or mostly-dropped export says so in words
      const p = el("p", "export-warning error", "Warning: " + w);
      p.setAttribute("role", "alert");
      out.appendChild(p);
    });
    if ((job.summary || []).length) {
      const ul = el("ul", "reasons export-summary");
      job.summary.forEach((line) => ul.appendChild(el("li", "", line)));
      out.appendChild(ul);
    }
    out.appendChild(filesList(job));
    const manifest = (job.files || []).find((f) => f.name === "manifest.json");
    if (manifest) {
      const resp = await fetch(manifest.url, { credentials: "same-origin" });
      if (resp.ok) out.appendChild(el("pre", "", JSON.stringify(await resp.json(), null, 2)));
    }
  }

  async function follow(url, id) {
    for (;;) {
      const r = await window.preflab.api("GET", url + "/" + id);
      if (!r.ok) { window.preflab.toast("export job " + id + ": " + window.preflab.problemText(r.data)); return; }
      renderRow(r.data);
      if (current === id) await renderResult(r.data);
      if (FINAL.includes(r.data.status)) {
        const empty = $("#past-exports-empty");  // issue 31: not "No exports yet" after one
        if (empty && r.data.status === "done") {
          empty.textContent = "Export job " + id + " finished: its files are listed in the jobs table above.";
        }
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
  }

  function init() {
    const form = $("#export-form");
    const jobs = $("#export-jobs");
    if (!form || !jobs || !window.preflab) return;
    const url = jobs.dataset.url;
    const why = $("#ex-force-why");
    const syncWhy = () => { why.hidden = !form.force.checked; form.force_reason.required = form.force.checked; };
    form.force.addEventListener("change", syncWhy);
    syncWhy();
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const out = $("#export-result");
      out.hidden = false;
      out.classList.remove("error");
      out.textContent = "Starting the export…";
      const r = await window.preflab.api("POST", form.dataset.url, optionsOf(form));
      if (!r.ok) { out.textContent = "Export failed: " + window.preflab.problemText(r.data); out.classList.add("error"); return; }
      current = r.data.id;
      renderRow(r.data);
      await renderResult(r.data);
      follow(url, r.data.id);
    });
    jobs.addEventListener("click", async (ev) => {
      const b = ev.target.closest("button.job-cancel");
      if (!b) return;
      b.disabled = true;
      const r = await window.preflab.api("POST", url + "/" + b.dataset.job + "/cancel");
      if (!r.ok) { window.preflab.toast(window.preflab.problemText(r.data)); b.disabled = false; return; }
      renderRow(r.data);
    });
    Array.from(jobs.querySelectorAll("tr[data-job]"))
      .filter((tr) => !FINAL.includes(tr.dataset.status))
      .forEach((tr) => follow(url, +tr.dataset.job));
  }

  document.addEventListener("DOMContentLoaded", init);
})();
