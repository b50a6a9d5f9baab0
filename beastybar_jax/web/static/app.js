// The page: Play, Watch, Analyse and Records over the JSON API (beastybar_jax/web/app.py).
// Everything drawn comes from the server's view of the game; the page keeps no secret.
"use strict";

const $ = (id) => document.getElementById(id);
let INFO = null;      // /api/info
let G = null;         // the current game view
let autoplay = null;  // watch mode timer
let busy = null;      // the token of the request that changes the game, while it is in flight

async function api(method, path, body) {
  const opts = { method, headers: {} };
  if (body !== undefined) { opts.headers["Content-Type"] = "application/json"; opts.body = JSON.stringify(body); }
  const response = await fetch(path, opts);
  let data = null;
  try { data = await response.json(); } catch (e) { data = { error: `HTTP ${response.status}` }; }
  if (!response.ok) throw new Error(data.error || `HTTP ${response.status}`);
  return { status: response.status, data };
}

function showError(message) {
  const box = $("error");
  box.textContent = message || "";
  box.hidden = !message;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const svgNS = "http://www.w3.org/2000/svg";

function el(tag, attrs = {}, ...children) {
  const node = tag.startsWith("svg:") ? document.createElementNS(svgNS, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") node.textContent = v; else if (k === "onclick") node.onclick = v; else node.setAttribute(k, v);
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

// ---------------------------------------------------------------- cards (SVG)

function seatColor(seat) { return seat === 0 ? "var(--seat0)" : "var(--seat1)"; }

function cardSvg(card, extra = {}) {
  const svg = el("svg:svg", { viewBox: "0 0 64 92", width: 64, height: 92, class: "card", ...extra });
  svg.append(el("svg:rect", { x: 1, y: 1, width: 62, height: 90, rx: 7, fill: "#fbf7ef", stroke: seatColor(card.owner),
    "stroke-width": 3 }));
  svg.append(el("svg:rect", { x: 4, y: 4, width: 56, height: 20, rx: 4, fill: seatColor(card.owner) }));
  svg.append(el("svg:text", { x: 8, y: 19, "font-size": 15, "font-weight": "bold", fill: "#fff", text: card.strength }));
  svg.append(el("svg:text", { x: 32, y: 54, "font-size": card.name.length > 8 ? 9.5 : 11, "text-anchor": "middle",
    fill: "#1d1d1f", text: card.name }));
  for (let i = 0; i < card.points; i++) {  // one dot per point
    svg.append(el("svg:circle", { cx: 12 + i * 9, cy: 78, r: 3.3, fill: "#d9a21b", stroke: "#7a5a0c" }));
  }
  const title = el("svg:title", { text: `${card.name} (strength ${card.strength}, ${card.points} points) of P${card.owner}` });
  svg.append(title);
  return svg;
}

function cardBack(seat) {
  const svg = el("svg:svg", { viewBox: "0 0 64 92", width: 64, height: 92, class: "card back" });
  svg.append(el("svg:rect", { x: 1, y: 1, width: 62, height: 90, rx: 7, fill: seatColor(seat), stroke: "#fbf7ef",
    "stroke-width": 2 }));
  for (let i = -90; i < 92; i += 12) {
    svg.append(el("svg:line", { x1: i, y1: 0, x2: i + 92, y2: 92, stroke: "rgba(255,255,255,.25)", "stroke-width": 4 }));
  }
  return svg;
}

function zone(title, cards, small = false) {
  const box = el("div", { class: `cards${small ? " small" : ""}` });
  for (const c of cards) box.append(c);
  return el("div", { class: "zone" }, el("div", { class: "title", text: title }), box);
}

// ---------------------------------------------------------------- drawing a game

function seatName(seat) {
  if (!G) return `P${seat}`;
  const p = G.players[seat];
  if (G.human !== null) return p.human ? "You" : `Opponent (${p.name})`;
  return `P${seat} (${p.name})`;
}

function moveGroups() {
  const groups = {};
  for (const m of G.legal) (groups[m.group] = groups[m.group] || []).push(m);
  return groups;
}

function chooseGroup(group, node) {
  const options = moveGroups()[group] || [];
  $("options").replaceChildren();
  document.querySelectorAll(".chosen").forEach((n) => n.classList.remove("chosen"));
  if (options.length === 1) return play(options[0].action);
  if (node) node.classList.add("chosen");
  $("options").append(el("span", { text: "Choose: " }));
  for (const m of options) {
    $("options").append(el("button", { class: "option", "data-action": m.action, text: m.label,
      onclick: () => play(m.action) }));
  }
}

function drawBeastyBar(table) {
  const root = el("div");
  const bottom = G.human !== null ? G.human : 0;
  const groups = G.viewing === G.ply ? moveGroups() : {};
  const sideOf = (seat) => {
    const p = table.players[seat];
    const side = el("div", { class: "side", "data-seat": seat });
    let hand;
    if (p.hand === null) {
      hand = Array.from({ length: p.hand_count }, () => cardBack(seat));
    } else {
      hand = p.hand.map((c) => {
        const group = `card:${c.species}`;
        const playable = seat === G.human && groups[group];
        const node = cardSvg(c, playable ? { class: "card playable", "data-group": group } : {});
        if (playable) node.addEventListener("click", () => chooseGroup(group, node));
        return node;
      });
    }
    side.append(el("div", { class: "zone" }, el("div", { class: "score", text: `${seatName(seat)}: ${p.points} points` }),
      el("div", { class: "count", text: `deck: ${p.deck_count} card${p.deck_count === 1 ? "" : "s"}` })));
    side.append(zone(p.hand === null ? "hand (hidden)" : "hand", hand));
    side.append(zone("bar", p.bar.map((c) => cardSvg(c)), true));
    side.append(zone("THAT'S IT", p.thats_it.map((c) => cardSvg(c)), true));
    if (p.deck) side.append(zone("deck, next first", p.deck.map((c) => cardSvg(c)), true));
    return side;
  };
  root.append(sideOf(1 - bottom));
  const queue = el("div", { class: "queue-row" }, el("span", { class: "gate", text: "bar \u2190 front" }));
  const cards = el("div", { class: "cards", id: "queue" });
  table.queue.forEach((c) => cards.append(cardSvg(c)));
  if (!table.queue.length) cards.append(el("span", { text: "the queue is empty" }));
  queue.append(cards, el("span", { class: "gate", text: "back \u2192 THAT'S IT" }));
  root.append(queue, sideOf(bottom));
  return root;
}

function drawBoard(table) {
  const board = el("div", { class: "board" });
  const groups = G.viewing === G.ply ? moveGroups() : {};
  table.cells.forEach((cell, i) => {
    const group = `cell:${i}`;
    const playable = Boolean(groups[group]);
    const button = el("button", { id: `cell-${i}`, class: `cell${playable ? " playable" : ""}${cell.owner !== null
      ? ` seat${cell.owner}` : ""}`, text: cell.mark || "" });
    if (playable) button.addEventListener("click", () => chooseGroup(group)); else button.disabled = true;
    board.append(button);
  });
  return el("div", {}, el("div", { class: "score", text: `${seatName(0)} plays X, ${seatName(1)} plays O` }), board);
}

function statusText() {
  if (G.finished) return (G.viewing !== G.ply ? `Position after move ${G.viewing} of ${G.ply}. ` : "") +
    `Game over: ${G.result.text}`;
  if (G.viewing !== G.ply) return `Position after move ${G.viewing} of ${G.ply} (press \u201cnow\u201d to return)`;
  if (G.waiting_for === "human") return "Your move: click a card" + (G.game === "tictactoe" ? " (a cell)" : "");
  const status = G.agent_status;
  if (status && status.status === "compiling") {
    return `Compiling ${status.spec} for its first move: ${compileTime(status)} (once per agent; this can take a ` +
      `minute)\u2026`;
  }
  if (status && status.status === "error") return `The agent ${status.spec} failed: ${status.error}`;
  if (status && status.status === "queued") return `${status.spec} waits for other agents to compile: ${status.error}`;
  if (status && status.status === "thinking") return `${seatName(G.to_move)} is thinking (${status.seconds} s)\u2026`;
  return `${seatName(G.to_move)} is thinking\u2026`;
}

function render(view) {
  G = view;
  $("game").hidden = false;
  $("options").replaceChildren();
  const status = $("status");
  status.textContent = statusText();
  status.className = G.agent_status && G.agent_status.status === "compiling" && !G.finished ? "compiling" : "";
  const table = G.table;
  const drawn = table.kind === "beastybar" ? drawBeastyBar(table)
    : table.kind === "board" ? drawBoard(table) : el("pre", { class: "text", text: table.text });
  $("table").replaceChildren(drawn);
  $("nav-ply").textContent = `move ${G.viewing} / ${G.ply}`;
  const log = $("log");
  log.replaceChildren(...G.history.map((h) => el("li", { class: h.ply === G.viewing - 1 ? "current" : "",
    text: h.narration })));
  const current = log.querySelector(".current");
  if (current) current.scrollIntoView({ block: "nearest" });
  document.body.dataset.finished = G.finished;
  document.body.dataset.ply = G.ply;
  document.body.dataset.viewing = G.viewing;
}

// ---------------------------------------------------------------- actions

// One request that changes the game at a time: a click meanwhile is dropped, but a new
// game or a loaded record takes over (``takeOver``): the request in flight, an agent's
// compile polled for a minute included, then ends without drawing its answer or error.
async function guarded(fn, takeOver = false) {
  if (busy && !takeOver) return;
  const token = {};
  busy = token;
  const current = () => busy === token;
  try { showError(""); await fn(current); } catch (e) {
    if (current()) { showError(e.message); stopAutoplay(); }
  } finally { if (current()) busy = null; }
}

// A new game or a loaded record takes over; where it fails (a bad spec, a 503, a broken
// record), the game on the page goes on: its agent, if the page waited on it, is asked again.
async function takeOver(fn) {
  await guarded(fn, true);
  if (!busy && G && G.mode === "play" && !G.finished && G.waiting_for === "agent") {
    const failure = $("error").textContent;  // kept in view while the old game goes on
    await guarded(async (current) => { showError(failure); await agentMoves(current); });
  }
}

async function advance(current, pause) {
  // One move of the agent; while it compiles or thinks the server answers 202 (the page
  // says so, with the seconds so far): ask again, soon while it thinks.
  while (current()) {
    const { status, data } = await api("POST", `/api/games/${G.id}/advance`, { ply: G.ply });
    if (!current()) return;
    render(data);
    if (status !== 202) return;
    refreshCompiles();
    await sleep(data.agent_status && data.agent_status.status === "thinking" ? Math.min(pause, 250) : pause);
  }
}

async function agentMoves(current) {
  while (current() && G && !G.finished && G.waiting_for === "agent" && G.mode === "play") await advance(current, 1000);
}

function play(action) {
  return guarded(async (current) => {
    const { data } = await api("POST", `/api/games/${G.id}/move`, { action, ply: G.ply });
    if (!current()) return;
    render(data);
    await agentMoves(current);
  });
}

function newGame(mode) {
  stopAutoplay();
  const p = mode === "play" ? "play" : "watch";
  const body = { game: $(`${p}-game`).value, mode };
  const seed = $(`${p}-seed`).value;
  if (seed !== "") body.seed = Number(seed);
  if (mode === "play") {
    body.seat = $("play-seat").value;
    if ($("play-agent").value.trim()) body.agent = $("play-agent").value.trim();
  } else {
    const a = $("watch-agent0").value.trim(), b = $("watch-agent1").value.trim();
    if (a || b) {
      const fallback = INFO.games[body.game].default_agent;
      body.agents = [a || fallback, b || fallback];
    }
  }
  return takeOver(async (current) => {
    const { data } = await api("POST", "/api/games", body);
    if (!current()) return;
    $("analysis").replaceChildren();
    render(data);
    await agentMoves(current);
  });
}

async function stepTo(ply) {
  if (!G) return;
  await guarded(async (current) => {
    if (ply > G.ply && !G.finished && G.waiting_for === "agent") return advance(current, 500);
    ply = Math.max(0, Math.min(ply, G.ply));
    const { data } = await api("GET", `/api/games/${G.id}?ply=${ply}`);
    if (current()) render(data);
  });
}

function stopAutoplay() {
  if (autoplay) clearTimeout(autoplay);
  autoplay = null;
  $("watch-autoplay").textContent = "Autoplay";
}

const atEnd = () => !G || (G.finished && G.viewing === G.ply);

function tick() {
  if (atEnd()) return stopAutoplay();
  stepTo(G.viewing + 1).then(() => {
    if (atEnd()) stopAutoplay(); else if (autoplay) autoplay = setTimeout(tick, Number($("watch-speed").value));
  });
}

function navigate(ply) {  // a step by hand pauses autoplay
  stopAutoplay();
  return stepTo(ply);
}

function toggleAutoplay() {
  if (autoplay) return stopAutoplay();
  $("watch-autoplay").textContent = "Pause";
  autoplay = setTimeout(tick, 0);
}

function pct(x) { return `${(100 * x).toFixed(1)}%`; }
function signed(x, digits = 2) { return x === null || x === undefined ? "\u2013" : (x > 0 ? "+" : "") + x.toFixed(digits); }
const RESULT = { 1: "win", 0: "draw", [-1]: "loss" };

function renderAnalysis(a) {
  const box = $("analysis");
  const head = [`Analysis of the position after move ${a.ply} (${seatName(a.mover)} to move) by ${a.analyst}`];
  if (a.search) head.push(`search: ${a.search.simulations} simulations x ${a.search.worlds} world(s), value ` +
    `${signed(a.search.value)}, would play ${a.search.choice_label}`);
  if (a.exact) head.push(`solved exactly: ${RESULT[a.exact.result]} by ${signed(a.exact.margin, 0)} points under best play`);
  head.push(a.information);
  const cols = ["move", a.learned_prior ? "prior (network)" : "prior (uniform)"];
  if (a.search) cols.push("visits", "value");
  if (a.exact) cols.push("exact result", "margin");
  const table = el("table", { id: "analysis-table" }, el("tr", {}, ...cols.map((c) => el("th", { text: c }))));
  for (const m of a.moves) {
    const best = a.search && m.action === a.search.choice;
    const cells = [el("td", { text: m.label }),
      el("td", {}, el("span", { class: "bar", style: `width:${Math.round(60 * m.prior)}px` }), ` ${pct(m.prior)}`)];
    if (a.search) cells.push(el("td", { text: m.visits }), el("td", { text: signed(m.value) }));
    if (a.exact) {
      cells.push(el("td", { class: m.exact_result > 0 ? "win" : m.exact_result < 0 ? "loss" : "",
        text: m.exact_result === null ? "bound" : RESULT[m.exact_result] }), el("td", { text: signed(m.exact_margin, 0) }));
    }
    table.append(el("tr", { class: `move${best ? " best" : ""}`, "data-action": m.action }, ...cells));
  }
  box.replaceChildren(...head.map((t) => el("p", { text: t })), table,
    el("p", { class: "hint", text: `${a.seconds} s` }));
}

function analyse() {
  if (!G) return showError("Start or load a game first.");
  return guarded(async (current) => {
    const body = { ply: G.viewing };
    if ($("analyse-analyst").value.trim()) body.analyst = $("analyse-analyst").value.trim();
    while (current()) {
      const { status, data } = await api("POST", `/api/games/${G.id}/analyse`, body);
      if (!current()) return;
      if (status === 200) return renderAnalysis(data);
      const text = data.status === "analysing" ? `Analysing with ${data.analyst}: ${data.seconds} s\u2026`
        : `Compiling ${data.compiling}: ${compileTime(data)} (once; this can take a minute)\u2026`;
      $("analysis").replaceChildren(el("p", { class: "compiling", id: "analysis-compiling", text }));
      refreshCompiles();
      await sleep(data.status === "analysing" ? 250 : 1000);
    }
  });
}

function downloadRecord() {
  if (!G) return showError("Start or load a game first.");
  return guarded(async () => {
    const record = (await api("GET", `/api/games/${G.id}/record`)).data;
    const blob = new Blob([JSON.stringify(record, null, 1)], { type: "application/json" });
    const link = el("a", { href: URL.createObjectURL(blob), download: `${record.game}-seed${record.seed}.json` });
    document.body.append(link);
    link.click();
    link.remove();
    $("record-status").textContent = `Saved ${record.game}-seed${record.seed}.json (${record.moves.length} moves).`;
  });
}

async function loadRecord(file) {
  let record;
  try { record = JSON.parse(await file.text()); } catch (e) { return showError(`${file.name} is not JSON: ${e.message}`); }
  return takeOver(async (current) => {
    const { data } = await api("POST", "/api/records", { record });
    if (!current()) return;
    stopAutoplay();
    render(data);
    $("analysis").replaceChildren();
    $("record-status").textContent = `Loaded ${file.name}: ${G.ply} moves; step through it or analyse any position.`;
  });
}

// ---------------------------------------------------------------- what the server compiles

function compileTime(entry) {
  return entry.waiting ? `waiting for the ${entry.queue} compiles before it, ${entry.seconds} s so far`
    : `${entry.seconds} s so far`;
}

// The server's compile queues (GET /api/agents): what compiles and for how long, asked
// again every second while anything compiles, every 10 s otherwise.
let compilesTimer = null;
async function refreshCompiles() {
  if (compilesTimer) clearTimeout(compilesTimer);
  let compiling = [];
  try {
    compiling = (await api("GET", "/api/agents")).data.agents.filter((a) => a.status === "compiling");
  } catch (e) { /* the game's own requests say what is wrong */ }
  const box = $("compiles");
  box.hidden = compiling.length === 0;
  box.textContent = compiling.length === 0 ? "" : "Compiling: " + compiling.map((a) =>
    `${a.spec || "the exact solver"} (${a.kind === "act" ? a.game : `${a.kind}, ${a.game}`}: ` +
    `${a.waiting ? "waiting, " : ""}${a.seconds} s)`).join(", ");
  compilesTimer = setTimeout(refreshCompiles, compiling.length ? 1000 : 10000);
}

function showPanel(name) {
  for (const tab of document.querySelectorAll(".tab")) tab.classList.toggle("active", tab.dataset.panel === name);
  for (const panel of document.querySelectorAll(".panel")) panel.hidden = panel.id !== `panel-${name}`;
}

function fillAgents(game) {
  const list = $("agent-list");
  list.replaceChildren(...INFO.games[game].agents.filter((a) => !a.includes("<")).map((a) => el("option", { value: a })));
  for (const id of ["play-agent", "watch-agent0", "watch-agent1"]) $(id).placeholder = `${INFO.games[game].default_agent}`;
}

async function init() {
  INFO = (await api("GET", "/api/info")).data;
  for (const select of document.querySelectorAll(".game-select")) {
    select.replaceChildren(...Object.keys(INFO.games).map((g) => el("option", { value: g, text: g })));
    select.value = INFO.default_game;
    select.addEventListener("change", () => fillAgents(select.value));
  }
  fillAgents(INFO.default_game);
  for (const tab of document.querySelectorAll(".tab")) tab.addEventListener("click", () => showPanel(tab.dataset.panel));
  $("play-start").onclick = () => newGame("play");
  $("watch-start").onclick = () => newGame("watch");
  $("watch-autoplay").onclick = toggleAutoplay;
  $("watch-speed").oninput = () => { $("watch-speed-label").textContent = `${($("watch-speed").value / 1000).toFixed(1)} s`; };
  $("nav-first").onclick = () => navigate(0);
  $("nav-back").onclick = () => navigate(G.viewing - 1);
  $("nav-forward").onclick = () => navigate(G.viewing + 1);
  $("nav-last").onclick = () => navigate(G.ply);
  $("analyse-run").onclick = analyse;
  $("record-download").onclick = downloadRecord;
  $("record-file").onchange = (e) => { if (e.target.files[0]) loadRecord(e.target.files[0]); e.target.value = ""; };
  showPanel("play");
  refreshCompiles();
  document.body.dataset.ready = "true";
}

init().catch((e) => showError(`Could not reach the server: ${e.message}`));
