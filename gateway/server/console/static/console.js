// The console's behaviour: sign-in, the try-a-tool form, chat with streamed steps, the approvals inbox.
// Plain JavaScript, no build step, nothing fetched from elsewhere. Every state-changing request is JSON with
// the page's CSRF token in X-CSRF-Token (the gateway refuses forms and foreign origins).
"use strict";

const meta = (name) => (document.querySelector(`meta[name="${name}"]`) || {}).content || "";

async function postJSON(url, body) {
  const response = await fetch(url, {
    method: "POST",
    credentials: "same-origin",
    headers: {"Content-Type": "application/json", "X-CSRF-Token": meta("csrf-token")},
    body: JSON.stringify(body),
  });
  return response;
}

async function readAnswer(response) {
  const text = await response.text();
  try { return JSON.parse(text); } catch (e) { return {error: {message: text}}; }
}

function errorText(answer) {
  const error = (answer && answer.error) || {};
  const problems = (answer && answer.problems) || [];
  return [error.message || "Something went wrong.", ...problems.map((p) => "• " + p)].join("\n");
}

function el(tag, attrs = {}, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

// -- sign-in / sign-out ---------------------------------------------------------------------------
function setupSignin() {
  const form = document.getElementById("signin-form");
  if (form) {
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const error = document.getElementById("signin-error");
      error.textContent = "";
      const response = await postJSON(location.pathname, {key: form.key.value, next: form.dataset.next});
      const answer = await readAnswer(response);
      if (response.ok) location.assign(answer.next); else error.textContent = errorText(answer);
    });
  }
  const signout = document.getElementById("signout");
  if (signout) {
    signout.addEventListener("click", async () => {
      const answer = await readAnswer(await postJSON(meta("console-base") + "/signout", {}));
      location.assign(answer.next || meta("console-base") + "/signin");
    });
  }
}

// -- tables filtered as you type ------------------------------------------------------------------
function setupFilters() {
  for (const input of document.querySelectorAll("input[data-filter]")) {
    const table = document.querySelector(input.dataset.filter);
    input.addEventListener("input", () => {
      const words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
      for (const row of table.tBodies[0].rows) {
        const text = row.textContent.toLowerCase();
        row.hidden = !words.every((w) => text.includes(w));
      }
    });
  }
}

// -- the try-a-tool form --------------------------------------------------------------------------
const UNSET = Symbol("unset");

function collectField(field) {
  const kind = field.dataset.kind;
  if (kind === "object") {
    const children = field.querySelector(".children");
    const value = {};
    for (const child of Array.from(children.children).filter((c) => c.classList.contains("field"))) {
      const v = collectField(child);
      if (v !== UNSET) value[child.dataset.name] = v;
    }
    return Object.keys(value).length || field.hasAttribute("data-required") ? value : UNSET;
  }
  if (kind === "array") {
    const items = Array.from(field.querySelector(".items").children);
    const values = items.map((li) => collectField(li.querySelector(".field"))).map((v) => (v === UNSET ? null : v));
    return values.length || field.hasAttribute("data-required") ? values : UNSET;
  }
  const control = field.querySelector(".value");
  const raw = control.value;
  if (raw === "") return kind === "string" && field.hasAttribute("data-required") ? "" : UNSET;
  if (kind === "number" || kind === "integer") {
    const n = Number(raw);
    return Number.isFinite(n) ? n : raw;  // left as text: the gateway says what is wrong
  }
  if (kind === "boolean") return raw === "true";
  if (kind === "enum" || kind === "json") {
    try { return JSON.parse(raw); } catch (e) { return kind === "json" ? raw : raw; }
  }
  return raw;
}

function collectForm(form) {
  const root = form.querySelector(".schema-form");
  const value = {};
  for (const field of Array.from(root.children).filter((c) => c.classList.contains("field"))) {
    const v = collectField(field);
    if (field.dataset.name === "") return v === UNSET ? {} : v;  // a schema only JSON can say: the whole value
    if (v !== UNSET) value[field.dataset.name] = v;
  }
  return value;
}

function setupTryForm() {
  const form = document.getElementById("try-form");
  if (!form) return;
  const raw = document.getElementById("raw-arguments");
  const useRaw = document.getElementById("use-raw");
  const sync = () => { if (!useRaw.checked) raw.value = JSON.stringify(collectForm(form), null, 2); };
  form.addEventListener("input", (event) => { if (event.target !== raw) sync(); });
  form.addEventListener("change", (event) => { if (event.target !== raw && event.target !== useRaw) sync(); });
  raw.addEventListener("input", () => { useRaw.checked = true; });
  form.addEventListener("click", (event) => {
    const button = event.target.closest("button");
    if (!button) return;
    if (button.classList.contains("add-item")) {
      const fieldset = button.closest("fieldset");
      const template = fieldset.querySelector(":scope > template");
      const items = fieldset.querySelector(":scope > .items");
      const clone = template.content.cloneNode(true);
      const suffix = "-" + Date.now().toString(36) + items.children.length;
      for (const node of clone.querySelectorAll("[id]")) node.id += suffix;
      for (const node of clone.querySelectorAll("label[for]")) node.htmlFor += suffix;
      items.appendChild(clone);
      const first = items.lastElementChild.querySelector("input, select, textarea");
      if (first) first.focus();
      sync();
    } else if (button.classList.contains("remove-item")) {
      button.closest(".item").remove();
      sync();
    }
  });
  sync();
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    let args;
    const status = document.getElementById("result-status");
    const body = document.getElementById("result-body");
    document.getElementById("result").hidden = false;
    if (useRaw.checked) {
      try { args = JSON.parse(raw.value || "{}"); } catch (e) {
        status.textContent = "The raw JSON does not parse: " + e.message;
        body.textContent = "";
        return;
      }
    } else {
      args = collectForm(form);
    }
    status.textContent = "Running…";
    body.textContent = "";
    const response = await postJSON(form.dataset.run, {arguments: args});
    const answer = await readAnswer(response);
    if (!response.ok) {
      status.textContent = `Refused (HTTP ${response.status})`;
      body.textContent = errorText(answer);
      return;
    }
    const r = answer.result;
    const upstream = r.status ? `upstream HTTP ${r.status}` : "no request sent";
    const outcome = r.ok ? "OK" : (r.error_type || "error");
    status.textContent = `${outcome} · ${upstream} · ${r.duration_ms} ms upstream, ${answer.elapsed_ms} ms in all` +
      (r.approval_id ? ` · waits as approval ${r.approval_id}` : "");
    body.textContent = r.ok ? JSON.stringify(r.body, null, 2) : (r.error || "") + (r.body ? "\n\n" + JSON.stringify(r.body, null, 2) : "");
  });
}

// -- chat -----------------------------------------------------------------------------------------
function setupChat() {
  const form = document.getElementById("chat-form");
  if (!form) return;
  const transcript = document.getElementById("transcript");
  const input = document.getElementById("chat-input");
  const agent = document.getElementById("chat-agent");
  let messages = [];
  const reset = () => { messages = []; transcript.replaceChildren(); };
  agent.addEventListener("change", reset);
  document.getElementById("chat-reset").addEventListener("click", reset);
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) form.requestSubmit();
  });

  const addTurn = (role, text) => {
    const li = el("li", {class: "turn " + role});
    li.appendChild(el("span", {class: "role"}, role === "user" ? "You" : agent.value));
    const content = el("div", {class: "content"}, text);
    li.appendChild(content);
    transcript.appendChild(li);
    return {li, content};
  };
  const addStep = (turn, step, started) => {
    // One row per call: "running" when it starts, its outcome when it finishes.
    turn.steps = turn.steps || {};
    let row = turn.steps[step.call_id];
    if (!row) {
      row = turn.steps[step.call_id] = el("div", {class: "step"});
      turn.li.insertBefore(row, turn.content);
    }
    const args = JSON.stringify(step.arguments === undefined || step.arguments === null ? {} : step.arguments);
    const outcome = started ? "running…" : step.ok ? "ok" : (step.error_type || "error");
    row.className = "step status-" + (started ? "running" : step.ok ? "ok" : "error");
    row.textContent = `⚙ ${step.tool} ${args} → ${outcome}` + (started ? "" :
      (step.status ? ` · HTTP ${step.status}` : "") + ` · ${Math.round(step.duration_ms || 0)} ms`);
  };
  const showFinal = (turn, completion) => {
    const message = ((completion.choices || [])[0] || {}).message || {};
    turn.content.textContent = message.content || "";
    for (const step of ((completion.gateway || {}).steps || [])) addStep(turn, step);
    if (message.content) messages.push({role: "assistant", content: message.content});
    for (const p of ((completion.gateway || {}).pending_approvals || [])) addApproval(turn, p, completion.id);
  };
  const addApproval = (turn, pending, runId) => {
    const box = el("div", {class: "inline-approval", role: "group", "aria-label": `Approval for ${pending.tool}`});
    box.appendChild(el("p", {}, `${pending.tool} waits for approval: ${JSON.stringify(pending.arguments)}`));
    turn.li.appendChild(box);
    if (form.dataset.decides !== "yes") {  // a plain key: an approver decides; the run's page then has the answer
      const note = el("p", {class: "hint"}, "An approver decides it; the answer will be on ");
      note.appendChild(el("a", {href: form.dataset.runs + encodeURIComponent(runId || "")}, "the run's page"));
      note.appendChild(document.createTextNode("."));
      box.appendChild(note);
      return;
    }
    const reasonId = "reason-" + pending.id;
    box.appendChild(el("label", {for: reasonId}, "Reason (for a denial)"));
    const reason = el("input", {id: reasonId, type: "text"});
    box.appendChild(reason);
    const approve = el("button", {type: "button", class: "approve"}, "Approve");
    const deny = el("button", {type: "button", class: "deny"}, "Deny");
    box.append(approve, deny);
    const decide = async (decision) => {
      approve.disabled = deny.disabled = true;
      const body = {decision};
      if (decision === "deny" && reason.value) body.reason = reason.value;
      const response = await postJSON(form.dataset.approvals + encodeURIComponent(pending.id), body);
      const answer = await readAnswer(response);
      if (!response.ok) { box.appendChild(el("p", {class: "error"}, errorText(answer))); approve.disabled = deny.disabled = false; return; }
      box.appendChild(el("p", {class: "decided"}, decision === "approve" ? "Approved." : "Denied."));
      if (answer.choices) showFinal(addTurn("assistant", ""), answer);
    };
    approve.addEventListener("click", () => decide("approve"));
    deny.addEventListener("click", () => decide("deny"));
  };

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    input.value = "";
    addTurn("user", text);
    messages.push({role: "user", content: text});
    const turn = addTurn("assistant", "");
    turn.li.setAttribute("aria-busy", "true");
    const send = document.getElementById("chat-send");
    send.disabled = true;
    try {
      const response = await postJSON(form.dataset.chat + encodeURIComponent(agent.value), {messages});
      if (!response.ok) { turn.content.textContent = errorText(await readAnswer(response)); return; }
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      let said = "";
      for (;;) {
        const {value, done} = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, {stream: true});
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const frame = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          if (!frame.startsWith("data: ")) continue;
          const data = frame.slice(6);
          if (data === "[DONE]") continue;
          const chunk = JSON.parse(data);
          if (chunk.error) { turn.content.textContent = errorText(chunk); continue; }
          const delta = ((chunk.choices || [])[0] || {}).delta || {};
          if (delta.content) { said += delta.content; turn.content.textContent = said; }
          const g = chunk.gateway;
          if (!g) continue;
          if (g.step) addStep(turn, g.step, g.event === "step_started");
          if (g.steps !== undefined) {  // the final chunk: the run's summary
            if (said) messages.push({role: "assistant", content: said});
            for (const p of (g.pending_approvals || [])) addApproval(turn, p, chunk.id);
          }
        }
      }
    } finally {
      turn.li.removeAttribute("aria-busy");
      send.disabled = false;
      input.focus();
    }
  });
}

// -- approvals inbox ------------------------------------------------------------------------------
function describeOutcome(answer) {
  if (answer.status === "waiting") return `Decided; the run still waits for ${answer.waiting_for.join(", ")}.`;
  if (answer.status === "resumed") return answer.answer;  // another client's run: its answer is theirs
  if (answer.result) {
    const r = answer.result;
    return (r.ok ? `Ran: upstream HTTP ${r.status}` : `${r.error_type}: ${r.error}`) +
      (r.body !== null && r.body !== undefined ? "\n" + JSON.stringify(r.body, null, 2) : "");
  }
  const steps = ((answer.gateway || {}).steps || []).map((s) => `⚙ ${s.tool} → ${s.status}`);
  return [...steps, answerText(answer)].join("\n");
}

// A resumed run's text: a chat completion's message, or (a run started on /v1/responses) a Response's messages.
function answerText(answer) {
  if (answer.choices) return (((answer.choices[0] || {}).message || {}).content) || "";
  return (answer.output || []).filter((item) => item.type === "message").flatMap((item) => item.content || [])
    .filter((part) => part.type === "output_text").map((part) => part.text).join("");
}

function setupApprovals() {
  for (const card of document.querySelectorAll(".approval")) {
    if (!card.querySelector(".approve")) continue;  // shown, not decided here: the viewer is no approver
    const outcome = card.querySelector(".outcome");
    const args = card.querySelector(".approval-args");
    const original = args.value;
    const decide = async (decision) => {
      const body = {decision};
      if (decision === "approve" && args.value !== original) {
        try { body.arguments = JSON.parse(args.value); } catch (e) {
          outcome.textContent = "The arguments are not valid JSON: " + e.message;
          return;
        }
      }
      const reason = card.querySelector(".approval-reason").value;
      if (decision === "deny" && reason) body.reason = reason;
      for (const b of card.querySelectorAll("button")) b.disabled = true;
      outcome.textContent = decision === "approve" ? "Approving…" : "Denying…";
      const response = await postJSON(card.dataset.url, body);
      const answer = await readAnswer(response);
      if (!response.ok) {
        outcome.textContent = errorText(answer);
        if (response.status === 422) for (const b of card.querySelectorAll("button")) b.disabled = false;
        return;
      }
      card.classList.add(decision === "approve" ? "approved" : "denied");
      outcome.textContent = (decision === "approve" ? "Approved. " : "Denied. ") + describeOutcome(answer);
    };
    card.querySelector(".approve").addEventListener("click", () => decide("approve"));
    card.querySelector(".deny").addEventListener("click", () => decide("deny"));
  }
}

// -- the signed-in user's connections ---------------------------------------------------------------
function setupConnections() {
  for (const button of document.querySelectorAll(".connection-action")) {
    button.addEventListener("click", async () => {
      button.disabled = true;
      const response = await postJSON(button.dataset.url, {});
      const answer = await readAnswer(response);
      if (!response.ok) {
        document.getElementById("connection-error").textContent = errorText(answer);
        button.disabled = false;
        return;
      }
      window.location.assign(answer.next);  // the connect link (its start page, then the provider), or this page
    });
  }
}

document.addEventListener("DOMContentLoaded", () => {
  setupConnections();
  setupSignin();
  setupFilters();
  setupTryForm();
  setupChat();
  setupApprovals();
});
