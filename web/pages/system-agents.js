// #system-agents: one tab per agent plus "All" (links, see agentNav). A tab holds the
// agent's description, its settings (admins only: the set the agent's plugin
// registered, saved like every settings set) and the caller's own runs of it. The tab is
// the agent, not the kind of information: "why did this do nothing last night?" is half
// schedule, half log.
import { api } from "../lib/api.js";
import { configForm } from "../lib/config-form.js";
import { el, link } from "../lib/dom.js";
import { errorString, pluginString, t } from "../lib/i18n.js";
import { errorText, formatDate, notice, pageHeader, section } from "../lib/ui.js";

/** The settings that say when an agent runs: each needs a value (see the form's save). */
const TIMING_FIELDS = ["interval", "run_at_hour"];

const route = (tab) => `#system-agents${tab ? `/${encodeURIComponent(tab)}` : ""}`;

/** The "tabs" are links to the page of one agent (each its own address, to bookmark or
 * go back to), so they are a navigation with the current one marked, not an ARIA
 * tablist: that would promise arrow keys and a tab panel, and links are reached with Tab. */
function agentNav(agents, active) {
  const tabs = [{ id: "", title: t("system_agents.all") }, ...agents];
  return el("nav", { class: "actions", "aria-label": t("system_agents.title") },
    ...tabs.map((tab) => el("a", {
      href: route(tab.id), class: `btn ${tab.id === active ? "primary" : "quiet"}`,
      "aria-current": tab.id === active ? "page" : null, "data-tab": tab.id || "all", text: tab.title,
    })));
}

/** Why a run failed, in the reader's words when the host knows the reason (no model,
 * the model failed: `error_code`, as the chat says it; a member is told what they can
 * do, not to check the provider's address), else as recorded (an error id). */
const runError = (run, admin) => (run.error_code && errorString(run.error_code, run.error_values || {}, { admin })) || run.error;

function runsTable(runs, agents, admin) {
  if (!runs.length) return el("p", { class: "muted", text: t("system_agents.no_runs") });
  const titles = new Map(agents.map((a) => [a.id, a.title]));
  const owners = new Map(agents.map((a) => [a.id, a.plugin_id]));
  // An agent's own counters (`ctx.stats[key]`), named in the reader's words: by its
  // plugin's bundle (`agent.<agent id>.stat.<key>`), else by the host's, else the key.
  const label = (run, key) => {
    const own = owners.has(run.agent_id) ? pluginString(owners.get(run.agent_id), `agent.${run.agent_id}.stat.${key}`) : null;
    if (own) return own;
    const text = t(`system_agents.stat_${key}`);
    return text === `system_agents.stat_${key}` ? key : text;
  };
  const stats = (run) => Object.entries(run.stats || {}).map(([k, v]) => `${label(run, k)}: ${v}`).join(", ");
  return el("div", { class: "table-wrap" }, el("table", { class: "table runs", "data-testid": "runs" },
    el("thead", {}, el("tr", {},
      el("th", { text: t("system_agents.agent") }), el("th", { text: t("system_agents.started") }),
      el("th", { text: t("system_agents.status") }), el("th", { class: "wide-only", text: t("system_agents.stats") }))),
    el("tbody", {}, ...runs.map((run) => el("tr", { "data-status": run.status },
      el("td", { text: titles.get(run.agent_id) || run.agent_id }),
      el("td", { text: formatDate(run.started_at) }),
      el("td", { text: t(`system_agents.status_${run.status}`) + (run.error ? ` (${runError(run, admin)})` : "") }),
      el("td", { class: "wide-only", text: stats(run) }))))));
}

function agentCard(agent) {
  const state = agent.enabled ? t("system_agents.enabled") : t("system_agents.disabled");
  const card = section(agent.title,
    el("p", { text: agent.description }),
    el("p", { class: "hint", text: `${t(`system_agents.scope_${agent.scope}`)} · ${state}` }));
  // An admin sees the agents of a plugin that does not run (to set them up beforehand):
  // say that nothing runs, rather than show settings that look live, and why: off, or on
  // but failed to start ("until an admin enables it" sent them to a switch already on).
  if (agent.settings && !agent.plugin_running) {
    let why = t("system_agents.plugin_off");
    if (agent.plugin_enabled) {
      why = agent.plugin_error ? t("system_agents.plugin_not_running", { reason: agent.plugin_error }) : t("system_agents.plugin_not_running_unsaid");
    }
    card.append(el("p", { class: "notice info", role: "status", "data-testid": "plugin-not-running" }, why, " ",
      link(`#plugin-detail?id=${encodeURIComponent(agent.plugin_id)}`, t("system_agents.plugin_off_link"))));
  }
  if (agent.settings) {
    const set = agent.settings;
    const stale = set.stale?.length ? notice("warning", t("plugin.stale_settings_note", { fields: set.stale.join(", ") })) : null;
    card.append(el("h3", { text: t("system_agents.settings") }), ...(stale ? [stale] : []), configForm({
      fields: set.fields || [],
      values: set.values || {},
      save: async (values) => {
        // An emptied Interval (or a nightly agent's hour) is dropped by the server, which
        // puts the agent back on its default under a "Saved.": refused here, at the field,
        // naming that default, so the admin types the timing they mean (the default too,
        // if that is it).
        const timing = (set.fields || []).find((spec) => TIMING_FIELDS.includes(spec.name) && values[spec.name] == null);
        if (timing) {
          const label = timing.label || timing.name;
          const error = timing.default == null
            ? t("error.field_required", { field: label })
            : t("system_agents.interval_required", { field: label, default: timing.default });
          return { response: { ok: false, status: 400, data: { error, field: timing.name } }, values: set.values || {} };
        }
        const saved = await api("PUT", `/api/admin/settings/${encodeURIComponent(set.id)}`, { values });
        return { response: saved, values: saved.data?.values || {} };
      },
    }));
  }
  return card;
}

export async function renderSystemAgents(ctx) {
  const active = ctx.rest[0] || "";
  const [listed, runs] = await Promise.all([
    api("GET", "/api/system-agents"),
    api("GET", `/api/system-agents/runs${active ? `?agent=${encodeURIComponent(active)}` : ""}`),
  ]);
  const page = el("div", { class: "page" }, pageHeader(t("system_agents.title"), t("system_agents.intro")));
  if (!listed.ok) { page.append(notice("error", errorText(listed))); return page; }
  const agents = listed.data.agents || [];
  if (!agents.length) { page.append(notice("info", t("system_agents.none"))); return page; }
  page.append(agentNav(agents, active));
  for (const agent of agents.filter((a) => !active || a.id === active)) page.append(agentCard(agent));
  page.append(section(t("system_agents.runs_title"),
    el("p", { class: "hint", text: t("system_agents.runs_hint") }),
    runs.ok ? runsTable(runs.data.runs || [], agents, ctx.member?.is_admin === true) : notice("error", errorText(runs))));
  return page;
}
