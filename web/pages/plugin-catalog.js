// #plugins: a status board. One card per plugin: what it is, whether it runs
// (health dot; its error on hover and on click/keyboard), an enable switch for
// non-built-ins, and the way to its detail page.
import { api } from "../lib/api.js";
import { el, link, uid } from "../lib/dom.js";
import { t } from "../lib/i18n.js";
import { icon } from "../lib/icons.js";
import { closeOnEscape, errorText, notice, pageHeader } from "../lib/ui.js";

/** green: running; amber: running, but it says something keeps it from its job now
 * (`degraded`, HostApi.set_degraded), or waiting to start (`waiting`: a required
 * setting, a NotReady: a state to resolve, not a crash); red: failed, unhealthy, or
 * `missing` (turned on, but its package is installed no more); grey: off or blocked. */
export function health(plugin) {
  if (plugin.state === "loaded" && plugin.waiting) return "amber";
  if (plugin.state === "failed" || plugin.state === "missing" || (plugin.state === "loaded" && plugin.healthy === false)) return "red";
  if (plugin.state === "loaded" && plugin.degraded) return "amber";
  // A sandbox backend another backend stands in for, or that cannot run here: loaded, idle.
  if (plugin.state === "loaded" && plugin.standby) return "grey";
  if (plugin.state === "loaded") return "green";
  return "grey";
}

/** The plugin's state in a few words. A waiting plugin's reason is part of it on the
 * card (`withReason`); where the reason is said beside it (the status panel, the detail
 * page's facts), the label is the state alone, so the sentence is not read twice. */
export function stateLabel(plugin, { withReason = true } = {}) {
  if (plugin.state === "loaded" && plugin.waiting) {
    if (plugin.needs_settings) return t("plugin.state.needs_settings");
    return withReason ? t("plugin.state.waiting", { reason: plugin.error || "" }) : t("plugin.waiting_reason");
  }
  if (plugin.state === "loaded" && plugin.healthy === false) return t("plugin.state.unhealthy");
  if (health(plugin) === "amber") return t("plugin.state.degraded", { reason: plugin.degraded });
  if (plugin.state === "loaded" && plugin.standby) return plugin.standby;  // the server's words, in the reader's language
  return t(`plugin.state.${plugin.state}`);
}

function healthDot(plugin) {
  const color = health(plugin);
  const label = stateLabel(plugin);
  // A waiting plugin's label already holds its reason (plugin.error): said once.
  const reasonInLabel = plugin.state === "loaded" && plugin.waiting && !plugin.needs_settings && Boolean(plugin.error);
  const detailId = uid("health");
  const detail = el("div", { id: detailId, class: `health-detail ${color}`, hidden: true },
    el("strong", { text: stateLabel(plugin, { withReason: false }) }),
    plugin.error ? el("p", { class: "detail", text: plugin.error }) : el("p", { class: "detail", text: t(`plugin.state_help.${plugin.waiting ? "waiting" : plugin.state === "loaded" && plugin.standby ? "standby" : color}`) }));
  const dot = el("button", {
    type: "button", class: `health-dot ${color}`, title: plugin.error && !reasonInLabel ? `${label}: ${plugin.error}` : label,
    // Which plugin too: fourteen cards' dots were fourteen identical "Status: Off" buttons.
    // The state may be a sentence of its own (a plugin's waiting reason): the template's
    // full stop follows it, not a second one.
    "aria-label": t("plugin.health_label", { plugin: plugin.title || plugin.id, state: label.replace(/[.。]\s*$/, "") }),
    "aria-expanded": "false", "aria-controls": detailId,
  });
  const show = (open) => { detail.hidden = !open; dot.setAttribute("aria-expanded", String(open)); };
  dot.addEventListener("click", () => show(detail.hidden));
  const close = () => { if (detail.hidden) return false; show(false); dot.focus(); return true; };
  closeOnEscape(dot, close);
  closeOnEscape(detail, close);
  return { dot, detail, label };
}

function enableSwitch(plugin, onChanged) {
  const id = uid("enable");
  // A failed or blocked plugin cannot be turned on (it needs a fix, or the server's
  // settings changed, and a restart), but one still turned on can be turned off.
  const blocked = (plugin.state === "failed" || plugin.state === "blocked") && !plugin.enabled;
  const input = el("input", {
    id, type: "checkbox", role: "switch", class: "switch", disabled: blocked, props: { checked: plugin.enabled },
  });
  const error = el("p", { class: "field-error", role: "alert" });
  input.addEventListener("change", async () => {
    error.textContent = "";
    input.disabled = true;
    const response = await api("PUT", `/api/admin/plugins/${encodeURIComponent(plugin.id)}/enabled`, { enabled: input.checked });
    input.disabled = false;
    if (!response.ok) { input.checked = !input.checked; error.textContent = errorText(response); return; }
    onChanged(response.data);
  });
  // The label names the action ("Enable"), never a state: "Enabled" beside a switch that
  // is off read as a claim. On or off is the switch's own (role=switch: aria-checked from
  // `checked`); the status beside the dot says it in words. The accessible name says
  // which plugin too ("Enable Weather", "Weather aktivieren"), so a screen reader's list
  // of switches is not a column of identical words, and it holds the visible word
  // (WCAG 2.5.3, label in name: "click Enable" still works).
  input.setAttribute("aria-label", t("plugin.enable_switch", { plugin: plugin.title || plugin.id }));
  return el("div", { class: "switch-row" }, input, el("label", { for: id, text: t("plugin.enable") }), error);
}

/** " · 3 problems" beside the state, a link to the plugin's page, whose Problems list
 * them: hooks that failed after startup (member_unlocked, shutdown), routes, tools.
 * The plugin may well be running, so the dot stays as it is; only under Details did
 * the admin learn of them. Null when there are none. */
function problemsLink(plugin, to) {
  const count = plugin.problems || 0;
  if (!count) return null;
  const text = t("plugin.problems", { count });
  return el("span", { class: "state-problems" }, " · ", link(to, text, {
    "aria-label": t("plugin.problems_label", { problems: text, plugin: plugin.title || plugin.id }),
  }));
}

function pluginCard(plugin, ctx, { changed = false } = {}) {
  const { dot, detail, label } = healthDot(plugin);
  const to = `#plugin-detail?id=${encodeURIComponent(plugin.id)}`;
  // A plugin that failed says why on its card (a missing setting, say), not only
  // behind its dot or on its detail page; right after the switch, it is announced.
  const red = health(plugin) === "red" && plugin.error;
  // Waiting for settings: which ones, in the host's words (the label says only "Needs
  // settings"); a plugin's own NotReady reason is in its label already.
  const needsSettings = plugin.state === "loaded" && plugin.needs_settings && plugin.error;
  const problem = red ? el("p", { class: "card-problem", role: changed ? "alert" : null, text: t("plugin.failed_because", { error: plugin.error }) })
    : needsSettings ? el("p", { class: "card-waiting", role: changed ? "status" : null, text: plugin.error }) : null;
  // Stored settings its running version refuses (an upgrade changed the schema): it
  // reads their defaults until the admin saves them (names only, never the values).
  const stale = plugin.stale_settings?.length
    ? el("p", { class: "card-waiting", "data-testid": "stale-settings", text: t("plugin.stale_settings", { fields: plugin.stale_settings.join(", ") }) }) : null;
  const meta = el("p", { class: "meta" },
    plugin.version ? el("span", { text: t("plugin.version", { version: plugin.version }) }) : null,
    plugin.builtin ? el("span", { class: "tag", text: t("plugin.builtin") }) : null,
    plugin.manages_own_access ? el("span", { class: "tag", text: t("plugin.own_access") }) : null);
  // Amber: its state says why in the plugin's words, too long for the title's line.
  const amber = health(plugin) === "amber";
  // A sandbox backend's standby reason (an engine's own words) is as long: it wraps too.
  const long = !amber && plugin.state === "loaded" && Boolean(plugin.standby);
  const card = el("article", { class: `card plugin-card state-${plugin.state}`, "data-plugin": plugin.id },
    el("header", { class: amber || long ? "plugin-head stacked" : "plugin-head" },
      // A built-in's card sits under the page's "Built in" section heading (an h2): one
      // level below it, or the outline read the section and its plugins as peers.
      el(plugin.builtin ? "h3" : "h2", {}, icon(plugin.icon), el("span", { text: plugin.title || plugin.id })),
      el("div", { class: amber ? "health amber" : long ? "health long" : "health" }, dot, el("span", { class: "state-label", text: label }), problemsLink(plugin, to))),
    meta,
    el("p", { class: "description", text: plugin.description || t("plugin.no_description") }),
    problem, stale, detail);
  const footer = el("footer", { class: "plugin-foot" });
  if (!plugin.builtin) {
    footer.append(enableSwitch(plugin, (fresh) => {
      if (fresh.state === "missing" && !fresh.enabled) {
        // Turned off while installed no more: dismissed. Nothing is left to show but
        // that, where the card was, with the keyboard there.
        const gone = notice("info", t("plugin.missing_dismissed", { plugin: plugin.title || plugin.id }));
        gone.tabIndex = -1;
        card.replaceWith(gone);
        gone.focus();
        ctx.refreshNav();
        return;
      }
      Object.assign(plugin, {
        enabled: fresh.enabled, state: fresh.state, healthy: fresh.healthy, error: fresh.error, degraded: fresh.degraded, standby: fresh.standby, problems: fresh.problems,
        waiting: fresh.waiting, needs_settings: fresh.needs_settings,
      });
      const next = pluginCard(plugin, ctx, { changed: true });
      card.replaceWith(next);
      next.querySelector("input.switch")?.focus(); // keep the keyboard where it was
      ctx.refreshNav();
    }));
  } else {
    // A built-in backend that stands by ("Not available: ... Bubblewrap runs the commands
    // instead") read "Always on" beside it.
    footer.append(el("span", { class: "muted small", text: t(plugin.state === "loaded" && plugin.standby ? "plugin.standing_by" : "plugin.always_on") }));
  }
  footer.append(link(to, plugin.configurable ? t("plugin.configure") : t("plugin.details"), {
    class: (red || needsSettings) && plugin.configurable ? "btn primary" : "btn", "aria-label": `${plugin.configurable ? t("plugin.configure") : t("plugin.details")}: ${plugin.title || plugin.id}`,
  }));
  card.append(footer);
  return card;
}

export async function renderCatalog(ctx) {
  const response = await api("GET", "/api/admin/plugins");
  const page = el("div", { class: "page" }, pageHeader(t("plugins.title"), t("plugins.intro")));
  if (!response.ok) { page.append(notice("error", errorText(response))); return page; }
  const plugins = response.data.plugins || [];
  const external = plugins.filter((p) => !p.builtin);
  const builtin = plugins.filter((p) => p.builtin);
  if (!external.length) page.append(notice("info", t("plugins.none_installed")));
  else page.append(el("div", { class: "card-grid" }, ...external.map((p) => pluginCard(p, ctx))));
  if (builtin.length) {
    page.append(el("h2", { class: "section-title", text: t("plugins.builtin_title") }),
      el("div", { class: "card-grid" }, ...builtin.map((p) => pluginCard(p, ctx))));
  }
  return page;
}
