// "Choose your own password": the first step after signing in while the password is
// still the one an admin chose (at the member's creation or a reset), before the shell.
// The admin knows that password, and it opens the member's data: the member types the
// one they were given (never prefilled) and a new one, or postpones it explicitly —
// until the next sign-in in this browser (every tab of this one; the sign-in page forgets it).
import { api } from "../lib/api.js";
import { el } from "../lib/dom.js";
import { t } from "../lib/i18n.js";
import { errorText, passwordMinLength } from "../lib/ui.js";
import { authCard, fieldError, input } from "./auth.js";

const LATER = "skald.ownPasswordLater";

/** Whether the member said "Not now" in this browser since signing in (localStorage: a
 * new tab of the same sign-in must not ask again; `showLogin` forgets it). */
export function ownPasswordPostponed(memberId) {
  try { return localStorage.getItem(LATER) === memberId; } catch { return false; }
}

/** Signed out: the next sign-in asks again. */
export function forgetOwnPasswordLater() {
  try { localStorage.removeItem(LATER); } catch { /* storage off: nothing kept */ }
}

function postpone(memberId) {
  try { localStorage.setItem(LATER, memberId); } catch { /* storage off: asked again at a reload */ }
}

/** Draw the step in `root`; `onDone(changed)` once the password is the member's own
 * (true) or they postponed it (false). */
export function renderOwnPassword(root, member, onDone) {
  const later = el("button", { class: "btn quiet wide", type: "button", "data-testid": "own-password-later", text: t("own_password.later") });
  later.addEventListener("click", () => { postpone(member.id); onDone(false); });
  const card = authCard("own_password.title", null, [
    // Whose password this is, for the browser's password manager; hidden from everyone.
    el("input", { type: "text", name: "username", autocomplete: "username", hidden: true, readonly: true, value: member.username || "" }),
    ...input("own_password.given", "current_password", "password", { autocomplete: "current-password" }),
    ...input("account.password_new", "new_password", "password", { autocomplete: "new-password", minlength: String(passwordMinLength()) },
      t("setup.password_rule", { min: passwordMinLength() })),
    ...input("account.password_repeat", "repeat", "password", { autocomplete: "new-password" }),
  ], "own_password.submit", async (data, error, form) => {
    const current = String(data.get("current_password") || "");
    const fresh = String(data.get("new_password") || "");
    const problems = {
      current_password: current ? "" : t("own_password.given_missing"),
      new_password: fresh.length < passwordMinLength() ? t("setup.password_short") : fresh === current ? t("own_password.same") : "",
      repeat: fresh && data.get("repeat") !== fresh ? t("setup.mismatch") : "",
    };
    for (const [name, message] of Object.entries(problems)) fieldError(form, name, message);
    const first = Object.keys(problems).find((name) => problems[name]);
    if (first) { form.elements.namedItem(first).focus(); return; }
    const response = await api("POST", "/api/auth/password", { current_password: current, new_password: fresh });
    if (response.ok) { member.password_set_by_admin = false; await onDone(true); return; }
    const name = response.status === 403 ? "current_password" : response.data?.field;
    const message = response.status === 403 ? t("own_password.given_wrong") : errorText(response);
    if (name && form.elements.namedItem(name)) { fieldError(form, name, message); form.elements.namedItem(name).focus(); }
    else error.textContent = message;
  }, el("div", { class: "stack" },
    el("p", { class: "intro", text: t("own_password.intro") }),
    el("p", { class: "intro", text: member.encrypted ? t("own_password.why_encrypted") : t("own_password.why_plain") })),
  later);
  card.querySelector("form").dataset.testid = "own-password";
  root.replaceChildren(card);
  root.querySelector("input[name=current_password]")?.focus();
}
