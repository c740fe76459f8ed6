// #plugin/<plugin_id>/<page_id>: a plugin's own page, mounted by <plugin-page-host>.
import { el } from "../lib/dom.js";
import { t } from "../lib/i18n.js";
import { icon } from "../lib/icons.js";
import { notice, pageHeader } from "../lib/ui.js";

export function renderPluginPage({ rest, pages }) {
  const [pluginId = "", pageId = ""] = rest;
  const page = pages().find((p) => p.plugin_id === pluginId && p.page_id === pageId);
  if (!page) {
    return el("div", { class: "page" }, pageHeader(t("pluginpage.unavailable_title")), notice("info", t("pluginpage.unavailable")));
  }
  const host = el("plugin-page-host", {
    "plugin-id": page.plugin_id, "page-id": page.page_id, "entry-url": page.entry_url, "page-title": page.title,
  });
  // The page's one h1 is this header (the page's title, translated by the plugin's
  // bundle): a plugin's page starts at h2, so the title is never said twice.
  const header = pageHeader(page.title);
  header.querySelector("h1").prepend(icon(page.icon));
  return el("div", { class: "page plugin-page" }, header, host);
}
