// The member's Mobile app page in the web shell: show a pairing code with its QR code
// (drawn by the server with segno, shown as an <img> from a data: URL, which the CSP
// allows), and the paired devices with name, platform and last seen, each unlinkable.
// Everything goes in through textContent or attributes: a device name is data.
// The code appears in a polite live region: focus stays on the button that asked for
// it, so without one a screen reader said nothing. The QR image is named by what it is;
// its alt was the pairing address, read out character by character.
// The shell's page header is the page's one h1 (its title); the page is two cards in
// the shell's classes.
// Unlinking asks first (the shell's dialog: Escape cancels, focus goes back), and each
// Unlink button is named with its device: a list of identical "Unlink" buttons read out
// alone said nothing of which phone went.
import { call, confirm, el, locale } from "/ui/lib/plugin-kit.js";

// In the reader's language, not the browser's: a German page said "12/4/2026, 11:26 PM".
// As the shell writes a time (web/lib/ui.js formatDate: "6.12.2026, 16:19:14"), so the
// page's dates read like the rest of the shell's ("06.12.2026, 16:15" did not).
const when = (iso) => {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? String(iso ?? "—") : date.toLocaleString(locale() || undefined);
};
// A device's name put into one of the page's strings; a function, so a name with "$&"
// in it is put in as written.
const named = (template, device) => template.replace(/\{name\}/g, () => device.name);
/** How often a shown code asks whether a phone used it. */
const PAIRING_POLL_MS = 2000;

export default class MobilePairingPage extends HTMLElement {
  async connectedCallback() {
    this.base = `/api/plugin/${encodeURIComponent(this.getAttribute("plugin-id") || "mobile-connector")}`;
    this.s = (await call("GET", `${this.base}/page/strings`)).strings;
    const s = this.s;
    this.classList.add("page");
    this.codeBox = el("div", { class: "mobile-pairing stack", "aria-live": "polite" });
    this.message = el("p", { class: "mobile-message form-status", role: "status" });
    this.list = el("ul", { class: "mobile-devices roster" });
    this.replaceChildren(
      el("section", { class: "card" },
        el("p", { text: s.page_intro }),
        el("div", { class: "actions" },
          el("button", { type: "button", class: "btn primary", text: s.page_new_code, on: { click: () => this.newCode() } })),
        this.codeBox,
        this.message),
      el("section", { class: "card" }, (this.devicesHeading = el("h2", { text: s.page_devices, tabindex: "-1" })), this.list),
    );
    await this.refresh();
  }

  async newCode() {
    this.message.textContent = "";
    try {
      const pairing = await call("POST", `${this.base}/pairing`);
      // An address of this computer only (127.0.0.1, the default ``make run``): said beside
      // the code, which no phone can open (it was shown without a word).
      const loopback = pairing.loopback
        ? el("p", { class: "notice warning mobile-loopback", "data-testid": "mobile-loopback",
          text: this.s.page_loopback.replace(/\{address\}/g, () => new URL(pairing.app_url).host) })
        : null;
      this.codeBox.replaceChildren(
        ...(loopback ? [loopback] : []),
        el("img", { src: pairing.qr_svg, alt: this.s.page_qr_alt, class: "mobile-qr", width: 220, height: 220 }),
        el("p", { class: "mobile-code", text: pairing.code }),
        el("p", { text: this.s.page_code_help }),
        el("p", {}, el("a", { href: pairing.pair_url, text: this.s.page_open_app })),
      );
      this.watchPairing(pairing.expires_in);
    } catch (error) {
      this.message.textContent = error.message;
    }
  }

  /** While a code is shown, the devices are asked for every few seconds: the phone that
   * uses it appears here, and the used code goes (the page stayed on a spent code); a
   * code past its time is replaced by a notice that it expired. */
  async watchPairing(seconds) {
    const token = (this.watching = {});
    // Counted from the code's arrival, before the first await: a slow devices list moved
    // the code's end later than the server's.
    const until = Date.now() + Math.max(1, Number(seconds) || 600) * 1000;
    const known = new Set((await this.devices()).map((d) => d.id));
    while (this.watching === token && this.isConnected && Date.now() < until) {
      await new Promise((resolve) => setTimeout(resolve, PAIRING_POLL_MS));
      const fresh = (await this.devices().catch(() => [])).find((d) => !known.has(d.id));
      if (fresh && this.watching === token) {
        this.watching = null;
        this.codeBox.replaceChildren();
        this.message.textContent = named(this.s.page_paired, fresh);
        await this.refresh();
        return;
      }
    }
    // Its time is up: the code goes, said in the live region with a way to a new one
    // (a spent code stayed on screen unchanged, as if a phone could still use it).
    if (this.watching !== token || !this.isConnected) return;
    this.watching = null;
    this.codeBox.replaceChildren(
      el("p", { class: "notice warning mobile-expired", text: this.s.page_code_expired }),
      el("div", { class: "actions" },
        el("button", { type: "button", class: "btn", text: this.s.page_new_code_again, on: { click: () => this.newCode() } })),
    );
  }

  /** The phone's kind in the reader's words ("web" was shown as the app sent it); one
   * the page has no words for is left out rather than shown as a code. */
  platform(code) {
    return this.s[`page_platform_${code}`] || "";
  }

  async devices() {
    return (await call("GET", `${this.base}/devices`)).devices;
  }

  async refresh() {
    try {
      const devices = await this.devices();
      if (!devices.length) {
        this.list.replaceChildren(el("li", { class: "muted", text: this.s.page_no_devices }));
        return;
      }
      this.list.replaceChildren(
        ...devices.map((device) =>
          el(
            "li",
            { class: "mobile-device" },
            el("strong", { text: device.name }),
            ` ${[this.platform(device.platform), this.s.page_last_seen.replace("{when}", () => when(device.last_seen_at))].filter(Boolean).join(" · ")} `,
            el("button", {
              type: "button",
              class: "btn small",
              text: this.s.page_unlink,
              "aria-label": named(this.s.page_unlink_device, device),
              on: { click: () => this.unlink(device) },
            }),
          ),
        ),
      );
    } catch (error) {
      this.message.textContent = error.message;
    }
  }

  async unlink(device) {
    const confirmed = await confirm({
      title: named(this.s.page_unlink_title, device),
      message: named(this.s.page_unlink_message, device),
      confirmLabel: this.s.page_unlink,
    });
    if (!confirmed) return;
    try {
      await call("DELETE", `${this.base}/devices/${encodeURIComponent(device.id)}`);
    } catch (error) {
      this.message.textContent = error.message;
    }
    await this.refresh();
    // Its button went with it: the list's heading takes the focus, not the page's end.
    if (!this.contains(document.activeElement)) this.devicesHeading.focus();
  }
}
