// #schedules[?edit=<job id>]: the member's scheduled prompts — what runs when, next and
// last, and pause, resume, edit and delete. The agent's tools reach the same jobs
// (schedule_prompt, list/change/delete_scheduled_prompt). Every time on the page is
// written one way (zoned), in one zone, named: the member's, else (none saved) a
// recurring job's own, else the browser's. A member in Berlin read a one-off in Berlin
// time beside recurring rows in UTC; a recurring job's own zone stays in its "when"
// column, as its schedule runs on that wall clock. A new prompt runs in the member's
// saved zone, else in UTC, as the assistant's do: never silently in the browser's (the
// page offers to save that one as theirs). A role without tools.schedule keeps its
// jobs listed (pause, resume, delete: what the API lets it do) but gets no form.
import { api } from "../lib/api.js";
import { may } from "../lib/capabilities.js";
import { el, link } from "../lib/dom.js";
import { t } from "../lib/i18n.js";
import {
  busy, button, clearFieldErrors, confirmDialog, errorText, field, formatDate, markField, notice, pageHeader, section, showFormError, statusLine,
} from "../lib/ui.js";

const browserZone = () => { try { return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC"; } catch { return "UTC"; } };
const zoneNames = () => { try { return Intl.supportedValuesOf("timeZone"); } catch { return []; } };
/** The zone a job's times are read in; `memberZone` is the member's setting (or null).
 * The server tells the assistant the same times in the same zone (schedules.service.summary). */
const jobZone = (job, memberZone) => memberZone || job.timezone || browserZone();
/** Where a new prompt runs when the member has saved no zone: the server's default
 * (skald_host.core.schedules.service.DEFAULT_TIMEZONE), the assistant's too. */
const DEFAULT_ZONE = "UTC";
/** Whether the member's role may create and change scheduled prompts (as of sign-in). */
const mayChange = (ctx) => may(ctx.session, "tools.schedule");

/** A time in `zone`, with the zone's short name ("Tue, 6/2/2026, 08:30 GMT+9"): one
 * column can hold jobs of different zones, and one-off jobs have none of their own. */
function zoned(value, zone) {
  const date = new Date(value);
  if (!value || Number.isNaN(date.getTime())) return formatDate(value);
  const options = { weekday: "short", year: "numeric", month: "numeric", day: "numeric", hour: "2-digit", minute: "2-digit", timeZoneName: "short" };
  const locale = document.documentElement.lang || undefined;
  try {
    return date.toLocaleString(locale, { ...options, timeZone: zone });
  } catch { // a zone this browser does not know: its own clock, still named
    return date.toLocaleString(locale, options);
  }
}

// Phrases the server's grammar reads, in the reader's language (" · " between them).
const examples = () => t("schedules.examples").split(" · ");

// The form's field a refusal is about: the schedules' API refuses by code alone.
const REFUSED_FIELD = {
  prompt_empty: "prompt", too_long: "prompt",
  recurrence_invalid: "every", recurrence_too_often: "every", timezone_unknown: "job-timezone",
};

function zoneInput(name, value) {
  const listId = "schedule-zones";
  const input = el("input", { name, list: listId, maxlength: "64", autocomplete: "off", spellcheck: "false", props: { value } });
  if (!document.getElementById(listId)) {
    document.body.append(el("datalist", { id: listId }, ...zoneNames().map((zone) => el("option", { value: zone }))));
  }
  return input;
}

function zoneSection(zone, ctx) {
  // Unset, the field is empty (UTC applies): filled with the browser's zone it read as
  // the zone in use. The browser's zone is one click away instead.
  const input = zoneInput("timezone", zone || "");
  input.placeholder = DEFAULT_ZONE;
  const submit = el("button", { class: "btn", type: "submit", text: t("schedules.zone_save") });
  const status = statusLine();
  const save = (value, control) => busy(control, async () => {
    const response = await api("PUT", "/api/me/settings", { timezone: value || null });
    if (response.ok) {
      // The one-click button is gone once a zone is saved: the focus goes to the field.
      const focus = control === submit ? null : ['[data-testid="schedule-zone"] input'];
      await ctx.rerender({ focus, status: '[data-testid="schedule-zone"] .form-status', say: t("schedules.zone_saved") });
    } else status.error(errorText(response));
  });
  const offered = !zone && browserZone() !== DEFAULT_ZONE ? browserZone() : null;
  const useBrowser = offered ? button(t("schedules.zone_use", { zone: offered }), {
    kind: "primary", attrs: { "data-testid": "schedule-zone-use-browser" }, onClick: () => save(offered, useBrowser),
  }) : null;
  const form = el("form", { class: "grid-form", novalidate: true, "data-testid": "schedule-zone" },
    field(t("schedules.zone_label"), input, { hint: zone ? t("schedules.zone_hint") : t("schedules.zone_unset", { zone: browserZone() }) })[0],
    el("div", { class: "actions" }, submit, useBrowser), el("div", { class: "span" }, status.node));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    save(input.value.trim(), submit);
  });
  return section(t("schedules.zone_title"), form);
}

/** The create / edit form; `job` null for a new one. Shows what the schedule means
 * (its cron and next runs) before it is saved. */
function jobForm(ctx, zone, job = null) {
  const prompt = el("textarea", { name: "prompt", rows: "3", maxlength: "20000", props: { value: job?.prompt || "" } });
  const every = el("input", {
    name: "every", maxlength: "200", autocomplete: "off", placeholder: examples()[0],
    props: { value: job ? (job.phrase || job.cron || "") : "" },
  });
  const tz = zoneInput("job-timezone", job?.timezone || zone || DEFAULT_ZONE);
  const preview = el("p", { class: "hint", "data-testid": "schedule-preview", "aria-live": "polite" });
  const submit = el("button", { class: "btn primary", type: "submit", text: job ? t("common.save") : t("schedules.create") });
  const status = statusLine();
  // The preview and the form's refusal (at its field, or in the status) may both judge
  // the same "When": a refusal reads once, at the field after a save, in the preview
  // before one.
  const saidByForm = (text) => [status.node, ...form.querySelectorAll(".field-error")].some((node) => node.textContent === text);
  const showPreview = async () => {
    const when = every.value.trim();
    if (!when) { preview.textContent = ""; return; }
    const response = await api("POST", "/api/schedules/preview", { every: when, timezone: tz.value.trim() || null });
    if (!response.ok && saidByForm(errorText(response))) { preview.textContent = ""; return; }
    preview.textContent = response.ok
      ? t("schedules.preview", { cron: response.data.cron, runs: response.data.next_runs.map((run) => zoned(run, response.data.timezone)).join(" · ") })
      : errorText(response);
  };
  every.addEventListener("change", showPreview);
  tz.addEventListener("change", showPreview);
  const actions = el("div", { class: "actions span" }, submit,
    job ? link("#schedules", t("common.cancel"), { class: "btn quiet" }) : null);
  const form = el("form", { class: "grid-form", novalidate: true, "data-testid": job ? "schedule-edit" : "schedule-new" },
    el("div", { class: "span" }, field(t("schedules.prompt_label"), prompt, { required: true, hint: t("schedules.prompt_hint") })[0]),
    field(t("schedules.every_label"), every, { required: true, hint: t("schedules.every_hint", { examples: examples().join(" · ") }) })[0],
    field(t("schedules.job_zone_label"), tz, { hint: !job && !zone ? t("schedules.job_zone_default") : null })[0],
    el("div", { class: "span" }, preview), actions, el("div", { class: "span" }, status.node));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearFieldErrors(form, status);
    if (!prompt.value.trim()) { markField(form, status, "prompt", t("schedules.prompt_required")); return; }
    if (!every.value.trim()) { markField(form, status, "every", t("schedules.every_required")); return; }
    const body = { prompt: prompt.value, every: every.value.trim(), timezone: tz.value.trim() || null };
    busy(submit, async () => {
      const response = job
        ? await api("PATCH", `/api/schedules/${encodeURIComponent(job.id)}`, body)
        : await api("POST", "/api/schedules", body);
      if (response.ok && job) { ctx.navigate("#schedules"); return; }
      if (response.ok) {
        // A new prompt: the focus on the first action of its row (not <main>: the keyboard
        // would start over at the page's top), which says it was made; the form is empty again.
        const row = `tr[data-job="${CSS.escape(String(response.data.id))}"]`;
        await ctx.rerender({ focus: [`${row} .row-actions :is(button, a)`, `${row} a`], status: `${row} .form-status`, say: t("schedules.created") });
        return;
      }
      showFormError(form, status, response, { fieldFor: (code) => REFUSED_FIELD[code] || null });
      if (saidByForm(preview.textContent)) preview.textContent = "";
    });
  });
  return form;
}

function whenText(job) {
  if (!job.recurring) return t("schedules.once");
  return `${job.phrase || job.cron} (${job.timezone})`;
}

function lastText(job, zone) {
  if (!job.last_run_at) return t("schedules.never_run");
  const result = job.last_status === "done" ? t("schedules.result_done") : t("schedules.result_failed");
  return `${result} · ${zoned(job.last_run_at, zone)}`;
}

function nextText(job, zone) {
  if (job.paused) return t("schedules.paused");
  if (job.next_run) return zoned(job.next_run, zone);
  return job.status === "cancelled" ? t("schedules.cancelled") : t("schedules.finished");
}

function jobRow(job, ctx, memberZone) {
  const changeable = mayChange(ctx);
  const zone = jobZone(job, memberZone);
  const status = statusLine();
  const label = job.prompt.replace(/\s+/g, " ").trim();
  const short = label.length > 80 ? `${label.slice(0, 79)}…` : label;
  const active = job.status === "pending" || job.status === "running";
  const toggle = job.recurring && active ? button(job.paused ? t("schedules.resume") : t("schedules.pause"), {
    kind: "quiet small",
    attrs: { "aria-label": `${job.paused ? t("schedules.resume") : t("schedules.pause")}: ${short}` },
    onClick: async () => {
      const response = await api("PATCH", `/api/schedules/${encodeURIComponent(job.id)}`, { paused: !job.paused });
      if (response.ok) ctx.rerender(); else status.error(errorText(response));
    },
  }) : null;
  const edit = job.recurring && changeable ? link(`#schedules?edit=${encodeURIComponent(job.id)}`, t("schedules.edit"),
    { class: "btn quiet small", "aria-label": `${t("schedules.edit")}: ${short}` }) : null;
  const remove = button(t("schedules.delete"), {
    kind: "quiet small danger-text",
    attrs: { "aria-label": `${t("schedules.delete")}: ${short}` },
    onClick: async () => {
      const ok = await confirmDialog({ title: t("schedules.delete_title"), message: t("schedules.delete_text", { prompt: short }), confirmLabel: t("schedules.delete") });
      if (!ok) return;
      const response = await api("DELETE", `/api/schedules/${encodeURIComponent(job.id)}`);
      if (response.ok) ctx.rerender(); else status.error(errorText(response));
    },
  });
  return el("tr", { "data-job": job.id, "data-paused": String(job.paused) },
    el("td", { class: "prompt-cell" }, el("span", { text: short }), el("br"),
      link(`#chat/${encodeURIComponent(job.conversation_id)}`, t("schedules.open_conversation"),
        { class: "muted", "aria-label": `${t("schedules.open_conversation")}: ${job.conversation_title || short}` })),
    // data-label: a phone shows the rows stacked, each value under its column's name (app.css).
    el("td", { "data-label": t("schedules.col_when"), text: whenText(job) }),
    el("td", { "data-cell": "next", "data-label": t("schedules.col_next"), text: nextText(job, zone) }),
    el("td", { class: "wide-only", "data-cell": "last", "data-label": t("schedules.col_last"), text: lastText(job, zone) }),
    el("td", { class: "row-actions" }, toggle, edit, remove, status.node));
}

function jobsSection(jobs, ctx, memberZone) {
  if (!jobs.length) return section(t("schedules.list_title"), el("p", { class: "muted", text: mayChange(ctx) ? t("schedules.none") : t("schedules.none_yet") }));
  const head = el("tr", {}, ...[
    ["schedules.col_prompt", ""], ["schedules.col_when", ""], ["schedules.col_next", ""],
    ["schedules.col_last", "wide-only"], ["schedules.col_actions", "row-actions"],
  ].map(([key, cls]) => el("th", { scope: "col", class: cls || null, text: t(key) })));
  return section(t("schedules.list_title"),
    el("div", { class: "table-wrap" }, el("table", { class: "table stack-on-phone", "data-testid": "schedule-list" },
      el("thead", {}, head), el("tbody", {}, ...jobs.map((job) => jobRow(job, ctx, memberZone))))));
}

export async function renderSchedules(ctx) {
  const page = el("div", { class: "page" }, pageHeader(t("schedules.title"), t("schedules.intro")));
  const response = await api("GET", "/api/schedules");
  if (!response.ok) {
    page.append(section(null, notice("error", errorText(response))));
    return page;
  }
  const { jobs, timezone } = response.data;
  const editing = ctx.params.get("edit");
  // In place of the form (and of "create one below"): why there is none.
  const notInRole = () => section(null, el("p", { class: "muted", "data-testid": "schedules-not-in-role", text: t("schedules.not_in_role") }));
  if (editing && !mayChange(ctx)) {
    page.append(notInRole(), el("p", {}, link("#schedules", t("schedules.back"))));
    return page;
  }
  if (editing) {
    const job = jobs.find((candidate) => candidate.id === editing);
    page.append(job
      ? section(t("schedules.edit_title"), jobForm(ctx, timezone, job))
      : section(null, notice("error", t("error.not_found")), link("#schedules", t("schedules.back"))));
    return page;
  }
  page.append(jobsSection(jobs, ctx, timezone), mayChange(ctx) ? section(t("schedules.new_title"), jobForm(ctx, timezone)) : notInRole(),
    zoneSection(timezone, ctx), section(t("schedules.rules_title"), el("p", { class: "hint", text: t("schedules.rules") })));
  return page;
}
