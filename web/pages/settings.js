// #settings: the instance status (version, warnings, missing translations), backups,
// and the general settings sets plugins register without an owner page of their own.
import { api } from "../lib/api.js";
import { configForm } from "../lib/config-form.js";
import { el } from "../lib/dom.js";
import { localeName, t } from "../lib/i18n.js";
import { busy, button, errorText, field, formatDate, formatSize, notice, pageHeader, section, statusLine } from "../lib/ui.js";

/** The admin status block: warnings first, then the facts. */
export async function statusBlock() {
  const response = await api("GET", "/api/admin/status");
  const title = t("status.title");
  if (!response.ok) return section(title, notice("error", errorText(response)));
  const status = response.data;
  const block = section(title);
  block.classList.add("status-block");
  for (const warning of status.warnings || []) {
    // Our own bundle has the text in the admin's language; the server's is English.
    const key = `warning.${warning.id}`;
    const text = t(key) === key ? warning.text : t(key, warning.values || {});
    block.append(notice("warning", text));
  }
  const missing = Object.entries(status.missing_translations || {});
  const keyList = (summary, keys) => el("details", { class: "notice warning" }, el("summary", { text: summary }),
    el("ul", { class: "plain keys" }, ...keys.map((key) => el("li", {}, el("code", { text: key })))));
  // A key no language has (a plugin's NotReady key no bundle carries) is listed under
  // English too, but no reader meets a gap there: each sees the plugin's own text.
  const everywhere = new Set(status.missing_everywhere || []);
  if (everywhere.size) block.append(keyList(t("status.missing_everywhere", { count: everywhere.size }), [...everywhere]));
  for (const [locale, all] of missing) {
    const keys = locale === "en" ? all.filter((key) => !everywhere.has(key)) : all;
    if (!keys.length) continue;
    block.append(keyList(t(locale === "en" ? "status.missing_english" : "status.missing_translations", { language: localeName(locale), count: keys.length }), keys));
  }
  if (!(status.warnings || []).length && !missing.length) block.append(notice("ok", t("status.all_good")));
  block.append(el("dl", { class: "facts" },
    el("dt", { text: t("status.version") }), el("dd", { text: [status.version || "—", status.revision && t("status.revision", { revision: status.revision }), status.schema && t("status.schema", { schema: status.schema })].filter(Boolean).join(" · ") }),
    el("dt", { text: t("status.sqlcipher") }), el("dd", { text: status.sqlcipher || "—" }),
    el("dt", { text: t("status.sandbox") }), el("dd", { text: status.sandbox || t("status.no_sandbox", { reason: status.sandbox_refusal || "" }) }),
    el("dt", { text: t("status.unlocked") }), el("dd", { text: String(status.members_unlocked ?? 0) })));
  return block;
}

/** Backups of the whole data dir: where they go, the schedule, the list, and "now". */
export async function backupsBlock() {
  const block = section(t("backups.title"));
  block.classList.add("backups-block");
  const body = el("div");
  const status = statusLine();
  const now = button(t("backups.take"), { kind: "primary", onClick: () => busy(now, async () => {
    status.ok(t("backups.taking"));
    const taken = await api("POST", "/api/admin/backups");
    if (!taken.ok) { status.error(errorText(taken)); return; }
    const backup = taken.data.backup;
    status.ok(t("backups.taken", { name: backup.name, size: formatSize(backup.bytes) }));
    await fill();
  }) });
  async function fill() {
    const response = await api("GET", "/api/admin/backups");
    if (!response.ok) { body.replaceChildren(notice("error", errorText(response))); return; }
    const { dir, every_hours: every, keep, backups, config_file: config } = response.data;
    const schedule = every > 0 ? t("backups.schedule", { count: every, keep })
      : config ? t("backups.no_schedule_where", { config }) : t("backups.no_schedule");
    body.replaceChildren(
      el("p", { class: "hint", text: t("backups.where", { dir }) }),
      el("p", { class: "hint", text: schedule }),
      backups.length
        ? el("div", { class: "table-wrap" }, el("table", { class: "table backups" },
          el("thead", {}, el("tr", {},
            el("th", { text: t("backups.when") }), el("th", { class: "num", text: t("backups.members") }),
            el("th", { class: "num", text: t("backups.size") }), el("th", { class: "wide-only", text: t("backups.name") }))),
          el("tbody", {}, ...backups.map((b) => el("tr", {},
            el("td", { text: formatDate(b.created_at) }), el("td", { class: "num", text: String(b.members) }),
            el("td", { class: "num", text: formatSize(b.bytes) }), el("td", { class: "wide-only" }, el("code", { text: b.name })))))))
        : el("p", { class: "muted", text: t("backups.none") }),
    );
  }
  await fill();
  block.append(body, el("div", { class: "actions" }, now), status.node);
  return block;
}

/** The instance's language: what members who chose none read, and what the model is
 *  told of them. Chosen at setup; changed here, with Save as every instance-wide setting
 *  is (the plugins' settings below): saved on "change", the first ArrowDown through the
 *  list changed every such member's language at once, and the select, disabled while it
 *  saved, dropped the focus to <body>. */
async function languageBlock() {
  const response = await api("GET", "/api/admin/language");
  if (!response.ok) return section(t("settings.language_title"), notice("error", errorText(response)));
  const select = el("select", { name: "instance_locale" },
    ...response.data.locales.map((code) => el("option", { value: code, text: localeName(code) })));
  select.value = response.data.locale;
  const status = statusLine();
  const [wrapper] = field(t("settings.language"), select, { hint: t("settings.language_hint") });
  const submit = el("button", { class: "btn primary", type: "submit", text: t("common.save") });
  const form = el("form", { class: "stack language-form", novalidate: true }, wrapper, el("div", { class: "actions" }, submit), status.node);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    status.clear();
    busy(submit, async () => {
      const saved = await api("PUT", "/api/admin/language", { locale: select.value });
      if (!saved.ok) { status.error(errorText(saved)); return; }
      select.value = saved.data.locale;
      status.ok(t("settings.language_saved", { language: localeName(saved.data.locale) }));
    });
  });
  return section(t("settings.language_title"), form);
}

export async function renderSettings() {
  const [response, status, backups, language] = await Promise.all([
    api("GET", "/api/admin/settings"), statusBlock(), backupsBlock(), languageBlock(),
  ]);
  const page = el("div", { class: "page" }, pageHeader(t("settings.title"), t("settings.intro")), status, language, backups);
  if (!response.ok) { page.append(notice("error", errorText(response))); return page; }
  const sets = response.data.sets || [];
  for (const set of sets) {
    const stale = set.stale?.length ? notice("warning", t("plugin.stale_settings_note", { fields: set.stale.join(", ") })) : null;
    page.append(section(set.title, el("p", { class: "hint", text: t("settings.from_plugin", { plugin: set.plugin_id }) }), stale, configForm({
      fields: set.fields || [],
      values: set.values || {},
      save: async (values) => {
        const saved = await api("PUT", `/api/admin/settings/${encodeURIComponent(set.id)}`, { values });
        return { response: saved, values: saved.data?.values || {} };
      },
    })));
  }
  return page;
}
