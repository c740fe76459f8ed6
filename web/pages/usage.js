// #usage (admin): the request log read back (GET /api/admin/usage): for a period, the
// requests and tokens of each member and each model, and the latest requests, newest
// first, a page at a time ("Show more"). Metadata only: the log holds no words. The
// period is in the hash (#usage?since=…&until=…), so a period shown can be linked to.
import { api } from "../lib/api.js";
import { el } from "../lib/dom.js";
import { t } from "../lib/i18n.js";
import { busy, button, clearFieldErrors, errorText, field, formatDate, formatDay, notice, pageHeader, section, showFormError, statusLine } from "../lib/ui.js";

const PAGE = 50;
/** Statuses the host writes (skald_host/core/agent/runtime.py); another shows as written. */
const KNOWN_STATUSES = ["ok", "error", "stopped", "interrupted"];

const lang = () => document.documentElement.lang || undefined;
const number = (value) => (value == null ? "—" : Number(value).toLocaleString(lang()));
const duration = (value) => (value == null ? "—" : t("usage.ms", { value: number(value) }));
/** A period's day (YYYY-MM-DD, a UTC day) in the reader's date format. */
const day = (iso) => formatDay(`${iso}T00:00:00Z`, { timeZone: "UTC" });
const period = (data) => ({ since: day(data.since), until: day(data.until) });

function statusName(status) {
  return KNOWN_STATUSES.includes(status) ? el("span", { text: t(`usage.status.${status}`) }) : el("code", { text: status });
}

/** Who sent a request: the display name and @username; a deleted account says so (its
 * id's start tells two deleted members apart). */
function memberName(member) {
  if (!member) return el("span", { class: "muted", text: t("usage.no_member") });
  if (member.deleted) return el("span", {}, t("usage.member_deleted"), " ", el("code", { class: "muted", text: member.id.slice(0, 8) }));
  const name = member.display_name || member.username;
  return el("span", {}, el("span", { text: name }), name !== member.username ? [" ", el("code", { class: "muted", text: `@${member.username}` })] : null);
}

/** Which catalog entry a request went to: its label, model name and provider (two
 * providers may serve one model name, each its own bill). An entry deleted since is
 * its model name, said deleted; a request logged before entries were recorded, its
 * model name alone. */
function modelName(row) {
  const entry = row.entry;
  const name = el("code", { text: row.model });
  if (!entry) return name;
  if (entry.deleted) return el("span", { "data-entry": entry.id }, name, " ", el("span", { class: "muted", text: t("usage.model_deleted") }));
  const label = entry.label && entry.label !== row.model ? [el("span", { text: entry.label }), " "] : null;
  return el("span", { "data-entry": entry.id }, label, name, " ",
    el("span", { class: "muted", text: t("usage.model_provider", { provider: entry.provider_name }) }));
}

/** "3 completed, 1 stopped": each status by its name, in words, not colour. */
function byStatus(requests) {
  const parts = Object.entries(requests).sort(([a], [b]) => {
    const rank = (s) => (KNOWN_STATUSES.includes(s) ? KNOWN_STATUSES.indexOf(s) : KNOWN_STATUSES.length);
    return rank(a) - rank(b) || a.localeCompare(b);
  });
  return el("span", {}, ...parts.flatMap(([status, count], index) => [index ? ", " : null, `${number(count)} `, statusName(status)]));
}

const head = (columns) => el("thead", {}, el("tr", {}, ...columns.map(([key, cls]) => el("th", { scope: "col", class: cls || null, text: t(key) }))));
const cell = (key, content, cls = null) => el("td", { "data-label": t(key), class: cls }, content);
const tableOf = (caption, columns, rows, foot = null, testid = null) => el("div", { class: "table-wrap" },
  el("table", { class: "table models-table stack-on-phone usage-table", "data-testid": testid },
    el("caption", { class: "visually-hidden", text: caption }), head(columns), el("tbody", {}, ...rows), foot));

const TOTAL_COLUMNS = [["usage.requests", "num"], ["usage.by_status", ""], ["usage.tokens_in", "num"], ["usage.tokens_out", "num"]];

function countCells(counts) {
  return [
    cell("usage.requests", number(counts.total), "num"),
    cell("usage.by_status", byStatus(counts.requests)),
    cell("usage.tokens_in", number(counts.tokens_in), "num"),
    cell("usage.tokens_out", number(counts.tokens_out), "num"),
  ];
}

// Each row starts with a plain cell, not a row header: the tables' th style (small,
// upper-case, muted) is a column heading's, and a name or a figure in it read as one.
function totalsSection(data) {
  const words = period(data);
  const totalRow = el("tfoot", {}, el("tr", {}, el("td", {}, el("strong", { text: t("usage.total") })), ...countCells(data.total)));
  const members = tableOf(t("usage.per_member_caption", words), [["usage.member", ""], ...TOTAL_COLUMNS],
    data.members.map((entry) => el("tr", {}, cell("usage.member", memberName(entry.member)), ...countCells(entry))), totalRow, "usage-members");
  const models = tableOf(t("usage.per_model_caption", words), [["usage.model", ""], ...TOTAL_COLUMNS],
    data.models.map((entry) => el("tr", {}, cell("usage.model", modelName(entry)), ...countCells(entry))), null, "usage-models");
  if (!data.members.length) return section(t("usage.totals_title"), el("p", { class: "muted", text: t("usage.none") }));
  return section(t("usage.totals_title"),
    el("h3", { class: "subhead", text: t("usage.per_member") }), members,
    el("h3", { class: "subhead", text: t("usage.per_model") }), models);
}

function requestRow(request) {
  return el("tr", { "data-request": request.id },
    cell("usage.time", el("time", { datetime: request.at, text: formatDate(request.at) })),
    cell("usage.member", memberName(request.member)),
    cell("usage.model", modelName(request)),
    cell("usage.status", statusName(request.status)),
    cell("usage.http_status", request.http_status == null ? "—" : String(request.http_status), "num"),
    cell("usage.tokens_in", number(request.tokens_in), "num"),
    cell("usage.tokens_out", number(request.tokens_out), "num"),
    cell("usage.latency", duration(request.latency_ms), "num"),
    cell("usage.first_token", duration(request.first_token_ms), "num"));
}

const REQUEST_COLUMNS = [
  ["usage.time", ""], ["usage.member", ""], ["usage.model", ""], ["usage.status", ""], ["usage.http_status", "num"],
  ["usage.tokens_in", "num"], ["usage.tokens_out", "num"], ["usage.latency", "num"], ["usage.first_token", "num"],
];

function latestSection(data, query) {
  if (!data.requests.length) return section(t("usage.latest_title"), el("p", { class: "muted", text: t("usage.none") }));
  const table = tableOf(t("usage.latest_caption", period(data)), REQUEST_COLUMNS, data.requests.map(requestRow), null, "usage-requests");
  const body = table.querySelector("tbody");
  const status = statusLine();
  let next = data.next_before;
  const more = button(t("usage.show_more"), {
    onClick: () => busy(more, async () => {
      status.clear();
      const response = await api("GET", `/api/admin/usage?${new URLSearchParams({ ...query, before: next, limit: String(PAGE) })}`);
      if (!response.ok) { status.error(errorText(response)); return; }
      const rows = response.data.requests.map(requestRow);
      body.append(...rows);
      next = response.data.next_before;
      status.ok(next ? t("usage.more_shown", { count: rows.length }) : `${t("usage.more_shown", { count: rows.length })} ${t("usage.all_shown")}`);
      if (!next) {
        // The button goes with the last page: the focus goes to the first row it brought.
        more.remove();
        const first = rows[0]?.querySelector("td");
        if (first) { first.tabIndex = -1; first.focus(); }
      }
    }),
  });
  return section(t("usage.latest_title"), table, next ? el("div", { class: "actions" }, more) : null, status.node);
}

async function load(query) {
  return api("GET", `/api/admin/usage?${new URLSearchParams({ ...query, limit: String(PAGE) })}`);
}

function results(data, query) {
  return [totalsSection(data), latestSection(data, query)];
}

export async function renderUsage(ctx) {
  const asked = {};
  for (const name of ["since", "until"]) if (ctx.params?.get(name)) asked[name] = ctx.params.get(name);
  const page = el("div", { class: "page usage-page" }, pageHeader(t("usage.title"), t("usage.intro")),
    el("p", { class: "notice info", text: t("usage.billing_note") }));
  let response = await load(asked);
  // A period in the hash the server refuses (a hand-edited link): the default one, and the form says why.
  const refused = response.ok || !Object.keys(asked).length ? null : response;
  if (refused) response = await load({});
  if (!response.ok) { page.append(notice("error", errorText(response))); return page; }

  // A refused link keeps its dates in the fields, as a refused form does: the default
  // period's in their place, one marked wrong, was not what the reader had asked for.
  const shownSince = refused && asked.since ? asked.since : response.data.since;
  const shownUntil = refused && asked.until ? asked.until : response.data.until;
  const [sinceField, since] = field(t("usage.since"), el("input", { type: "date", name: "since", props: { value: shownSince } }));
  const [untilField, until] = field(t("usage.until"), el("input", { type: "date", name: "until", props: { value: shownUntil } }));
  const status = statusLine();
  const show = el("button", { class: "btn primary", type: "submit", text: t("usage.show") });
  // A question, not a change to save: leaving it asks nothing (data-guard, app.js).
  const form = el("form", { class: "grid-form", novalidate: true, "data-guard": "off" },
    sinceField, untilField, el("p", { class: "hint span", text: t("usage.period_hint") }),
    el("div", { class: "actions span" }, show, status.node));
  let shown = results(response.data, asked); // the page's own sections (its grid spaces them), replaced as a pair
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    busy(show, async () => {
      clearFieldErrors(form, status);
      const query = {};
      if (since.value) query.since = since.value;
      if (until.value) query.until = until.value;
      const answer = await load(query);
      if (!answer.ok) { showFormError(form, status, answer); return; }
      const fresh = results(answer.data, query);
      shown.forEach((part, index) => part.replaceWith(fresh[index]));
      shown = fresh;
      since.value = answer.data.since;
      until.value = answer.data.until;
      // The period into the address without a re-render (hashchange would draw the page again).
      history.replaceState(history.state, "", `#usage?${new URLSearchParams(query)}`);
      status.ok(t("usage.shown", period(answer.data)));
    });
  });
  page.append(section(t("usage.period_title"), form), ...shown);
  // Once the page is drawn: a field's label is found (and the field can take the focus)
  // only in the document, and a live region filled as it is inserted is not announced.
  if (refused) requestAnimationFrame(() => { if (form.isConnected) showFormError(form, status, refused); });
  return page;
}
