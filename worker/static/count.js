// edgecount's one script tag: counts this page view and fills the counters the page shows.
//
//   <script async src="https://counter.example.com/v1/count.js" data-ns="pages"></script>
//   Views: <span data-edgecount></span>       (this page's counter)
//   Likes: <span data-edgecount="likes/home"></span>
//
// Counts the view in `data-ns` under `data-key` (default: the page's path), one-way unless the
// page shows it; `data-count`, `data-unique`, `data-period`, `data-abbreviated`: docs/browser.md.
(() => {
  const script = document.currentScript;
  // A page that includes the tag twice (a layout and a page, say) counts once.
  if (!script || window.edgecountCounted) return;
  window.edgecountCounted = true;
  const api = script.src.slice(0, script.src.lastIndexOf("/v1/count.js"));
  const data = script.dataset;
  // The rule of client/src/path-key.ts, which says why (docs/browser.md#the-key-of-a-page).
  const pathKey = (path) => {
    let name = path;
    try {
      name = decodeURIComponent(path);
    } catch {}
    if (/[\0-\x1f\x7f-\x9f]/.test(name)) name = path;
    const bytes = new TextEncoder().encode(name);
    if (bytes.length <= 256) return name;
    let hash = 0xcbf29ce484222325n;
    for (const byte of bytes)
      hash = ((hash ^ BigInt(byte)) * 0x100000001b3n) & 0xffffffffffffffffn;
    const cut = new TextDecoder().decode(bytes.subarray(0, 239), {
      stream: true,
    });
    return `${cut}~${hash.toString(16).padStart(16, "0")}`;
  };
  const own = `${data.ns || "pages"}/${data.key || pathKey(location.pathname)}`;
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
  // What an element shows: a counter, with `data-period` a period's count (`today`, `7d`,
  // ...), with `data-unique="true"` its unique visitors.
  const elements = () =>
    [...document.querySelectorAll("[data-edgecount]")].map((element) => ({
      element,
      name: element.dataset.edgecount || own,
      period: element.dataset.period || "",
      unique: element.dataset.unique === "true",
    }));
  const shows = (e) => `${e.name}|${e.period}|${e.unique}`;
  // data-abbreviated: 12.3k, as badges show it (cut, never rounded up).
  const short = (n) => {
    const a = n < 0n ? -n : n;
    let i = 6;
    let t;
    while (i && (t = (a * 10n) / 1000n ** BigInt(i)) < 10n) i--;
    return i
      ? `${n < 0n ? "-" : ""}${t / 10n}${t < 1000n && t % 10n ? `.${t % 10n}` : ""}${"kMGTPE"[i - 1]}`
      : `${n}`;
  };
  const show = (view, shown) => {
    if (shown === undefined) return;
    for (const e of elements())
      if (shows(e) === view)
        e.element.textContent =
          e.element.dataset.abbreviated === "true"
            ? short(BigInt(shown))
            : BigInt(shown).toLocaleString();
  };
  const read = (e) =>
    e.period || e.unique
      ? fetch(
          `${url(e.name)}/days?period=${encodeURIComponent(e.period || "total")}${e.unique ? "&unique=1" : ""}`,
          { headers: { accept: "text/plain" } },
        ).then((response) => (response.ok ? response.text() : undefined))
      : fetch(url(e.name)).then(value);
  const fill = () => {
    const views = new Map(elements().map((e) => [shows(e), e]));
    let counted = Promise.resolve();
    if (data.count !== "false") {
      const plain = `${own}||false`;
      // Shown here: the count waits for its answer, so what the page shows includes it.
      const shownHere = [...views.values()].some((e) => e.name === own);
      const showsPlain = views.delete(plain);
      const query = [
        shownHere ? "" : "async=1",
        data.unique === "true" ? "unique=1" : "",
      ]
        .filter(Boolean)
        .join("&");
      counted = fetch(`${url(own)}/incr${query ? `?${query}` : ""}`, {
        method: "POST",
        keepalive: true,
      })
        .then((response) => showsPlain && value(response))
        .then((shown) => show(plain, shown || undefined))
        .catch(() => {});
    }
    for (const [view, e] of views)
      if (e.name.indexOf("/") > 0)
        (e.name === own ? counted.then(() => read(e)) : read(e)).then(
          (shown) => show(view, shown),
          () => {},
        );
  };
  if (document.readyState === "loading")
    document.addEventListener("DOMContentLoaded", fill);
  else fill();
})();
