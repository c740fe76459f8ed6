// #reports: what system agents wrote — one's own reports, and those filed for one as a
// supervisor (about the members one supervises) or, for an admin, about the instance.
// Opening an unread report marks it read for every reader (first reader wins).
import { api } from "../lib/api.js";
import { el } from "../lib/dom.js";
import { t } from "../lib/i18n.js";
import { renderMarkdown } from "../lib/markdown.js";
import { errorText, formatDate, notice, pageHeader, section } from "../lib/ui.js";

function reportCard(report) {
  const meta = [formatDate(report.created_at)];
  if (report.subject) meta.push(t("reports.about", { name: report.subject }));
  meta.push(report.read_at ? t("reports.read", { when: formatDate(report.read_at) }) : t("reports.unread"));
  const state = el("p", { class: "hint", text: meta.join(" · ") });
  const body = el("div", { class: "markdown" });
  const details = el("details", { class: "report", "data-testid": "report", "data-read": String(Boolean(report.read_at)) },
    el("summary", {}, el("strong", { text: report.title }), " — ", report.summary), body);
  details.addEventListener("toggle", async () => {
    if (!details.open) return;
    body.replaceChildren(...renderMarkdown(report.body));
    if (report.read_at) return;
    const marked = await api("POST", `/api/reports/${encodeURIComponent(report.where)}/${encodeURIComponent(report.id)}/read`);
    if (marked.ok) {
      report.read_at = new Date().toISOString();
      details.dataset.read = "true";
      state.textContent = [formatDate(report.created_at), ...(report.subject ? [t("reports.about", { name: report.subject })] : []),
        t("reports.read", { when: formatDate(report.read_at) })].join(" · ");
    }
  });
  return el("div", { class: "stack" }, details, state);
}

export async function renderReports(ctx) {
  const response = await api("GET", "/api/reports");
  const page = el("div", { class: "page" }, pageHeader(t("reports.title"), t("reports.intro")));
  if (!response.ok) { page.append(notice("error", errorText(response))); return page; }
  const reports = response.data.reports || [];
  const own = reports.filter((r) => r.where === "own");
  const shared = reports.filter((r) => r.where === "shared" && r.audience !== "admins");
  // A report about the instance (the shared-memory check) is for the admins, not for a
  // supervisor: under a heading of its own.
  const instance = reports.filter((r) => r.where === "shared" && r.audience === "admins");
  if (instance.length || ctx?.member?.is_admin) {
    page.append(section(t("reports.instance_title"),
      instance.length ? el("div", { class: "stack" }, ...instance.map(reportCard)) : el("p", { class: "muted", text: t("reports.none") })));
  }
  page.append(section(t("reports.shared_title"),
    shared.length ? el("div", { class: "stack" }, ...shared.map(reportCard)) : el("p", { class: "muted", text: t("reports.none") })));
  page.append(section(t("reports.own_title"),
    own.length ? el("div", { class: "stack" }, ...own.map(reportCard)) : el("p", { class: "muted", text: t("reports.none") })));
  return page;
}
