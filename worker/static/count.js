// edgecount's one script tag: counts this page view and fills the counters the page shows.
//
//   <script async src="https://counter.example.com/v1/count.js" data-ns="pages"></script>
//   Views: <span data-edgecount></span>       (this page's counter)
//   Likes: <span data-edgecount="likes/home"></span>
//
// The view is counted in `data-ns` (default `pages`) under `data-key` (default the page's
// path), without an idempotency key and with a keepalive request, so it lands even if the page
// is left at once. It is one-way unless the page shows this counter: then it waits for the
// value, which includes this view. `data-count="false"` only shows. See docs/browser.md.
(() => {
  const script = document.currentScript;
  // A page that includes the tag twice (a layout and a page, say) counts once.
  if (!script || window.edgecountCounted) return;
  window.edgecountCounted = true;
  const api = script.src.slice(0, script.src.lastIndexOf("/v1/count.js"));
  const data = script.dataset;
  const own = `${data.ns || "pages"}/${data.key || location.pathname}`;
  const url = (name) => {
    const cut = name.indexOf("/");
    const part = (text) => encodeURIComponent(text);
    return `${api}/v1/counters/${part(name.slice(0, cut))}/${part(name.slice(cut + 1))}`;
  };
  // Kept as text, so values past 2^53 show exactly.
  const value = (response) =>
    response.ok
      ? response.text().then((text) => /"value":(-?\d+)/.exec(text)?.[1])
      : undefined;
  const elements = () =>
    [...document.querySelectorAll("[data-edgecount]")].map((element) => [
      element,
      element.dataset.edgecount || own,
    ]);
  const show = (name, shown) => {
    if (shown === undefined) return;
    for (const [element, of] of elements())
      if (of === name) element.textContent = BigInt(shown).toLocaleString();
  };
  const fill = () => {
    const names = new Set(elements().map(([, name]) => name));
    const counted = data.count !== "false";
    if (counted) {
      const shownHere = names.delete(own);
      fetch(`${url(own)}/incr${shownHere ? "" : "?async=1"}`, {
        method: "POST",
        keepalive: true,
      })
        .then((response) => shownHere && value(response))
        .then(
          (shown) => shownHere && show(own, shown),
          () => {},
        );
    }
    for (const name of names)
      if (name.indexOf("/") > 0)
        fetch(url(name))
          .then(value)
          .then(
            (shown) => show(name, shown),
            () => {},
          );
  };
  if (document.readyState === "loading")
    document.addEventListener("DOMContentLoaded", fill);
  else fill();
})();
