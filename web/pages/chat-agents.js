// #agents: the named sub-agents this member's assistant can hand work to, whether the
// definitions loaded (an admin sees why a generation was refused, with the files to
// fix), and this member's own recent runs — never anyone else's.
import { api } from "../lib/api.js";
import { el, link } from "../lib/dom.js";
import { t } from "../lib/i18n.js";
import { errorText, formatDate, notice, pageHeader, section } from "../lib/ui.js";
import { knowAgentTitles, taskStatus } from "./chat-tasks.js";

/** A helper's card. Its words are a member's: the helpers it may hand work to by their
 * titles. What only an admin reads (the definition's id, its plugin and the hash that
 * tells two versions apart) is one muted details line, for admins alone: to a member
 * "general-purpose" and "Version 2589f9ea60a7" were noise. */
function definitionCard(definition, titleOf, admin) {
  // ["*"]: any task helper but itself (seed 004 §2.2), not a bare "*". Nobody when the
  // runtime offers it no execute_task (the server says: may_delegate), whatever its
  // delegates list says.
  const delegates = !definition.may_delegate ? t("agents.delegates_none")
    : definition.delegates === null ? t("agents.delegates_default")
    : definition.delegates.length === 1 && definition.delegates[0] === "*" ? t("agents.delegates_any")
      : definition.delegates.length ? definition.delegates.map(titleOf).join(", ") : t("agents.delegates_none");
  const details = admin
    ? el("p", { class: "muted small agent-details" },
      el("code", { text: definition.id }), definition.plugin ? ` · ${definition.plugin}` : null,
      " · ", t("agents.hash"), " ", el("code", { text: definition.definition_hash.slice(0, 12) }))
    : null;
  return el("article", { class: "card agent-definition", "data-agent-id": definition.id },
    el("h3", { text: definition.title || definition.id }),
    el("p", { text: definition.description }),
    el("dl", { class: "facts" },
      el("dt", { text: t("agents.state") }), el("dd", { text: definition.enabled ? t("agents.enabled") : t("agents.disabled") }),
      el("dt", { text: t("agents.delegates") }), el("dd", { text: delegates })),
    details);
}

/** What the page may promise the reader: their role may not delegate, or none (or not
 * all) of the chat agents they may start hands work to helpers (the server's rule,
 * `hand_off`): a companion's member was told of helpers their assistant never reaches. */
function introText(handOff) {
  if (!handOff) return t("agents.intro");
  if (!handOff.role_allows) return t("agents.intro_role_forbids");
  const without = handOff.assistants.filter((a) => !a.delegates).map((a) => a.title);
  if (without.length && without.length === handOff.assistants.length) return t("agents.intro_no_assistant", { assistants: without.join(", ") });
  return without.length ? `${t("agents.intro")} ${t("agents.intro_some_not", { assistants: without.join(", ") })}` : t("agents.intro");
}

/** When the run started (``started_at``, kept across a restart), not when it was asked
 * for: a run waiting for a free slot has not started, and says since when it waits. */
function startedText(run) {
  if (run.started_at) return formatDate(run.started_at);
  if (run.status === "queued") return t("agents.run_waiting_since", { since: formatDate(run.created_at) });
  return t("agents.run_never_started");
}

export async function renderAgents(ctx) {
  const response = await api("GET", "/api/agent-definitions");
  const page = el("div", { class: "page agents-page" }, pageHeader(t("agents.title"), introText(response.ok ? response.data.hand_off : null)));
  if (!response.ok) { page.append(notice("error", errorText(response))); return page; }
  const { definitions, refused, runs } = response.data;
  knowAgentTitles(definitions);
  const titleOf = (agentId) => definitions.find((d) => d.id === agentId)?.title || agentId;
  if (refused) {
    const box = notice("error", t("agents.refused", { count: refused.count }));
    if (refused.errors.length) box.append(el("ul", {}, ...refused.errors.map((e) => el("li", { text: e }))));
    page.append(box);
  } else {
    page.append(notice("ok", t("agents.loaded")));
  }
  const tasks = definitions.filter((d) => d.kind === "task");
  page.append(section(t("agents.definitions"), el("div", { class: "card-grid" }, ...tasks.map((d) => definitionCard(d, titleOf, ctx?.member?.is_admin === true)))));
  const table = el("table", { class: "table agent-runs" },
    el("thead", {}, el("tr", {}, ...["agents.run_agent", "agents.run_status", "agents.run_task", "agents.run_started"].map((k) => el("th", { text: t(k) })))),
    el("tbody", {}, ...runs.map((run) => el("tr", { "data-run-id": run.id },
      el("td", { text: titleOf(run.agent_id) }), el("td", { text: taskStatus(run.status) }),
      el("td", {}, link(`#chat/${encodeURIComponent(run.conversation_id)}`, run.task)), el("td", { text: startedText(run) })))));
  page.append(section(t("agents.runs"), runs.length ? el("div", { class: "table-wrap" }, table) : el("p", { class: "muted", text: t("agents.runs_none") })));
  return page;
}
