// Live regions (a chat's log, a status line) that must not read out what is only drawn
// again: a whole conversation redrawn after a Regenerate or a version flip, math that
// KaTeX fills in after its TeX was shown. A screen reader hears changes of a live region
// as the browser reports them once it has drawn them, so the region is made not live
// (aria-live="off") while it changes and live again only after the browser has drawn
// that: switched back in the same task, nothing would have been held back.

const holds = new WeakMap(); // region → {live: its aria-live before, count, then: [callbacks]}

/** After the browser has drawn what changed so far (its accessibility tree with it). */
function afterDrawn(callback) {
  requestAnimationFrame(() => setTimeout(callback, 0));
}

/** `region` not live until what changes in it in this task is drawn; `then` runs once
 * it is live again (what it adds then is said). Nested holds end with the last one. */
export function hush(region, then = null) {
  let hold = holds.get(region);
  if (!hold) {
    hold = { live: region.getAttribute("aria-live"), count: 0, then: [] };
    holds.set(region, hold);
    region.setAttribute("aria-live", "off");
  }
  hold.count += 1;
  if (then) hold.then.push(then);
  afterDrawn(() => {
    hold.count -= 1;
    if (hold.count) return;
    holds.delete(region);
    if (hold.live === null) region.removeAttribute("aria-live"); else region.setAttribute("aria-live", hold.live);
    for (const callback of hold.then) callback();
  });
}

/** Whether `region` is held not live just now. */
export const hushed = (region) => holds.has(region);

/** The live region `node` is in, if any. */
export const liveRegionOf = (node) => node.closest?.("[aria-live], [role=log], [role=status], [role=alert]") || null;
