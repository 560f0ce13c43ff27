// agentgym's DOM walker: stamps interactive elements with a stable data-agentgym-id and returns
// the page as a flat list of nodes [id, role, name, value, options, checked, depth].
// An id, once given, stays with its element while the element lives.
(maxNodes) => {
  const ATTR = "data-agentgym-id";
  const w = window;
  if (!w.__agentgymNext) w.__agentgymNext = 1;
  const SKIP = new Set(["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE", "HEAD", "META", "LINK", "SVG"]);
  const TEXT_INPUT = new Set(["text", "search", "email", "password", "number", "tel", "url", "",
    "date", "time", "datetime-local", "month", "week"]);
  const clip = (s, n) => { s = (s || "").replace(/\s+/g, " ").trim();
    return s.length > n ? s.slice(0, n - 1) + "…" : s; };
  const roleOf = (el) => {
    const explicit = el.getAttribute("role");
    if (explicit) return explicit.split(" ")[0];
    const tag = el.tagName;
    if (tag === "A" && el.hasAttribute("href")) return "link";
    if (tag === "BUTTON" || tag === "SUMMARY") return "button";
    if (tag === "SELECT") return "combobox";
    if (tag === "TEXTAREA") return "textbox";
    if (tag === "INPUT") {
      const t = (el.getAttribute("type") || "").toLowerCase();
      if (t === "hidden") return null;
      if (t === "checkbox") return "checkbox";
      if (t === "radio") return "radio";
      if (["button", "submit", "reset", "image"].includes(t)) return "button";
      if (t === "range") return "slider";
      return TEXT_INPUT.has(t) ? "textbox" : "input";
    }
    if (/^H[1-6]$/.test(tag)) return "heading";
    if (tag === "IMG") return el.getAttribute("alt") ? "img" : null;
    if (el.hasAttribute("onclick") || el.hasAttribute("tabindex") || el.isContentEditable)
      return "clickable";
    return null;
  };
  const INTERACTIVE = new Set(["link", "button", "combobox", "textbox", "checkbox", "radio",
    "slider", "input", "clickable", "menuitem", "tab", "option", "switch", "searchbox",
    "listbox", "treeitem", "spinbutton", "gridcell"]);
  const labelOf = (el) => {
    const aria = el.getAttribute("aria-label");
    if (aria) return aria;
    if (el.id) {
      const label = document.querySelector(`label[for="${CSS.escape(el.id)}"]`);
      if (label) return label.innerText;
    }
    const wrapping = el.closest("label");
    if (wrapping && wrapping !== el) return wrapping.innerText;
    return el.getAttribute("placeholder") || el.getAttribute("title") || el.getAttribute("name")
      || "";
  };
  const nameOf = (el, role) => {
    if (el.tagName === "INPUT") {
      const t = (el.getAttribute("type") || "").toLowerCase();
      if (["button", "submit", "reset"].includes(t)) return el.value || el.getAttribute("aria-label") || t;
      return labelOf(el);
    }
    if (el.tagName === "SELECT" || el.tagName === "TEXTAREA") return labelOf(el);
    if (el.tagName === "IMG") return el.getAttribute("alt") || "";
    return el.getAttribute("aria-label") || el.innerText || el.getAttribute("title") || "";
  };
  const visible = (el) => {
    const style = getComputedStyle(el);
    if (style.display === "none" || style.visibility === "hidden") return false;
    const r = el.getBoundingClientRect();
    return r.width > 0 || r.height > 0 || style.display === "contents";
  };
  const CONTROLS = "a[href],button,input,select,textarea,[onclick],[role],[tabindex]";
  const nodes = [];
  let truncated = 0;
  const push = (node) => { if (nodes.length < maxNodes) nodes.push(node); else truncated++; };
  const walk = (el, depth) => {
    if (SKIP.has(el.tagName.toUpperCase()) || !visible(el)) return;
    const role = roleOf(el);
    let kept = false;
    if (role && (INTERACTIVE.has(role) || role === "heading" || role === "img")) {
      let id = null;
      if (INTERACTIVE.has(role)) {
        id = Number(el.getAttribute(ATTR)) || 0;
        if (!id) { id = w.__agentgymNext++; el.setAttribute(ATTR, String(id)); }
      }
      let value = null, options = [], checked = null;
      if (role === "textbox" || role === "slider" || role === "input" || role === "searchbox")
        value = el.isContentEditable ? el.innerText : (el.value ?? null);
      if (el.tagName === "SELECT") {
        options = Array.from(el.options).map((o) => clip(o.label || o.text, 80));
        const chosen = el.options[el.selectedIndex];
        value = chosen ? clip(chosen.label || chosen.text, 80) : null;
      }
      if (role === "checkbox" || role === "radio" || role === "switch")
        checked = el.checked ?? (el.getAttribute("aria-checked") === "true");
      const limit = role === "heading" ? 200 : 100;
      push([id, role, clip(nameOf(el, role), limit), value === null ? null : clip(String(value), 200),
        options, checked, depth]);
      kept = true;
      // A control's text is its name; descend only into containers holding other controls.
      if (!el.querySelector(CONTROLS)) return;
    }
    const childDepth = kept ? depth + 1 : depth;
    for (const child of el.childNodes) {
      if (child.nodeType === Node.TEXT_NODE) {
        const text = clip(child.textContent, 300);
        if (text && !kept) push([null, "text", text, null, [], null, depth]);
      } else if (child.nodeType === Node.ELEMENT_NODE && child.tagName !== "OPTION") {
        walk(child, childDepth);
      }
    }
  };
  if (document.body) walk(document.body, 0);
  const active = document.activeElement;
  const focused = active && active !== document.body ? Number(active.getAttribute(ATTR)) || null : null;
  return { nodes, truncated, focused, title: document.title };
}
