// The dashboard's script: reads a namespace's views by day and its top keys
// (/v1/namespaces/:ns/days and /top), a key's days and visitors (/v1/counters/:ns/:key/days),
// and follows the open key's value live (/stream/:ns/:key, or a read every 5 s when reads need
// a token, which an EventSource cannot send). A token is kept in this tab's session storage,
// never in the address or the page's URL. Names from the API are set as text, never as HTML.

const $ = (id) => document.getElementById(id);
const TOKEN = "edgecount.dashboard.token";
const REFRESH_MS = 15_000;
const SVG = "http://www.w3.org/2000/svg";

const state = {
  ns: "",
  period: "7d",
  range: null,
  key: null,
  live: null,
  timer: null,
  // Bumped by every change of what is shown: an answer to an older ask is dropped.
  generation: 0,
};

class ApiFailure extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function api(path) {
  const headers = { accept: "application/json" };
  const token = sessionStorage.getItem(TOKEN);
  if (token) headers.authorization = `Bearer ${token}`;
  const response = await fetch(path, { headers, cache: "no-store" });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    throw new ApiFailure(
      response.status,
      body.error?.message ?? response.statusText,
    );
  }
  return body;
}

function explain(error) {
  if (error.status === 401 || error.status === 403) {
    return "Reading this namespace needs a token: paste one above and open it again.";
  }
  if (error.status === 429)
    return "Too many reads for now; the figures refresh shortly.";
  return `Could not read the figures: ${error.message}`;
}

const number = new Intl.NumberFormat();
const show = (id, value) =>
  ($(id).textContent = value === undefined ? "–" : number.format(value));

/** The query naming the period chosen. */
function periodQuery() {
  if (state.range) return `from=${state.range.from}&to=${state.range.to}`;
  return `period=${state.period}`;
}

function periodLabel() {
  if (state.range) return `${state.range.from} to ${state.range.to}`;
  return { today: "today", "7d": "last 7 days", "30d": "last 30 days" }[
    state.period
  ];
}

/** A bar chart of `series` (one or two lists of `{date, value}`) into `figure`. */
function chart(figure, series, colors) {
  const days = series[0];
  const width = 720;
  const height = 200;
  const left = 48;
  const bottom = 24;
  const most = Math.max(1, ...series.flat().map((d) => d.value));
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("role", "img");
  const slot = (width - left) / Math.max(1, days.length);
  const bar = Math.max(1, (slot * 0.8) / series.length);
  const add = (name, attributes, text) => {
    const element = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attributes)) element.setAttribute(k, v);
    if (text !== undefined) element.textContent = text;
    svg.append(element);
    return element;
  };
  add("line", {
    x1: left,
    x2: width,
    y1: height - bottom,
    y2: height - bottom,
    stroke: "#d1d9e0",
  });
  add(
    "text",
    {
      x: left - 6,
      y: 12,
      "text-anchor": "end",
      "font-size": 11,
      fill: "#59636e",
    },
    number.format(most),
  );
  add(
    "text",
    {
      x: left - 6,
      y: height - bottom,
      "text-anchor": "end",
      "font-size": 11,
      fill: "#59636e",
    },
    "0",
  );
  series.forEach((points, s) => {
    points.forEach((point, i) => {
      const h = ((height - bottom - 16) * point.value) / most;
      const rect = add("rect", {
        x: left + i * slot + slot * 0.1 + s * bar,
        y: height - bottom - h,
        width: bar,
        height: Math.max(0, h),
        fill: colors[s],
      });
      const title = document.createElementNS(SVG, "title");
      title.textContent = `${point.date}: ${number.format(point.value)}`;
      rect.append(title);
    });
  });
  const label = (i, anchor) =>
    add(
      "text",
      {
        x: left + i * slot + slot / 2,
        y: height - 6,
        "text-anchor": anchor,
        "font-size": 11,
        fill: "#59636e",
      },
      days[i].date,
    );
  if (days.length > 0) label(0, days.length === 1 ? "middle" : "start");
  if (days.length > 1) label(days.length - 1, "end");
  figure.replaceChildren(svg);
  const total = series[0].reduce((sum, d) => sum + d.value, 0);
  figure.setAttribute(
    "aria-label",
    `${figure.dataset.what ?? "Views"} by day, ${periodLabel()}: ${number.format(total)} in all`,
  );
}

async function refreshNamespace(generation) {
  const ns = encodeURIComponent(state.ns);
  const query = periodQuery();
  const days = await api(`/v1/namespaces/${ns}/days?${query}`);
  // Today, 7 and 30 days end today, in the namespace's zone: a range is read apart.
  const today = state.range
    ? (await api(`/v1/namespaces/${ns}/days?period=today`)).count
    : days.days.at(-1)?.count;
  // The top keys come from the read the worker kept of the period.
  const top = await api(`/v1/namespaces/${ns}/top?${query}&limit=100`);
  if (generation !== state.generation) return;
  $("period-name").textContent = periodLabel();
  show("views", days.count);
  show("today", today);
  $("zone").textContent =
    `Days in ${days.time_zone}, ${days.from} to ${days.to}.`;
  chart(
    $("chart"),
    [days.days.map((d) => ({ date: d.date, value: d.count }))],
    ["var(--views)"],
  );
  const pages = top.keys.filter((k) => k.count !== 0).length;
  $("pages").textContent = pages < 100 ? number.format(pages) : "100+";
  const rows = top.keys.slice(0, 10).map((entry) => {
    const row = document.createElement("tr");
    const name = document.createElement("td");
    const open = document.createElement("button");
    open.type = "button";
    open.textContent = entry.key;
    open.addEventListener("click", () => openKey(entry.key));
    name.append(open);
    const views = document.createElement("td");
    views.className = "n";
    views.textContent = number.format(entry.count);
    const visitors = document.createElement("td");
    visitors.className = "n";
    visitors.textContent = "…";
    row.append(name, views, visitors);
    keyDays(entry.key).then(
      (read) => (visitors.textContent = number.format(read.uniques ?? 0)),
      () => (visitors.textContent = "–"),
    );
    return row;
  });
  $("top").replaceChildren(...rows);
}

function keyDays(key) {
  return api(
    `/v1/counters/${encodeURIComponent(state.ns)}/${encodeURIComponent(key)}/days?${periodQuery()}&unique=1`,
  );
}

async function refreshKey(generation) {
  if (state.key === null) return;
  const read = await keyDays(state.key);
  if (generation !== state.generation) return;
  show("key-views", read.count);
  show("key-visitors", read.uniques);
  const views = read.days.map((d) => ({ date: d.date, value: d.count }));
  const visitors = read.days.map((d) => ({
    date: d.date,
    value: d.uniques ?? 0,
  }));
  chart($("key-chart"), [views, visitors], ["var(--views)", "var(--visitors)"]);
}

/** Names the live stream takes (the compatible routes' names); others are read every 5 s. */
const STREAMABLE = /^[A-Za-z0-9_.-]{3,64}$/;

/** Follows the open key's value: its stream, or a read every 5 s where the stream cannot
 * serve (a token is needed, which an EventSource cannot send; a name the stream does not take;
 * a stream refused). */
function follow(key) {
  state.live?.();
  const path = `${encodeURIComponent(state.ns)}/${encodeURIComponent(key)}`;
  const poll = () => {
    const read = () =>
      api(`/v1/counters/${path}`).then(
        (c) => show("key-value", c.value),
        () => {},
      );
    read();
    const every = setInterval(read, 5_000);
    state.live = () => clearInterval(every);
  };
  if (
    sessionStorage.getItem(TOKEN) ||
    !STREAMABLE.test(state.ns) ||
    !STREAMABLE.test(key)
  ) {
    poll();
    return;
  }
  const source = new EventSource(`/stream/${path}`);
  let heard = false;
  source.onmessage = (event) => {
    heard = true;
    show("key-value", JSON.parse(event.data).value);
  };
  source.onerror = () => {
    if (heard) return;
    source.close();
    poll();
  };
  state.live = () => source.close();
}

async function openKey(key) {
  state.key = key;
  state.generation++;
  $("key-title").textContent = key;
  for (const id of ["key-value", "key-views", "key-visitors"])
    $(id).textContent = "–";
  $("key-panel").hidden = false;
  follow(key);
  await refresh();
  $("key-panel").scrollIntoView({ block: "nearest" });
}

async function refresh() {
  const generation = state.generation;
  try {
    await Promise.all([refreshNamespace(generation), refreshKey(generation)]);
    if (generation === state.generation) $("status").textContent = "";
  } catch (error) {
    if (generation === state.generation)
      $("status").textContent = explain(error);
  }
}

function choosePeriod(period) {
  state.generation++;
  state.period = period;
  state.range = null;
  for (const button of document.querySelectorAll("[data-period]")) {
    button.setAttribute(
      "aria-pressed",
      String(button.dataset.period === period),
    );
  }
  refresh();
}

async function openNamespace(ns) {
  state.ns = ns;
  state.key = null;
  state.live?.();
  $("key-panel").hidden = true;
  const url = new URL(location.href);
  url.searchParams.set("ns", ns);
  history.replaceState(null, "", url);
  $("board").hidden = false;
  clearInterval(state.timer);
  state.timer = setInterval(refresh, REFRESH_MS);
  choosePeriod(state.period);
}

$("forget").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN);
  $("status").textContent = "The token is forgotten.";
});
$("open").addEventListener("submit", (event) => {
  event.preventDefault();
  const token = $("token").value.trim();
  if (token) sessionStorage.setItem(TOKEN, token);
  $("token").value = "";
  openNamespace($("ns").value.trim());
});
for (const button of document.querySelectorAll("[data-period]")) {
  button.addEventListener("click", () => choosePeriod(button.dataset.period));
}
$("range").addEventListener("click", () => {
  const from = $("from").value;
  const to = $("to").value;
  if (!from || !to) {
    $("status").textContent = "Choose both dates of the range.";
    return;
  }
  state.generation++;
  state.range = { from, to };
  for (const button of document.querySelectorAll("[data-period]"))
    button.setAttribute("aria-pressed", "false");
  refresh();
});

const named = new URLSearchParams(location.search).get("ns");
if (named) {
  $("ns").value = named;
  openNamespace(named);
}
