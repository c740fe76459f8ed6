// #chat: the home page. Chat itself is not built yet; say so plainly.
import { el, link } from "../lib/dom.js";
import { t } from "../lib/i18n.js";
import { pageHeader, section } from "../lib/ui.js";

export function renderChat({ member }) {
  const name = member.display_name || member.username;
  return el("div", { class: "page" },
    pageHeader(t("chat.title", { name }), t("chat.intro")),
    section(null,
      el("p", { text: t("chat.later") }),
      el("p", { class: "muted" }, t("chat.meanwhile"), " ", link("#account", t("nav.account")),
        member.is_admin ? " · " : null, member.is_admin ? link("#plugins", t("nav.plugins")) : null,
        member.is_admin ? " · " : null, member.is_admin ? link("#members", t("nav.members")) : null)));
}
