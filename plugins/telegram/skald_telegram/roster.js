// The admin's roster: which member linked which Telegram chat, since when. Read-only;
// grants are written on each member's page. Names come from the admin's member list.
// The shell's page header is the page's one h1 (its title); the roster is a card with
// the shell's table, or its "nobody yet" line.
import { call, locale } from "/ui/lib/plugin-kit.js";

function node(tag, text, className) {
  const element = document.createElement(tag);
  if (text !== undefined) element.textContent = text;
  if (className) element.className = className;
  return element;
}

/** In the reader's language: the stored ISO time ("2026-12-04T23:22:54Z") is no date
 * an admin reads. Written as the shell writes a time (web/lib/ui.js formatDate:
 * "6.12.2026, 16:19:14"), so the roster reads like the host's own pages. */
function since(iso) {
  const date = new Date(iso);
  if (!iso || Number.isNaN(date.getTime())) return iso || "";
  return date.toLocaleString(locale() || undefined);
}

/** The kit's call: a refusal in the reader's language (the host's `error.<code>`), its
 * English text only when it has no code. */
const get = (path) => call("GET", path);

export default class TelegramRoster extends HTMLElement {
  async connectedCallback() {
    const pluginId = this.getAttribute("plugin-id") || "telegram";
    this.classList.add("page");
    const body = node("section", undefined, "card");
    this.replaceChildren(body);
    try {
      const roster = await get(`/api/plugin/${encodeURIComponent(pluginId)}/roster`);
      const s = roster.strings;
      // Started but not connected to the Bot API (still trying, or refused later on):
      // the host's card cannot say so, this page does.
      const line = roster.connection && roster.connection.line;
      if (line) {
        const notice = node("section", undefined, "card");
        notice.append(node("p", line, "telegram-connection error-text"));
        this.prepend(notice);
      }
      if (roster.links.length === 0) {
        body.replaceChildren(node("p", s.roster_empty, "muted"));
        return;
      }
      const names = {};
      try {
        const { members } = await get("/api/admin/members");
        for (const member of members) names[member.id] = member.display_name || member.username;
      } catch (error) {
        // the ids still identify the members
      }
      const table = node("table", undefined, "table");
      const head = node("tr");
      for (const title of [s.roster_member, s.roster_chat, s.roster_since]) head.append(node("th", title));
      const rows = node("tbody");
      table.append(node("thead"), rows);
      table.firstChild.append(head);
      for (const link of roster.links) {
        const row = node("tr");
        row.className = "telegram-link";
        const member = node("td");
        const anchor = node("a", names[link.member_id] || link.member_id);
        anchor.href = `#users/${encodeURIComponent(link.member_id)}`;
        member.append(anchor);
        row.append(member, node("td", link.chat_name || String(link.chat_id)), node("td", since(link.linked_at)));
        rows.append(row);
      }
      const wrap = node("div", undefined, "table-wrap");
      wrap.append(table);
      body.replaceChildren(wrap);
    } catch (error) {
      body.replaceChildren(node("p", error.message, "error-text"));
    }
  }
}
