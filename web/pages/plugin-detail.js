// #plugin-detail?id=<id> (admins): one plugin's summary, a failed plugin's traceback
// and its code's latest failures (by error id, as the model and the log name them),
// its instance settings and the settings sets it owns, and the read-only roster of
// who holds it. Grants are edited on each member's page, the one write path.
import { api } from "../lib/api.js";
import { configForm } from "../lib/config-form.js";
import { el, link, scrollableRegion } from "../lib/dom.js";
import { errorString, pluginString, t } from "../lib/i18n.js";
import { confirmDialog, errorText, formatDate, markField, notice, pageHeader, section } from "../lib/ui.js";
import { health, stateLabel } from "./plugin-catalog.js";

const back = () => el("p", { class: "back" }, link("#plugins", t("plugin.back")));

function summary(plugin) {
  const facts = el("dl", { class: "facts" });
  const add = (label, value) => { if (value != null && value !== "") facts.append(el("dt", { text: label }), el("dd", {}, value)); };
  add(t("plugin.id"), el("code", { text: plugin.id }));
  add(t("plugin.version_label"), plugin.version || "—");
  add(t("plugin.package"), plugin.distribution);
  add(t("plugin.state"), el("span", { class: health(plugin) === "amber" ? "health amber" : plugin.state === "loaded" && plugin.standby ? "health long" : "health" },
    el("span", { class: `health-dot static ${health(plugin)}`, "aria-hidden": "true" }), stateLabel(plugin, { withReason: false })));
  // Waiting (a setting, a NotReady) is no error: its reason is labelled as what it is,
  // as the catalog's card and the docs call it.
  const waiting = plugin.state === "loaded" && plugin.waiting;
  if (plugin.error) add(t(waiting ? "plugin.waiting_reason" : "plugin.error"), el("span", { class: waiting ? "waiting-text" : "error-text", text: plugin.error }));
  if (plugin.pages?.length) {
    add(t("plugin.pages"), el("ul", { class: "plain" }, ...plugin.pages.map((p) =>
      el("li", {}, p.title, p.admin_only ? el("span", { class: "tag", text: t("plugin.admin_only") }) : null))));
  }
  if (plugin.user_config_schema?.length) {
    add(t("plugin.member_settings"), plugin.user_config_schema.map((f) => f.label || f.name).join(", "));
  }
  return section(t("plugin.summary"), facts);
}

/** What the admin can do about the plugin being unusable: turn it on in the catalog
 * only when it is merely off. A failed or blocked plugin's switch cannot be turned on;
 * it needs a fix (or the server's settings changed) and a restart. One still turned on
 * can be turned off: "it cannot be turned on" beside a switch that is on read as wrong. */
function unusableNote(plugin) {
  if (plugin.state === "failed") {
    return notice("error", t(plugin.enabled ? "plugin.failed_note_on" : "plugin.failed_note", { error: plugin.error || "" }));
  }
  if (plugin.state === "blocked") return notice("info", t("plugin.blocked_note"));
  if (plugin.state === "missing") return notice("error", t("plugin.missing_note"));
  return plugin.enabled || plugin.builtin ? null : notice("info", t("plugin.disabled_note"));
}

/** configForm marks the refusal's first field; a save may have refused several
 * (`errors`), and the admin should not find the next one only at the next save. The
 * others are marked first, so the first field keeps the focus and the status line. */
function markTheOtherFields(holder, response) {
  const form = holder.querySelector("form.config-form");
  if (!form) return;
  const quiet = { error() {} };
  for (const problem of (response.data?.errors || []).slice(1)) {
    markField(form, quiet, problem.field, errorString(problem.code, problem.values) || problem.error);
  }
}

/** Stored values this version refuses, and a button that removes them all (the
 * plugin's and its settings sets'): a renamed or dropped field has nothing in the form
 * to correct, and the note stayed until the admin saved an unchanged form.
 *
 * Removed, the notices give way to one "Stored values removed." that takes the focus:
 * dropping the focused button left the focus on <body> and said nothing. A refusal is
 * said beside the notice, which keeps its fields and its button for another try (it
 * replaced the notice's words, a <p> in the <p>, and took the button with it). */
function staleNotice(plugin, fields) {
  const note = notice("warning", t("plugin.stale_settings_note", { fields: fields.join(", ") }));
  const problem = el("p", { class: "field-error", role: "alert", "data-testid": "stale-remove-error" });
  const remove = el("button", { class: "btn", type: "button", "data-testid": "stale-remove", text: t("plugin.stale_settings_remove") });
  const holder = el("div", { class: "stale-settings" }, note, problem);
  remove.addEventListener("click", async () => {
    // They are what going back to the previous version would read: removed at once,
    // one stray click lost them with nothing said.
    const ok = await confirmDialog({
      title: t("plugin.stale_settings_remove_title", { fields: fields.join(", ") }),
      message: t("plugin.stale_settings_remove_text"),
      confirmLabel: t("plugin.stale_settings_remove"),
    });
    if (!ok) return;
    const response = await api("DELETE", `/api/admin/plugins/${encodeURIComponent(plugin.id)}/stale-settings`);
    if (!response.ok) { problem.textContent = errorText(response); remove.focus(); return; }
    const done = el("p", { class: "notice ok", role: "status", tabindex: "-1", "data-testid": "stale-removed", text: t("plugin.stale_settings_removed") });
    document.querySelectorAll(".stale-settings").forEach((shown) => { if (shown !== holder) shown.remove(); });
    holder.replaceWith(done);
    done.focus();
  });
  note.append(" ", remove);
  return holder;
}

/** `refresh`: redraws the plugin's state after a save, which may have restarted it
 * (since contract 1.8) into health or out of it: "Saved." beside a stale "Running"
 * told the admin nothing of a save that broke the plugin. */
function configSection(plugin, refresh) {
  const schema = plugin.config_schema || [];
  if (plugin.state === "missing") return null; // its note says all there is: nothing is installed to have settings
  if (plugin.settings_known === false) {
    // It failed before saying who it is: whether it has settings is unknown, not "none".
    return section(t("plugin.config_title"), notice("info", t("plugin.config_unknown")));
  }
  if (!schema.length) {
    // Its settings sets are its settings (a card each, below): "no settings" would contradict them.
    if (plugin.settings_sets?.length) return null;
    return section(t("plugin.config_title"), el("p", { class: "muted", text: t("plugin.no_config") }));
  }
  if (plugin.state === "failed" || plugin.state === "blocked") {
    return section(t("plugin.config_title"), notice("info", t("plugin.config_unavailable")));
  }
  // The save restarted the plugin and its startup failed on the saved values: said
  // here, beside the form's "Saved.", not only in the state at the top of the page.
  const startNote = el("p", { class: "field-error", role: "alert", "data-testid": "not-started" });
  // Stored values this version refuses (or of fields it dropped): the form shows the
  // defaults the plugin reads instead, and saving it stores them.
  const own = (plugin.stale_settings || []).filter((name) => !name.includes("."));
  const stale = own.length ? staleNotice(plugin, own) : null;
  const holder = section(t("plugin.config_title"), stale, configForm({
    fields: schema,
    values: plugin.config || {},
    save: async (values) => {
      const response = await api("PUT", `/api/admin/plugins/${encodeURIComponent(plugin.id)}/config`, { config: values });
      startNote.textContent = response.ok && response.data?.not_started != null ? t("plugin.saved_not_started", { error: response.data.not_started }) : "";
      // Saved: the form's values are stored, so none of its fields reads stale any more.
      if (response.ok) { stale?.remove(); await refresh(); } else markTheOtherFields(holder, response);
      return { response, values: response.data?.config || {} };
    },
  }), startNote);
  return holder;
}

// Settings sets the plugin registered with an `owner`: shown here rather than on the
// general settings page, saved through the same route.
function settingsSetSections(plugin) {
  return (plugin.settings_sets || []).map((set) => {
    const stale = set.stale?.length ? staleNotice(plugin, set.stale) : null;
    const holder = section(set.title, stale, configForm({
      fields: set.fields || [],
      values: set.values || {},
      save: async (values) => {
        const saved = await api("PUT", `/api/admin/settings/${encodeURIComponent(set.id)}`, { values });
        if (saved.ok) stale?.remove(); else markTheOtherFields(holder, saved);
        return { response: saved, values: saved.data?.values || {} };
      },
    }));
    return holder;
  });
}

// Text only (textContent): a traceback can quote anything. It scrolls past its height,
// so it is a named region a keyboard can reach and scroll.
const traceback = (text) => scrollableRegion(el("pre", { class: "traceback", text }), t("plugin.traceback"));

// A failure's time in the reader's language and zone (the server's UTC ISO string was
// shown as it came, "2026-12-07T11:50:00Z", in English and German alike); the exact
// moment stays in `datetime` for assistive technology and copying.
const moment = (iso) => el("time", { datetime: iso, text: formatDate(iso) });

/** The string `key` with its `{last}` as a <time> of `iso`, where the language puts it. */
function withMoment(key, values, iso) {
  const marker = "\u0000";
  const [before, after = ""] = t(key, { ...values, last: marker }).split(marker);
  return [before, moment(iso), after];
}

function problemsSection(plugin) {
  const failures = plugin.failures || plugin.tool_failures || [];
  if (!plugin.traceback && !failures.length) return null;
  const parts = [];
  if (plugin.traceback) {
    parts.push(el("details", { class: "plugin-traceback" }, el("summary", { text: t("plugin.traceback") }), traceback(plugin.traceback)));
  }
  if (failures.length) {
    parts.push(el("p", { class: "hint", text: t("plugin.tool_failures_hint") }));
    // Kept in memory: "the latest failures" read as all of them, and a restart empties it.
    parts.push(el("p", { class: "hint", "data-testid": "failures-since-start", text: t("plugin.failures_since_start") }));
    parts.push(el("ul", { class: "plain tool-failures" }, ...failures.slice().reverse().map((f) => el("li", { "data-error-id": f.error_id },
      el("details", {}, el("summary", {}, el("code", { text: f.error_id }), ` ${f.where || f.tool} · `, moment(f.at),
        // A system agent failing the same way for several members, in one pass or in
        // several: one entry, its latest traceback (an agent failing every minute filled the list).
        ...(f.passes > 1 ? [" · ", ...withMoment("plugin.failure_passes", { count: f.members, passes: f.passes }, f.last_at)]
          : f.members > 1 ? [" · ", ...withMoment("plugin.failure_members", { count: f.members }, f.last_at)]
          // A hook's repeats within a minute, folded into this entry (not listed again).
          : f.repeats ? [" · ", ...withMoment("plugin.failure_repeats", { count: f.repeats }, f.last_at)] : [])),
        // The host's own words (a hook slow at start), in the reader's language; else the traceback.
        f.message ? el("p", { text: f.message }) : traceback(f.traceback))))));
  }
  return section(t("plugin.problems_title"), ...parts);
}

async function rosterSection(plugin) {
  const title = t("plugin.roster_title");
  if (plugin.manages_own_access) {
    // No grant list applies (the access API names only the admins, who hold every
    // plugin): say who reaches it, and how the plugin decides, in its own words
    // (its string `plugin.access`) when it has them.
    const own = pluginString(plugin.id, "plugin.access");
    return section(title, el("p", { class: "muted", text: t("plugin.roster_own_access") }),
      own ? el("p", { "data-testid": "plugin-access", text: own }) : null);
  }
  // Never in a grant list (part of the host): listing grants showed only the admin,
  // while every member's requests carried its tools.
  if (plugin.builtin) return section(title, el("p", { class: "muted", text: t("plugin.roster_builtin") }));
  if (["failed", "blocked", "missing"].includes(plugin.state)) return section(title, el("p", { class: "muted", text: t("plugin.roster_unavailable") }));
  const response = await api("GET", `/api/admin/plugins/${encodeURIComponent(plugin.id)}/access`);
  if (!response.ok) return section(title, notice("error", errorText(response)));
  const members = response.data.members || [];
  const list = el("ul", { class: "roster" }, ...members.map((m) => el("li", {},
    link(`#members/${encodeURIComponent(m.id)}`, m.display_name || m.username),
    el("span", { class: "muted", text: ` @${m.username}` }),
    m.implicit ? el("span", { class: "tag", text: t("plugin.roster_implicit") }) : null,
    m.active ? null : el("span", { class: "tag off", text: t("members.inactive") }))));
  return section(title,
    el("p", { class: "hint" }, t("plugin.roster_hint"), " ", link("#members", t("nav.members"))),
    members.length ? list : el("p", { class: "muted", text: t("plugin.roster_empty") }));
}

export async function renderPluginDetail({ params }) {
  const id = params.get("id") || "";
  const response = await api("GET", `/api/admin/plugins/${encodeURIComponent(id)}`);
  if (!response.ok) {
    return el("div", { class: "page" }, back(), pageHeader(t("plugin.not_found")), notice("error", errorText(response)));
  }
  const plugin = response.data;
  const state = el("div", { class: "plugin-state" }, summary(plugin), problemsSection(plugin));
  const refresh = async () => {
    const fresh = await api("GET", `/api/admin/plugins/${encodeURIComponent(id)}`);
    if (fresh.ok) state.replaceChildren(...[summary(fresh.data), problemsSection(fresh.data)].filter(Boolean));
  };
  return el("div", { class: "page" },
    back(),
    pageHeader(plugin.title || plugin.id, plugin.description),
    unusableNote(plugin),
    state,
    configSection(plugin, refresh),
    ...settingsSetSections(plugin),
    await rosterSection(plugin));
}
