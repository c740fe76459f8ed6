// <plugin-page-host plugin-id entry-url page-id page-title [member-id]>: mounts a plugin's page.
// The page is an ES module served by the plugin's own router (same origin, so the
// CSP's script-src 'self' admits it) whose default export is an HTMLElement class.
// We register it under a tag derived from the plugin and page ids and mount it with
// `plugin-id` and `page-id` attributes. The shell knows nothing else about it.
import { el } from "../lib/dom.js";
import { t } from "../lib/i18n.js";

const tagOf = new Map(); // class → tag it was defined under

const slug = (value) => String(value).toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "") || "x";

/** A valid custom-element name for a plugin page: skald-p-<plugin>-<page>. */
export const tagNameFor = (pluginId, pageId) => `skald-p-${slug(pluginId)}-${slug(pageId)}`;

/** Only modules under this plugin's own route on our origin are imported. */
function entryUrl(raw, pluginId) {
  const url = new URL(String(raw || ""), location.origin);
  const prefix = `/api/plugin/${encodeURIComponent(pluginId)}/`;
  return url.origin === location.origin && url.pathname.startsWith(prefix) ? url.href : null;
}

function defineOnce(pluginId, pageId, PageClass) {
  if (tagOf.has(PageClass)) return tagOf.get(PageClass);
  const base = tagNameFor(pluginId, pageId);
  let tag = base;
  for (let n = 2; customElements.get(tag); n += 1) tag = `${base}-${n}`; // two ids that slug alike
  try {
    customElements.define(tag, PageClass);
  } catch (error) {
    // The module defined its class itself already: a class can be registered once,
    // so this tag gets a trivial subclass.
    if (error?.name !== "NotSupportedError") throw error;
    customElements.define(tag, class extends PageClass {});
  }
  tagOf.set(PageClass, tag);
  return tag;
}

/** Why a module did not load when the browser only says "Failed to fetch dynamically
 * imported module" (the cause is in the console alone): its HTTP status, or the
 * content type a browser refuses to run. Null when the fetch tells nothing more. */
async function diagnose(url) {
  if (!url) return null;
  try {
    const response = await fetch(url, { credentials: "same-origin" });
    if (!response.ok) return t("pluginpage.module_status", { status: response.status, url: new URL(url).pathname });
    const type = (response.headers.get("content-type") || "").split(";")[0].trim();
    return /javascript|ecmascript/i.test(type) ? null : t("pluginpage.module_type", { type: type || "?" });
  } catch {
    return null;
  }
}

/** Thrown when the page's own element failed as it was built or mounted: the cause is
 * its code, not the module's fetch, so `diagnose` has nothing to add. */
class ElementFailed extends Error {}

/** Run `mount` (creating the page's element, setting its attributes, putting it in the
 * document) and return the first error the element's code threw meanwhile. The browser
 * does not throw those to the caller: an exception in a custom element's constructor,
 * connectedCallback or attributeChangedCallback is only reported (the window's `error`
 * event), and the page stayed empty with the cause in the console alone. It is still
 * logged there, for the page's author, with its stack. */
function failureWhile(mount) {
  let failure = null;
  const listen = (event) => {
    if (failure) return;
    failure = event.error ?? new Error(event.message);
    event.preventDefault(); // handled here: said on the page, logged below
  };
  window.addEventListener("error", listen);
  try {
    mount();
  } finally {
    window.removeEventListener("error", listen);
  }
  if (failure) console.error(failure);
  return failure;
}

class PluginPageHost extends HTMLElement {
  connectedCallback() {
    if (this.started) return;
    this.started = true;
    this.mount();
  }

  async mount() {
    const pluginId = this.getAttribute("plugin-id") || "";
    const pageId = this.getAttribute("page-id") || "";
    const title = this.getAttribute("page-title") || pluginId;
    this.setAttribute("aria-busy", "true");
    this.replaceChildren(el("p", { class: "muted", text: t("pluginpage.loading") }));
    try {
      const url = entryUrl(this.getAttribute("entry-url"), pluginId);
      if (!url) throw new Error(t("pluginpage.bad_entry"));
      const module = await import(url);
      const PageClass = module.default;
      if (typeof PageClass !== "function" || !(PageClass.prototype instanceof HTMLElement)) {
        throw new Error(t("pluginpage.no_element"));
      }
      const tag = defineOnce(pluginId, pageId, PageClass);
      const failure = failureWhile(() => {
        const page = document.createElement(tag);
        page.setAttribute("plugin-id", pluginId);
        page.setAttribute("page-id", pageId);
        // A section of a member's admin page learns whose (WebPage.slot "member_admin").
        if (this.hasAttribute("member-id")) page.setAttribute("member-id", this.getAttribute("member-id"));
        this.replaceChildren(page);
      });
      if (failure) throw new ElementFailed(t("pluginpage.element_failed", { error: failure?.message || String(failure) }));
    } catch (error) {
      const why = (error instanceof ElementFailed ? null : await diagnose(entryUrl(this.getAttribute("entry-url"), pluginId)))
        || error?.message || String(error);
      this.replaceChildren(el("div", { class: "notice error", role: "alert" },
        el("strong", { text: t("pluginpage.failed", { title }) }),
        el("p", { class: "detail", text: why })));
    } finally {
      this.removeAttribute("aria-busy");
    }
  }
}

if (!customElements.get("plugin-page-host")) customElements.define("plugin-page-host", PluginPageHost);
